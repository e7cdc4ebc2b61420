"""Several tool calls in one turn, through the official ``openai`` client: the grammar allows
one or more calls with ``parallel_tool_calls`` true and exactly one with false; each call's
arguments validate (``jsonschema``) and stream as their own deltas; ``response_format`` next
to tools is the answer when no tool is called."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import openai
import pytest
from server_helpers import MODEL
from test_openai_api import TOOLS

SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
QUESTION = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]


def _validate(calls) -> None:
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_parallel_calls_in_one_turn(client):
    # min_tokens keeps EOS away past the first call: the grammar then allows only another call
    request = dict(
        model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", max_tokens=120,
        temperature=0, extra_body={"min_tokens": 30},
    )  # fmt: skip
    choice = client.chat.completions.create(**request).choices[0]
    calls = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and len(calls) >= 2
    _validate(calls)
    assert len({call.id for call in calls}) == len(calls)
    streamed: dict[int, list[dict[str, Any]]] = {}
    for chunk in client.chat.completions.create(**request, stream=True):
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            streamed.setdefault(delta_call.index, []).append(
                delta_call.model_dump(exclude_none=True)
            )
    assert sorted(streamed) == list(range(len(calls)))
    for index, call in enumerate(calls):
        deltas = streamed[index]
        assert deltas[0]["function"]["name"] == call.function.name
        assert (
            "".join(d["function"].get("arguments", "") for d in deltas) == call.function.arguments
        )


def test_parallel_false_allows_exactly_one_call(client):
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", max_tokens=80,
        temperature=1.0, seed=3, n=3, parallel_tool_calls=False,
    )  # fmt: skip
    for choice in completion.choices:
        assert choice.finish_reason == "tool_calls"
        assert len(choice.message.tool_calls) == 1
        _validate(choice.message.tool_calls)


def test_response_format_with_tools_answers_in_the_schema(client):
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 20}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hi."}], tools=TOOLS,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
        max_tokens=120, temperature=1.0, seed=5, n=4, parallel_tool_calls=False,
    )  # fmt: skip
    for choice in completion.choices:
        assert choice.finish_reason in ("stop", "tool_calls")
        message = choice.message
        if message.tool_calls:
            _validate(message.tool_calls)
        else:
            jsonschema.validate(json.loads(message.content), schema)


def test_structural_tag_response_format(client):
    """The vLLM / XGrammar request shape, unchanged: free text, then a tagged JSON value."""
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "Answer: "},
                {
                    "type": "tag",
                    "begin": "<result>",
                    "content": {"type": "json_schema", "json_schema": SCHEMAS["add"]},
                    "end": "</result>",
                },
            ],
        },
    }
    text = (
        client.chat.completions.create(
            model=MODEL, messages=QUESTION, response_format=tag, max_tokens=40, temperature=0
        )
        .choices[0]
        .message.content
    )
    assert text.startswith("Answer: <result>") and text.endswith("</result>")
    jsonschema.validate(
        json.loads(text[len("Answer: <result>") : -len("</result>")]), SCHEMAS["add"]
    )
    bad = {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "nope"}]}}
    with pytest.raises(openai.BadRequestError, match="/format/elements/0"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, response_format=bad)


def test_structural_tag_control_token_shown_with_skip_special_tokens_false(client):
    """A ``token`` format names one of SmolLM2's special tokens: the model writes it (or its
    text) where the grammar puts it; ``skip_special_tokens: false`` shows it in the text; a
    text that is no special token is a 400 naming the pointer."""
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "token", "token": "<|im_start|>"},
                {"type": "json_schema", "json_schema": SCHEMAS["add"]},
            ],
        },
    }
    text = (
        client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            response_format=tag,
            max_tokens=40,
            temperature=0,
            extra_body={"skip_special_tokens": False},
        )
        .choices[0]
        .message.content
    )
    assert text.startswith("<|im_start|>")
    jsonschema.validate(json.loads(text[len("<|im_start|>") :]), SCHEMAS["add"])
    bad = {"type": "structural_tag", "format": {"type": "token", "token": "hello"}}
    with pytest.raises(openai.BadRequestError, match="/format/token"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, response_format=bad)


SQL_TOOL = {
    "type": "custom",
    "custom": {
        "name": "sql",
        "description": "Run one SQL query.",
        "format": {
            "type": "grammar",
            "grammar": {"syntax": "regex", "definition": r"SELECT [a-z_]{1,12} FROM [a-z_]{1,12};"},
        },
    },
}


def test_custom_tool_with_a_regex_input(client):
    request = dict(
        model=MODEL,
        messages=[{"role": "user", "content": "List the names of all users."}],
        tools=[SQL_TOOL, TOOLS[1]],
        tool_choice={"type": "custom", "custom": {"name": "sql"}},
        max_tokens=60,
        temperature=0,
    )
    choice = client.chat.completions.create(**request).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "custom" and call.custom.name == "sql"
    assert re.fullmatch(r"SELECT [a-z_]{1,12} FROM [a-z_]{1,12};", call.custom.input)
    streamed = [
        d.model_dump(exclude_none=True)
        for chunk in client.chat.completions.create(**request, stream=True)
        if chunk.choices
        for d in chunk.choices[0].delta.tool_calls or []
    ]
    assert [d["custom"]["input"] for d in streamed] == [call.custom.input]  # whole, once
    lark = {"type": "custom", "custom": {"name": "calc", "format": {"type": "grammar",
            "grammar": {"syntax": "lark", "definition": 'start: "1"'}}}}  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="Lark grammars are not supported"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[lark], max_tokens=5)
