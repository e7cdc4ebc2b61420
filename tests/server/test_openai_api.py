"""The server through the official ``openai`` client: chat, streaming, structured outputs, tools.

Oracles: greedy streaming must equal greedy non-streaming; ``jsonschema`` validates tool
arguments and schema outputs; ``re.fullmatch`` checks regex outputs; pydantic parses
``parse()`` results.
"""

from __future__ import annotations

import json
import re
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field
from server_helpers import MODEL

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": WEATHER_PARAMS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    },
]


class Verdict(BaseModel):
    answer: Literal["yes", "no"]
    confidence: int = Field(ge=0, le=100)


def test_chat_plain_and_streamed_agree(client):
    plain = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=8, temperature=0
    )
    choice = plain.choices[0]
    assert plain.object == "chat.completion" and plain.model == MODEL
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert 1 <= plain.usage.completion_tokens <= 8
    assert plain.usage.total_tokens == plain.usage.prompt_tokens + plain.usage.completion_tokens

    stream = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content  # greedy: same tokens either way
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == choice.finish_reason and set(reasons[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == (
        plain.usage.completion_tokens
    )
    assert all(c.usage is None for c in chunks[:-1])


def test_parse_returns_pydantic_object(client):
    completion = client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "Is Paris in France? Answer in JSON."}],
        response_format=Verdict,
        max_tokens=40,
        temperature=0,
    )
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Verdict)
    assert Verdict.model_validate_json(completion.choices[0].message.content) == parsed


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_tool_call_arguments_validate(client, tool_choice):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=TOOLS,
        tool_choice=tool_choice,
        parallel_tool_calls=False,
        max_tokens=40,
        temperature=0,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


def test_streamed_tool_call(client):
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Add 2 and 3."}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "add"}},
        parallel_tool_calls=False,
        max_tokens=30,
        temperature=0,
        stream=True,
    )
    calls = [tc for c in stream if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function.name == "add" and {call.index for call in calls} == {0}
    arguments = "".join(call.function.arguments for call in calls)  # streamed in pieces
    jsonschema.validate(json.loads(arguments), TOOLS[1]["function"]["parameters"])


def test_tool_choice_auto_is_text_or_valid_call(client):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say hello."}],
        tools=TOOLS,
        max_tokens=10,
        temperature=0,
    )
    message = completion.choices[0].message
    if message.tool_calls:
        call = message.tool_calls[0]
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    else:
        assert message.content is not None  # text (which may start with "{": no reservation)


def test_json_object_mode_parses(client):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Give a JSON object with a name and an age."}],
        response_format={"type": "json_object"},
        max_tokens=40,
        temperature=0,
    )
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(completion.choices[0].message.content), dict)


def test_json_schema_and_extensions(client):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema, "strict": True},
        },
        max_tokens=40,
        temperature=0,
    )
    jsonschema.validate(json.loads(completion.choices[0].message.content), schema)

    pattern = r"[0-9]{3}-[0-9]{4}"
    regex = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=12, extra_body={"regex": pattern}
    )
    assert re.fullmatch(pattern, regex.choices[0].message.content)
    options = ["Paris", "London", "Rome"]
    choice = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=5, extra_body={"choice": options}
    )
    assert choice.choices[0].message.content in options
    lark = client.completions.create(
        model=MODEL,
        prompt="Is the sky blue?",
        max_tokens=5,
        extra_body={"grammar": 'start: "yes" | "no"'},
    )
    assert lark.choices[0].text in ("yes", "no")


def test_n_and_seed(client):
    def sample(seed: int):
        return client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Write one random word."}],
            max_tokens=6,
            temperature=1.5,
            n=2,
            seed=seed,
        )

    first = sample(11)
    assert [c.index for c in first.choices] == [0, 1]
    again = sample(11)
    assert [c.message.content for c in again.choices] == [c.message.content for c in first.choices]
    others = [sample(s).choices[0].message.content for s in (12, 13)]
    assert len({first.choices[0].message.content, *others}) > 1  # the seed matters


def test_logprobs(client):
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=4, temperature=0, logprobs=True, top_logprobs=3
    )
    content = completion.choices[0].logprobs.content
    assert len(content) == completion.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.logprob == max(t.logprob for t in entry.top_logprobs)  # greedy: the argmax
        assert bytes(entry.bytes).decode() == entry.token


def test_completions_batch_echo_logprobs(client):
    prompts = ["The capital of France is", "1, 2, 3,"]
    completion = client.completions.create(
        model=MODEL, prompt=prompts, max_tokens=5, temperature=0, echo=True, logprobs=2
    )
    assert [c.index for c in completion.choices] == [0, 1]
    for choice, prompt in zip(completion.choices, prompts, strict=True):
        assert choice.text.startswith(prompt)
        assert "".join(choice.logprobs.tokens) == choice.text[len(prompt) :]
        assert choice.logprobs.text_offset[0] == len(prompt)
    single = client.completions.create(model=MODEL, prompt=prompts[1], max_tokens=5, temperature=0)
    streamed = client.completions.create(
        model=MODEL, prompt=prompts[1], max_tokens=5, temperature=0, stream=True
    )
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text == single.choices[0].text == completion.choices[1].text[len(prompts[1]) :]


def test_models(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
