"""Structural tag requests: the XGrammar / vLLM shapes parse into format trees; malformed or
unsupported nodes raise StructuralTagError naming their JSON pointer."""

from __future__ import annotations

import pytest

from formcast.errors import FormcastError, GrammarError
from formcast.grammar.structural_tag import StructuralTagError, parse_structural_tag
from formcast.grammar.structural_tag.format import (
    AnyText,
    ConstString,
    GrammarText,
    JsonSchema,
    Or,
    Regex,
    Repeat,
    Sequence,
    StructuralTag,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _tag(name: str, content: dict | None = None) -> dict:
    return {
        "type": "tag",
        "begin": f"<function={name}>",
        "content": content or {"type": "json_schema", "json_schema": WEATHER},
        "end": "</function>",
    }


def test_xgrammar_triggered_tags_shape():
    request = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [_tag("get_weather"), _tag("get_time")],
            "at_least_one": False,
            "stop_after_first": True,
        },
    }
    parsed = parse_structural_tag(request)
    node = parsed.format
    assert isinstance(node, TriggeredTags)
    assert node.triggers == ("<function=",)
    assert node.stop_after_first and not node.at_least_one
    assert [t.begin for t in node.tags] == ["<function=get_weather>", "<function=get_time>"]
    assert node.tags[0].ends == ("</function>",)
    assert isinstance(node.tags[0].content, JsonSchema)
    assert node.tags[0].content.schema == WEATHER
    assert node.tags[1].pointer == "/format/tags/1"


def test_every_text_format_type_parses():
    request = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {
                    "type": "tag",
                    "begin": "<think>",
                    "content": {"type": "any_text"},
                    "end": "</think>",
                },
                {"type": "const_string", "value": "Answer: "},
                {
                    "type": "or",
                    "elements": [
                        {"type": "regex", "pattern": "[0-9]+"},
                        {"type": "grammar", "grammar": 'root ::= "yes" | "no"'},
                        {"type": "grammar", "grammar": 'start: "maybe"'},
                        {"type": "json_schema", "json_schema": True},
                    ],
                },
                {"type": "optional", "content": {"type": "const_string", "value": "!"}},
                {"type": "star", "content": {"type": "const_string", "value": "."}},
                {"type": "plus", "content": {"type": "const_string", "value": "?"}},
                {
                    "type": "repeat",
                    "min": 1,
                    "max": -1,
                    "content": {"type": "any_text", "excludes": ["x"]},
                },
                {
                    "type": "tags_with_separator",
                    "tags": [_tag("a")],
                    "separator": ",",
                    "at_least_one": True,
                },
                {
                    "type": "tag",
                    "begin": "<r>",
                    "content": {"type": "any_text"},
                    "end": ["</r>", "</answer>"],
                },
            ],
        },
    }
    node = parse_structural_tag(request).format
    assert isinstance(node, Sequence)
    think, const, alternatives, optional, star, plus, repeat, separated, multi = node.elements
    assert isinstance(think, Tag) and isinstance(think.content, AnyText)
    assert const == ConstString("Answer: ")
    assert isinstance(alternatives, Or)
    regex, gbnf, lark, anything = alternatives.elements
    assert isinstance(regex, Regex) and regex.pattern == "[0-9]+"
    assert isinstance(gbnf, GrammarText) and gbnf.syntax == "gbnf"
    assert isinstance(lark, GrammarText) and lark.syntax == "lark"
    assert isinstance(anything, JsonSchema) and anything.schema is True
    assert (optional.min_count, optional.max_count) == (0, 1)
    assert (star.min_count, star.max_count) == (0, None)
    assert (plus.min_count, plus.max_count) == (1, None)
    assert isinstance(repeat, Repeat) and repeat.content == AnyText(("x",))
    assert isinstance(separated, TagsWithSeparator) and separated.at_least_one
    assert multi.ends == ("</r>", "</answer>")


def test_vllm_legacy_structures_shape():
    request = {
        "type": "structural_tag",
        "structures": [
            {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
            {"begin": "<function=get_time>", "schema": '{"type": "object"}', "end": "</function>"},
        ],
        "triggers": ["<function="],
    }
    node = parse_structural_tag(request).format
    assert isinstance(node, TriggeredTags)
    assert not node.at_least_one and not node.stop_after_first
    assert node.tags[1].content.schema == {"type": "object"}
    assert node.tags[0].content.pointer == "/structures/0/schema"


def test_json_text_and_bare_format_and_parsed_tag_are_accepted():
    text = '{"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}'
    parsed = parse_structural_tag(text)
    assert parsed.format == ConstString("hi")
    assert parse_structural_tag({"type": "const_string", "value": "hi"}) == parsed
    assert parse_structural_tag(parsed) is parsed
    assert StructuralTag.from_request(text).to_json() == parsed.to_json()


def test_canonical_json_ignores_pointers_and_keeps_property_order():
    a = parse_structural_tag({"type": "structural_tag", "format": {"type": "any_text"}})
    b = parse_structural_tag({"type": "any_text"})
    assert a.to_json() == b.to_json()
    ordered = {"type": "object", "properties": {"b": {}, "a": {}}}
    node = parse_structural_tag({"type": "json_schema", "json_schema": ordered}).format
    assert list(node.schema["properties"]) == ["b", "a"]


@pytest.mark.parametrize(
    ("request_", "pointer", "words"),
    [
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "sequence",
                    "elements": [
                        {"type": "const_string", "value": "a"},
                        {"type": "const_string", "value": "b"},
                        {"type": "tag", "begin": "<", "content": {"type": "foo"}, "end": ">"},
                    ],
                },
            },
            "/format/elements/2/content/type",
            "unknown type 'foo'",
        ),
        ({"type": "structural_tag"}, "/", "missing field 'format'"),
        ({"type": "structural_tag", "format": []}, "/format", "expected an object"),
        ({"type": "structural_tag", "format": {"value": "x"}}, "/format", "missing field 'type'"),
        (
            {"type": "structural_tag", "format": {"type": "const_string", "value": 3}},
            "/format/value",
            "expected a string",
        ),
        (
            {"type": "structural_tag", "format": {"type": "const_string", "value": "x", "v": 1}},
            "/format/v",
            "unknown field 'v'",
        ),
        (
            {"type": "structural_tag", "format": {"type": "or", "elements": []}},
            "/format/elements",
            "must not be empty",
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "triggered_tags",
                    "triggers": ["<function="],
                    "tags": [
                        _tag("a"),
                        {
                            "type": "tag",
                            "begin": "[call]",
                            "content": {"type": "any_text"},
                            "end": "]",
                        },
                    ],
                },
            },
            "/format/tags/1/begin",
            "starts with none of the triggers",
        ),
        (
            {
                "type": "structural_tag",
                "format": {"type": "triggered_tags", "triggers": [""], "tags": [_tag("a")]},
            },
            "/format/triggers/0",
            "must not be the empty string",
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "tags_with_separator",
                    "separator": ",",
                    "tags": [{"type": "const_string", "value": "x"}],
                },
            },
            "/format/tags/0/type",
            "must be 'tag'",
        ),
        (
            {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 10}},
            "/format/max_tokens",
            "not supported",
        ),
        (
            {
                "type": "structural_tag",
                "format": {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"},
            },
            "/format/style",
            "only 'json'",
        ),
        (
            {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": "x"}},
            "/format/json_schema",
            "object or a boolean",
        ),
        (
            {"type": "structural_tag", "format": {"type": "any_tokens"}},
            "/format",
            "token-level",
        ),
        (
            {"type": "structural_tag", "format": {"type": "token", "token": 3}},
            "/format/token",
            "by id",
        ),
        (
            {
                "type": "structural_tag",
                "format": {"type": "repeat", "min": 2, "max": 1, "content": {"type": "any_text"}},
            },
            "/format/max",
            "max must be -1 or >= min",
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "triggered_tags",
                    "triggers": ["<"],
                    "tags": [_tag("a")],
                    "at_least_one": "yes",
                },
            },
            "/format/at_least_one",
            "expected a boolean",
        ),
        (
            {
                "type": "structural_tag",
                "structures": [{"begin": "<a>", "schema": "{", "end": "x"}],
                "triggers": ["<a"],
            },
            "/structures/0/schema",
            "not valid JSON",
        ),
        ("{not json", "/", "not valid JSON"),
    ],
)
def test_errors_name_the_pointer(request_, pointer, words):
    with pytest.raises(StructuralTagError) as info:
        parse_structural_tag(request_)
    error = info.value
    assert isinstance(error, FormcastError) and isinstance(error, ValueError)
    assert isinstance(error, GrammarError)
    assert error.pointer == pointer.rstrip("/") or (pointer == "/" and error.pointer == "")
    assert str(error).startswith(f"{pointer}: ")
    assert words in str(error)
