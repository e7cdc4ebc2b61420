"""Tool calls streamed as OpenAI streams them: the name first, then ``arguments`` in pieces.

Oracles: ``json.dumps(value, ensure_ascii=False)`` for the rewritten arguments (the
non-streamed ``arguments`` string); the same greedy request not streamed; ``jsonschema`` for
the arguments against the tool's ``parameters``; OpenAI's chunk shape (the first delta of a
call carries ``index``, ``id``, ``type`` and ``function.name`` with ``arguments: ""``, the
later ones only ``index`` and ``function.arguments``).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server_helpers import MODEL
from test_openai_api import TOOLS

from formcast.server.protocol import ToolDefinition
from formcast.server.tools import ToolCallStream, openai_call

SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
TOOL_DEFINITIONS = [ToolDefinition.model_validate(tool) for tool in TOOLS]
WEATHER_QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
ADD_QUESTION = [{"role": "user", "content": "Add 2 and 3."}]


def openai_tool_call(text: str) -> dict[str, Any] | None:
    """The ``tool_calls`` entry of one call object's text, if it is complete."""
    stream = ToolCallStream()
    stream.feed(text)
    stream.finish()
    return openai_call(stream) if stream.is_complete else None


def _past_call(call_id: str, a: int, b: int) -> dict[str, Any]:
    arguments = json.dumps({"a": a, "b": b})
    function = {"name": "add", "arguments": arguments}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}]}  # fmt: skip


# two earlier turns that called the tool (rendered in the format): greedy SmolLM2 then opens a
# call by itself under tool_choice="auto"
FEW_SHOT_ADD = [
    {"role": "user", "content": "Add 5 and 7."},
    _past_call("c1", 5, 7),
    {"role": "user", "content": "Add 1 and 9."},
    _past_call("c2", 1, 9),
    *ADD_QUESTION,
]


# -- the incremental parser, without a server --------------------------------------------------


def _feed_in_pieces(text: str, cuts: list[int]) -> tuple[ToolCallStream, list[dict[str, Any]]]:
    stream = ToolCallStream()
    deltas: list[dict[str, Any]] = []
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        deltas += stream.feed(text[start:end])
    deltas += stream.finish()
    return stream, deltas


def _check_openai_shape(deltas: list[dict[str, Any]], name: str) -> str:
    """The deltas of one call are OpenAI's; returns the concatenated arguments."""
    first, rest = deltas[0], deltas[1:]
    assert first["index"] == 0 and first["type"] == "function"
    assert first["id"].startswith("call_") and len(first["id"]) == len("call_") + 24
    assert first["function"] == {"name": name, "arguments": ""}
    for delta in rest:
        assert set(delta) == {"index", "function"} and delta["index"] == 0
        assert set(delta["function"]) == {"arguments"} and delta["function"]["arguments"]
    return "".join(delta["function"]["arguments"] for delta in rest)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
LAYOUTS = [
    {"ensure_ascii": False, "separators": (",", ":")},
    {"ensure_ascii": False},
    {"ensure_ascii": True, "separators": (",", ":")},
    {"ensure_ascii": True, "indent": 2},
]


@settings(max_examples=300, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5),
    layout=st.sampled_from(LAYOUTS),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_streamed_arguments_are_json_dumps_in_any_pieces(arguments, layout, cuts):
    """Any layout and escaping of the generated JSON, fed in any pieces: the deltas
    concatenate to ``json.dumps(arguments, ensure_ascii=False)``, the name comes first."""
    text = json.dumps({"name": "f", "arguments": arguments}, **layout)
    stream, deltas = _feed_in_pieces(text, cuts)
    expected = json.dumps(arguments, ensure_ascii=False)
    assert _check_openai_shape(deltas, "f") == expected == stream.arguments
    assert stream.is_complete and not stream.is_invalid


@pytest.mark.parametrize(
    ("arguments_text", "expected"),
    [
        ('{"s":"\\ud83d\\ude00 \\u00e9\\/\\t"}', '{"s": "\U0001f600 é/\\t"}'),  # pair joined
        ('{"s":"\\ud83d!"}', '{"s": "\\ud83d!"}'),  # unpaired: kept as an escape
        ('{"n":[1.50,1E5,-0,0.1e-2,12345678901234567890]}', None),
        ('{"x":1e400}', '{"x": 1e400}'),  # json.dumps would write the invalid "Infinity"
        ('{"t":true,"f":false,"z":null,"e":{},"a":[]}', None),
    ],
)
def test_rewriting_edge_cases(arguments_text, expected):
    text = '{"name":"f","arguments":' + arguments_text + "}"
    for cuts in ([], list(range(len(text)))):  # one piece, then a character at a time
        stream, deltas = _feed_in_pieces(text, cuts)
        if expected is None:
            expected = json.dumps(json.loads(arguments_text), ensure_ascii=False)
        assert _check_openai_shape(deltas, "f") == expected
        json.loads(expected)  # valid JSON, always


def test_name_is_sent_first_even_when_written_after_the_arguments():
    stream, deltas = _feed_in_pieces('{"arguments": {"k": [1, 2]}, "name": "g"}', [5, 17, 30])
    assert _check_openai_shape(deltas, "g") == '{"k": [1, 2]}' and stream.is_complete


def test_a_cut_call_hands_out_its_partial_arguments():
    stream = ToolCallStream()
    deltas = stream.feed('{"name":"add","arguments":{"a":2,"b":3')
    assert _check_openai_shape(deltas, "add") == '{"a": 2, "b": '  # 3 may continue: held
    (last,) = stream.finish()
    assert last["function"]["arguments"] == "3" and not stream.is_complete
    assert ToolCallStream().feed('{"name":"ad') == []  # no delta before the name is whole


def test_text_that_is_no_call_gives_no_deltas():
    for text in ("hello", '{"name": 3, "arguments": {}}', '["name"]', ' x{"name":"f"'):
        stream = ToolCallStream()
        assert stream.feed(text) + stream.finish() == [], text
        assert stream.is_invalid and not stream.is_complete
    stream = ToolCallStream()
    assert stream.feed('{"name":"f"}')[0]["function"]["name"] == "f"  # a call without arguments
    assert stream.feed(" x") == [] and stream.finish() == []  # then trailing text
    assert stream.has_started and stream.is_invalid and not stream.is_complete
    assert openai_tool_call('{"name":"add","arguments":{"a":1') is None


def test_non_streamed_arguments_equal_json_dumps():
    call = openai_tool_call('{"name":"add","arguments":{"a":1,"b":-2}}')
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "add", "arguments": '{"a": 1, "b": -2}'}


# -- through the server ------------------------------------------------------------------------


def _stream_choices(client, **request: Any) -> dict[int, dict[str, Any]]:
    """Stream a chat completion; per choice index: its tool-call deltas (as dicts), content,
    finish reasons, and the number of chunks that carried it."""
    choices: dict[int, dict[str, Any]] = {}
    for chunk in client.chat.completions.create(model=MODEL, stream=True, **request):
        assert len(chunk.choices) <= 1
        for choice in chunk.choices:
            state = choices.setdefault(
                choice.index, {"tool_calls": [], "content": "", "reasons": []}
            )
            delta = choice.delta
            state["content"] += delta.content or ""
            for call in delta.tool_calls or []:
                state["tool_calls"].append(call.model_dump(exclude_none=True))
            state["reasons"].append(choice.finish_reason)
    return choices


def _one_call(state: dict[str, Any]) -> tuple[str, str]:
    """``(name, arguments)`` of a choice's streamed call, its deltas checked."""
    deltas = state["tool_calls"]
    name = deltas[0]["function"]["name"]
    arguments = _check_openai_shape(deltas, name)
    assert len(deltas) - 1 > 1, deltas  # the arguments arrived in more than one piece
    assert state["content"] == ""  # nothing of the call leaks into content
    assert state["reasons"][-1] == "tool_calls" and set(state["reasons"][:-1]) == {None}
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    return name, arguments


@pytest.mark.parametrize(
    ("tool_choice", "messages", "name"),
    [
        ("required", WEATHER_QUESTION, "get_weather"),
        ({"type": "function", "function": {"name": "get_weather"}}, ADD_QUESTION, "get_weather"),
        ({"type": "function", "function": {"name": "add"}}, ADD_QUESTION, "add"),
    ],
)
def test_streamed_call_equals_the_non_streamed_call(client, tool_choice, messages, name):
    request = {
        "messages": messages,
        "tools": TOOLS,
        "tool_choice": tool_choice,
        "parallel_tool_calls": False,
        "max_tokens": 60,
        "temperature": 0,
    }
    (call,) = client.chat.completions.create(model=MODEL, **request).choices[0].message.tool_calls
    choices = _stream_choices(client, **request)
    assert list(choices) == [0]
    streamed_name, arguments = _one_call(choices[0])
    assert streamed_name == call.function.name == name
    assert arguments == call.function.arguments  # greedy: the same tokens either way
    assert choices[0]["tool_calls"][0]["id"] != call.id  # every call gets its own id


def test_auto_streams_a_call_when_the_model_opens_one(client):
    tools = [TOOLS[1]]
    request = {
        "messages": FEW_SHOT_ADD,
        "tools": tools,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "max_tokens": 40,
        "temperature": 0,
    }
    choices = _stream_choices(client, **request)
    name, arguments = _one_call(choices[0])
    (call,) = client.chat.completions.create(model=MODEL, **request).choices[0].message.tool_calls
    assert name == call.function.name == "add" and arguments == call.function.arguments


def test_auto_streams_text_as_content(client):
    request = {"messages": ADD_QUESTION, "tools": TOOLS, "max_tokens": 12, "temperature": 0}
    plain = client.chat.completions.create(model=MODEL, **request).choices[0]
    assert plain.message.tool_calls is None  # greedy SmolLM2 answers this one in text
    choices = _stream_choices(client, **request)
    assert choices[0]["tool_calls"] == []
    assert choices[0]["content"] == plain.message.content
    assert choices[0]["reasons"][-1] == plain.finish_reason


def test_n2_streams_keep_their_calls_apart(client):
    choices = _stream_choices(
        client,
        messages=WEATHER_QUESTION,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=60,
        temperature=0.9,
        seed=11,
        n=2,
    )
    assert sorted(choices) == [0, 1]
    for state in choices.values():
        _one_call(state)  # each choice: one whole call, in OpenAI's shape
    ids = {state["tool_calls"][0]["id"] for state in choices.values()}
    assert len(ids) == 2


def test_call_cut_by_max_tokens_ends_with_length(client):
    """Every cut of a greedy call: ``"length"``, and the arguments streamed so far are a
    prefix of the whole call's (or, cut before the name was complete, the text is content)."""
    request = {
        "messages": ADD_QUESTION,
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "add"}},
        "parallel_tool_calls": False,
        "temperature": 0,
    }
    full = client.chat.completions.create(model=MODEL, max_tokens=60, **request)
    (call,) = full.choices[0].message.tool_calls
    num_partial = 0
    for max_tokens in range(full.usage.completion_tokens - 1, 0, -1):
        state = _stream_choices(client, max_tokens=max_tokens, **request)[0]
        assert state["reasons"][-1] == "length"
        if not state["tool_calls"]:
            # cut inside the trigger: its text is content; after it: held back until the name
            assert "<tool_call>".startswith(state["content"])
            continue
        arguments = _check_openai_shape(state["tool_calls"], "add")
        assert state["content"] == "" and call.function.arguments.startswith(arguments)
        num_partial += arguments != call.function.arguments
    assert num_partial >= 1
