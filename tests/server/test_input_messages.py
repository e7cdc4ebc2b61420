"""Error messages about malformed chat input name the user's input and the parameter; none
prints ``None`` for a missing field or the text of an internal exception."""

from __future__ import annotations

import pytest

from formcast.server.chat import chat_messages
from formcast.server.errors import APIError
from formcast.server.protocol import NamedToolChoice, ToolDefinition
from formcast.server.tools import selected_tools

TOOL = ToolDefinition.model_validate(
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
)


def _error(call) -> APIError:
    with pytest.raises(APIError) as info:
        call()
    assert info.value.status == 400
    assert "None" not in info.value.message and "Error:" not in info.value.message
    return info.value


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"content": "hi"}, "messages[0].role"),
        ({"role": ["user"], "content": "hi"}, "messages[0].role"),
        ({"role": "user", "content": [{"text": "hi"}]}, "messages[0].content[0]"),
        ({"role": "user", "content": ["hi"]}, "messages[0].content[0]"),
        ({"role": "user", "content": [{"type": "text"}]}, "messages[0].content[0].text"),
        ({"role": "assistant", "tool_calls": [{"id": "x"}]}, "messages[0].tool_calls[0].function"),
        ({"role": "assistant", "tool_calls": "f()"}, "messages[0].tool_calls"),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]},
            "messages[0].tool_calls[0].function.arguments",
        ),
    ],
)
def test_malformed_messages_name_the_field(message, param):
    error = _error(lambda: chat_messages([message], [], "none"))
    assert error.param == param


def test_tool_errors_never_print_none():
    no_type = ToolDefinition.model_validate(
        {"type": "function", "function": {"name": "g", "parameters": {"properties": {}}}}
    )
    error = _error(lambda: selected_tools([no_type], "auto"))
    assert "without 'type'" in error.message and error.param == "tools[0].function.parameters"
    unnamed = NamedToolChoice.model_validate({"type": "function", "function": {}})
    error = _error(lambda: selected_tools([TOOL], unnamed))
    assert error.param == "tool_choice.function.name"
