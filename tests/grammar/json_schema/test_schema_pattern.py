"""ECMA-262 vs Python regex dialect: hand-written ECMA expectations (jsonschema uses ``re``)."""

from __future__ import annotations

import json
import re

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import json_schema_to_regex


def accepts(pattern: str, value: str) -> bool:
    rx = json_schema_to_regex({"type": "string", "pattern": pattern})
    return re.fullmatch(rx, json.dumps(value, ensure_ascii=False)) is not None


@pytest.mark.parametrize(
    "pattern,value,ecma",
    [
        ("^\\d+$", "123", True),
        ("^\\d+$", "١٢٣", False),  # Arabic-Indic digits: Python \d matches, ECMA does not
        ("^\\w+$", "héllo", False),  # ECMA \w is ASCII
        ("^\\w+$", "hello_1", True),
        ("^\\s$", "\u00a0", True),
        ("^\\s$", "\ufeff", True),  # ECMA \s includes BOM; Python's does not
        ("^\\s$", "\u001c", False),  # Python \s includes U+001C..U+001F; ECMA does not
        ("^.$", "\r", False),  # ECMA . excludes \r, \u2028, \u2029 (Python only \n)
        ("^.$", "\u2028", False),
        ("^.$", "é", True),
        ("^a$", "a\n", False),  # ECMA $ is end of input only
        ("^\\D$", "٣", True),
        ("^[^\\d]$", "٣", True),
        ("^(?<year>\\d{4})$", "2024", True),  # ECMA named group syntax
    ],
)
def test_ecma_semantics(pattern, value, ecma):
    assert accepts(pattern, value) is ecma


def test_python_and_ecma_differ_where_expected():
    assert re.search("^\\d+$", "١٢٣")  # the Python dialect would accept: we must not
    assert not accepts("^\\d+$", "١٢٣")


@pytest.mark.parametrize(
    "pattern", ["(?=x)", "(?!x)y", "a(?!x)y", "(?<=a)b", "(a)\\1", "\\bword", "(?i)a"]
)
def test_refused_constructs(pattern):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex({"type": "string", "pattern": pattern})
    assert info.value.keyword == "pattern"


def test_escaped_characters_in_patterns():
    assert accepts('^a"b\\\\c$', 'a"b\\c')
    assert accepts("^\\n$", "\n")
    assert not accepts("^\\n$", "n")


LEADING_NEGATIVE_LOOKAHEADS = [
    "^(?!include$|exclude$)[a-zA-Z_][a-zA-Z0-9_-]*$",  # GitHub Actions job ids
    "^(?!(stages|variables|default|include)$)[a-z][a-z0-9 :_-]*$",  # GitLab CI job names
    "^(?!ab)[a-c]+",  # a prefix excluded, end unanchored
    "^(?![0-9])\\w+$",
    "^(?![)(]x)[^x]",  # a class with parentheses inside the guard
    "^(?!a(b|c)$)",  # nothing after the guard: every string but ab and ac
]
SAMPLES = ["", "a", "ab", "ac", "abc", "ba", "include", "includes", "exclude", "stages", "stage",
           "x", "1a", "a1", "_x", "(x", ")", "(y", "ca b", "de-fault", "default", "A-b"]  # fmt: skip


@pytest.mark.parametrize("pattern", LEADING_NEGATIVE_LOOKAHEADS)
def test_leading_negative_lookahead_is_a_difference(pattern):
    # the oracle: Python's own lookahead, ECMA-aligned (ASCII classes, $ = end of input)
    python = re.compile(pattern.replace("$", "\\Z"), re.ASCII)
    seen = {True: 0, False: 0}
    for value in SAMPLES:
        expected = python.search(value) is not None
        assert accepts(pattern, value) is expected, (pattern, value)
        seen[expected] += 1
    assert seen[True] and seen[False]


def test_lookahead_keys_in_pattern_properties():
    schema = {
        "type": "object",
        "patternProperties": {"^(?!include$|exclude$)[a-z_]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    rx = re.compile(json_schema_to_regex(schema))
    assert rx.fullmatch('{"build":1,"test_it":2}')
    assert not rx.fullmatch('{"include":1}') and not rx.fullmatch('{"exclude":1}')
    assert rx.fullmatch('{"includes":1}')


def test_anchors_inside_a_pattern_on_both_routes(smollm2_vocab, smollm2_tokenizer):
    """A JS regex literal's slashes kept in a pattern (``/^[0-9]{4}$/``: no string has a
    ``/`` before its start) leave the member no string, and ``^$[a-z$]*$`` is the empty
    string alone; both routes against jsonschema, token by token."""
    from formcast.grammar.json_schema.compile import compile_json_schema
    from tests.grammar.schema_oracle import assert_walks_agree

    schema = {
        "type": "object",
        "properties": {
            "year": {"type": "string", "pattern": "/^[0-9]{4}$/"},
            "name": {"type": "string", "pattern": "^$[a-z$]*$"},
            "id": {"type": "string", "pattern": "x?^[a-z]+(?:$|-)"},
        },
        "additionalProperties": False,
    }
    values = [{}, {"year": "2024"}, {"year": "/2024/"}, {"name": ""}, {"name": "a"},
              {"name": "$"}, {"id": "ab-c"}, {"id": "ab"}, {"id": "xab"}, {"id": "1a"},
              {"name": "", "id": "q-"}]  # fmt: skip
    for route in ("regex", "cfg"):
        grammar = compile_json_schema(schema, smollm2_vocab, strict=False, route=route, cache=False)
        assert_walks_agree(grammar, schema, values, smollm2_tokenizer)
