"""formcast.json / regex / choice / cfg / text on the real model: values of the declared type,
checked against independent oracles (re.fullmatch, jsonschema, lark, json.loads)."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Literal

import jsonschema
import lark
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import formcast
from formcast.errors import SamplingParamsError, SchemaError
from formcast.partial_json import parse_partial_json

GREEDY = {"temperature": 0}


class City(BaseModel):
    name: str = Field(max_length=16)
    population: int = Field(ge=0, le=99_999_999)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    key: str
    value: bool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["title", "tags"],
}


def test_json_pydantic_batch_returns_instances_in_order(model):
    generator = formcast.json(model, City, max_tokens=40, **GREEDY)
    prompts = ["Describe Paris as JSON.", "Describe Tokyo as JSON.", "Describe Lima as JSON."]
    cities = generator.batch(prompts)
    assert len(cities) == 3 and all(isinstance(c, City) for c in cities)
    # one request at a time gives the same greedy values: batching changes nothing
    assert generator(prompts[1]) == cities[1]


def test_json_schema_dict_returns_valid_plain_json(model):
    value = formcast.json(model, SCHEMA, max_tokens=40, **GREEDY)("A post about cats.")
    assert isinstance(value, dict)
    jsonschema.validate(value, SCHEMA)


def test_json_any_order_option(model):
    generator = formcast.json(model, City, any_order=True, max_tokens=40, **GREEDY)
    assert isinstance(generator("Describe Paris as JSON."), City)
    for text, is_valid in (('{"population":5,"name":"Oslo"}', True),
                           ('{"population":5}', False)):  # fmt: skip
        matcher = generator.grammar.matcher()
        assert (matcher.accept_bytes(text.encode()) and matcher.is_accepting()) == is_valid
    # schema order only without the option
    matcher = formcast.json(model, City, **GREEDY).grammar.matcher()
    assert not matcher.accept_bytes(b'{"population":5,"name":"Oslo"}')


@pytest.mark.parametrize(
    ("target", "check"),
    [
        (Point, lambda v: isinstance(v, Point) and isinstance(v.x, int)),
        (Pair, lambda v: isinstance(v, dict) and isinstance(v["value"], bool)),
        (list[int], lambda v: isinstance(v, list) and all(type(i) is int for i in v)),
        # uniqueItems arrays, kept distinct by the matcher
        (set[str], lambda v: isinstance(v, set) and all(type(i) is str for i in v)),
        (frozenset[int], lambda v: isinstance(v, frozenset) and all(type(i) is int for i in v)),
    ],
    ids=["dataclass", "TypedDict", "list[int]", "set[str]", "frozenset[int]"],
)
def test_json_python_types(model, target, check):
    value = formcast.json(model, target, max_tokens=24, **GREEDY)("Give an example.")
    assert check(value), value


def test_incomplete_output_raises_with_the_text(model):
    generator = formcast.json(model, City, max_tokens=3, **GREEDY)
    with pytest.raises(formcast.IncompleteOutputError, match="token limit after 3 tokens") as info:
        generator("Describe Paris.")
    assert info.value.text and not info.value.text.endswith("}")
    results = generator.batch(["Describe Rome.", "Describe Oslo."], return_exceptions=True)
    assert all(isinstance(r, formcast.IncompleteOutputError) for r in results)
    with pytest.raises(formcast.IncompleteOutputError):
        list(generator.stream("Describe Paris."))


def test_regex_output_fullmatches(model):
    pattern = r"[A-Z][a-z]{2,8} \d{2}"
    values = formcast.regex(model, pattern, max_tokens=16, **GREEDY).batch(
        ["A name and an age:", "Another name and age:"]
    )
    assert all(isinstance(v, str) and re.fullmatch(pattern, v) for v in values), values


def test_regex_ascii_option_makes_classes_ascii(model):
    """``\\d`` is Unicode by default (Python's re); ``ascii=True`` is re.ASCII (the README's
    phone-number line gave ``'🯸🯸🯸-🯸🯸🯸🯸'`` without it)."""
    pattern = r"\d{3}-\d{4}"

    def accepts(generator: formcast.RegexGenerator, text: str) -> bool:
        matcher = generator.grammar.matcher()
        return bool(matcher.accept_bytes(text.encode())) and matcher.is_accepting()

    unicode_digits = formcast.regex(model, pattern)
    ascii_digits = formcast.regex(model, pattern, ascii=True, max_tokens=16, **GREEDY)
    for text in ("555-1234", "\U0001fbf8\U0001fbf8\U0001fbf8-\u0663\u0663\u0663\u0663"):
        assert accepts(unicode_digits, text) == bool(re.fullmatch(pattern, text))
        assert accepts(ascii_digits, text) == bool(re.fullmatch(pattern, text, re.ASCII))
    value = ascii_digits("A phone number:")
    assert re.fullmatch(pattern, value, re.ASCII), value


def test_choice_returns_the_option(model):
    prompt = "What color is grass?"
    assert formcast.choice(model, ["yes", "no"], **GREEDY)(prompt) in ("yes", "no")
    assert isinstance(formcast.choice(model, Color, **GREEDY)(prompt), Color)
    assert formcast.choice(model, Literal[1, 2, 3], **GREEDY)("Pick a number.") in (1, 2, 3)


def test_cfg_output_parses_with_lark(model):
    grammar = r"""
        start: NUMBER OP operand
        operand: NUMBER | "(" NUMBER OP operand ")"
        NUMBER: /[0-9]{1,3}/
        OP: "+" | "*"
    """
    text = formcast.cfg(model, grammar, max_tokens=24, **GREEDY)("Write a sum of two numbers.")
    lark.Lark(grammar).parse(text)  # the oracle: raises if the text is not in the language


def test_text_stream_chunks_concatenate_to_the_full_text(model):
    generator = formcast.text(model, max_tokens=12, **GREEDY)
    chunks = list(generator.stream("Name three fruits."))
    assert all(isinstance(c, str) and c for c in chunks)
    assert "".join(chunks) == generator("Name three fruits.")


def test_interleaved_streams_do_not_lose_tokens(model):
    generator = formcast.text(model, max_tokens=8, **GREEDY)
    first, second = generator.stream("Count to five."), generator.stream("Say hello.")
    texts = ["", ""]
    for pair in zip(first, second, strict=False):  # advance both streams in turn
        texts[0] += pair[0]
        texts[1] += pair[1]
    texts[0] += "".join(first)
    texts[1] += "".join(second)
    assert texts == generator.batch(["Count to five.", "Say hello."])


def test_stream_partial_snapshots_grow_into_the_value(model):
    generator = formcast.json(model, City, max_tokens=40, **GREEDY)
    snapshots = list(generator.stream_partial("Describe Paris as JSON."))
    final = generator("Describe Paris as JSON.")
    assert snapshots[-1] == final.model_dump()
    assert generator.validate(snapshots[-1]) == final
    for earlier, later in zip(snapshots, snapshots[1:], strict=False):
        assert set(earlier) <= set(later)


def test_chat_messages_prompt(model):
    messages = [
        {"role": "system", "content": "Answer with yes or no."},
        {"role": "user", "content": "Is ice cold?"},
    ]
    assert formcast.choice(model, ["yes", "no"], **GREEDY)(messages) in ("yes", "no")
    assert json.loads(formcast.json(model, SCHEMA, max_tokens=40, **GREEDY).complete(messages).text)


def test_misuse_errors_name_the_problem(model):
    with pytest.raises(formcast.UsageError, match=r"unknown option\(s\) \['temprature'\]"):
        formcast.text(model, temprature=0)
    with pytest.raises(formcast.UsageError, match="unknown option"):
        formcast.text(model)("hi", max_token=3)
    with pytest.raises(SamplingParamsError, match="SamplingParams.top_p=2"):
        formcast.text(model, top_p=2)
    with pytest.raises(formcast.UsageError, match="n=2 is not supported"):
        formcast.text(model, n=2)
    with pytest.raises(formcast.UsageError, match="expected a formcast Model"):
        formcast.json("smollm2-135m", City)
    with pytest.raises(formcast.UsageError, match="empty string"):
        formcast.text(model)("")
    with pytest.raises(formcast.UsageError, match="needs 'role' and 'content'"):
        formcast.text(model)([{"content": "hi"}])
    with pytest.raises(formcast.UsageError, match="expects a list of prompts"):
        formcast.text(model).batch("one prompt")
    with pytest.raises(formcast.UsageError, match="Enum class or a Literal"):
        formcast.choice(model, "yes/no")
    with pytest.raises(formcast.UsageError, match="both written 'true'"):
        formcast.choice(model, [True, "true"])
    with pytest.raises(formcast.GrammarError, match="position"):
        formcast.regex(model, "(unclosed")
    with pytest.raises(SchemaError):
        formcast.json(model, {"type": "object", "properties": {"a": {"type": "nope"}}})


def test_outputs_are_parsed_from_the_text_the_model_wrote(model):
    completion = formcast.json(model, City, max_tokens=40, **GREEDY).complete("Paris as JSON.")
    assert City.model_validate_json(completion.text) == completion.value
    assert completion.finish_reason == "stop"
    assert parse_partial_json(completion.text) == completion.value.model_dump()
