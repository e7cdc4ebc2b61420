"""Reasoning through the official ``openai`` client: ``reasoning_content`` in bodies and
streamed deltas, ``max_reasoning_tokens`` / ``reasoning_effort`` honoured to the token (counted
on the tokens' own bytes from ``logprobs``), ``chat_template_kwargs``, reasoning with
``response_format`` and with tools. The answer is checked by ``jsonschema``."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from server_helpers import MODEL

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 16},
        "is_capital": {"type": "boolean"},
    },
    "required": ["city", "is_capital"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}
QUESTION = [{"role": "user", "content": "Think about France's capital, then answer as JSON."}]


@pytest.fixture(scope="module")
def thinking_client():
    """A server whose model thinks between <think> and </think> (set explicitly: SmolLM2's
    own template has no reasoning tags)."""
    from formcast.server import BackgroundServer, build_engine

    engine = build_engine(MODEL, max_num_seqs=8, max_model_len=1024, num_kv_blocks=256)
    with BackgroundServer(engine, MODEL, reasoning_tags="<think>,</think>") as running:
        yield openai.OpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0)


def _thought_tokens(logprobs_content, reasoning: str) -> int:
    """Tokens holding a byte of the thoughts (between ``<think>`` and ``</think>``)."""
    lo = len(b"<think>")
    hi = lo + len(reasoning.encode())
    count, offset = 0, 0
    for entry in logprobs_content:
        size = len(bytes(entry.bytes))
        count += max(offset, lo) < min(offset + size, hi)
        offset += size
    return count


@pytest.mark.parametrize("budget", [0, 5, 16])
def test_budget_and_schema_answer(thinking_client, budget):
    completion = thinking_client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        response_format=FORMAT,
        max_tokens=80,
        temperature=0,
        logprobs=True,
        extra_body={"max_reasoning_tokens": budget},
    )
    message = completion.choices[0].message
    reasoning = message.reasoning_content
    assert isinstance(reasoning, str)
    jsonschema.validate(json.loads(message.content), SCHEMA)
    assert _thought_tokens(completion.choices[0].logprobs.content, reasoning) <= budget
    text = "".join(
        bytes(e.bytes).decode("utf-8", "replace") for e in completion.choices[0].logprobs.content
    )
    assert text == f"<think>{reasoning}</think>{message.content}"


def test_streamed_deltas_equal_the_body(thinking_client):
    options = dict(
        model=MODEL,
        messages=QUESTION,
        response_format=FORMAT,
        max_tokens=80,
        temperature=0,
        reasoning_effort="minimal",
    )
    whole = thinking_client.chat.completions.create(**options).choices[0].message
    thoughts, content = [], []
    for chunk in thinking_client.chat.completions.create(**options, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        piece = getattr(delta, "reasoning_content", None)
        if piece:
            thoughts.append(piece)
            assert not content  # reasoning deltas come before the answer's
        if delta.content:
            content.append(delta.content)
    assert "".join(thoughts) == whole.reasoning_content
    assert "".join(content) == whole.content
    assert len(thoughts) > 1  # streamed in pieces


def test_effort_none_closes_the_block_at_once(thinking_client):
    message = thinking_client.chat.completions.create(
        model=MODEL, messages=QUESTION, response_format=FORMAT, max_tokens=60, temperature=0,
        reasoning_effort="none",
    ).choices[0].message  # fmt: skip
    assert message.reasoning_content == ""
    jsonschema.validate(json.loads(message.content), SCHEMA)


def test_enable_thinking_false_answers_directly(thinking_client):
    message = thinking_client.chat.completions.create(
        model=MODEL, messages=QUESTION, response_format=FORMAT, max_tokens=60, temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    ).choices[0].message  # fmt: skip
    assert getattr(message, "reasoning_content", None) is None
    jsonschema.validate(json.loads(message.content), SCHEMA)


def test_reasoning_then_a_tool_call(thinking_client):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}}]
    choice = thinking_client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=tools, tool_choice="required", max_tokens=80, parallel_tool_calls=False,
        temperature=0, extra_body={"max_reasoning_tokens": 6},
    ).choices[0]  # fmt: skip
    assert choice.finish_reason == "tool_calls"
    assert isinstance(choice.message.reasoning_content, str)
    (call,) = choice.message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA)


def test_bad_reasoning_requests_are_400(thinking_client, client):
    with pytest.raises(openai.BadRequestError, match="reasoning_effort"):
        thinking_client.chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=5, reasoning_effort="extreme"
        )
    with pytest.raises(openai.BadRequestError, match="max_reasoning_tokens must be >= 0"):
        thinking_client.chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=5, extra_body={"max_reasoning_tokens": -2}
        )
    # the session server's SmolLM2 template has no reasoning tags ("auto" finds none)
    with pytest.raises(openai.BadRequestError, match="needs a reasoning model"):
        client.chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=5, reasoning_effort="low"
        )
    # and it still serves
    assert client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=3).choices


def test_streamed_reasoning_then_tool_call(thinking_client):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}}]
    request = dict(
        model=MODEL, messages=QUESTION, tools=tools, tool_choice="required", max_tokens=80,
        temperature=0, parallel_tool_calls=False, extra_body={"max_reasoning_tokens": 6},
    )  # fmt: skip
    whole = thinking_client.chat.completions.create(**request).choices[0].message
    thoughts, calls, reasons = [], [], []
    for chunk in thinking_client.chat.completions.create(**request, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if getattr(delta, "reasoning_content", None):
            assert not calls  # the thoughts come first
            thoughts.append(delta.reasoning_content)
        calls += delta.tool_calls or []
        reasons.append(chunk.choices[0].finish_reason)
    assert "".join(thoughts) == whole.reasoning_content
    assert calls[0].function.name == "lookup"
    assert (
        "".join(c.function.arguments or "" for c in calls) == whole.tool_calls[0].function.arguments
    )
    assert reasons[-1] == "tool_calls"
