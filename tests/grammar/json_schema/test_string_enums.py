"""Enums of strings whose siblings assert nothing but ``type``.

Their strings are written straight from the values (no sample of each matched against the
siblings): a string belongs iff ``type`` allows strings. Checked against jsonschema on both
routes, with duplicates, escapes, non-ASCII text, values of other types, siblings that do
assert more (``maxLength``: the per-value check), a ``uniqueItems`` array of an enum's
strings, and an enum beside a long ``maxLength`` string at the same place.
"""

from __future__ import annotations

import pytest

from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.schema_oracle import assert_member_walks_agree, assert_walks_agree

CASES = [
    (
        {"type": "string", "enum": ["red", "green", "red", 'say "hi"', "back\\slash", "été", 3]},
        ["red", "green", 'say "hi"', "back\\slash", "été", 3, "blue", "Red", None],
    ),
    (
        {"type": ["string", "integer"], "enum": ["x", "x", 2, 2.0, "7", {"k": 1}, None]},
        ["x", 2, "7", 7, {"k": 1}, None, "y"],
    ),
    (
        {"type": "integer", "enum": ["1", 1, "two"], "title": "no strings"},
        [1, "1", "two", 2],
    ),
    ({"enum": ["a", "b", None, True]}, ["a", "b", None, True, False, "c"]),
    ({"type": "string", "enum": ["ab", "abc", "a"], "maxLength": 2}, ["ab", "a", "abc", "b"]),
]


@pytest.mark.parametrize("route", ["auto", "cfg"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_string_enums_agree_with_jsonschema(case, route, smollm2_vocab, smollm2_tokenizer):
    schema, values = CASES[case]
    assert_member_walks_agree(schema, values, smollm2_vocab, smollm2_tokenizer, route)


@pytest.mark.parametrize("route", ["auto", "cfg"])
def test_unique_items_over_string_enums(route, smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "array",
        "items": {"type": "string", "enum": ["a", "b", "c", "a"]},
        "uniqueItems": True,
        "maxItems": 3,
    }
    values = [["a"], ["a", "b"], ["c", "b", "a"], ["a", "a"], ["b", "c", "b"], ["d"], []]
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    assert_walks_agree(grammar, schema, values, smollm2_tokenizer)


def test_enum_strings_beside_a_counted_string(smollm2_vocab, smollm2_tokenizer):
    # a maxLength past what the regex route writes out, beside enum strings longer than it at
    # the same place: whichever route compiles it, the long enum value is not cut by the bound
    long_value = "z" * 320
    schema = {
        "type": "object",
        "properties": {
            "v": {
                "anyOf": [
                    {"type": "string", "maxLength": 300},
                    {"type": "string", "enum": [long_value, "q"]},
                ]
            }
        },
        "required": ["v"],
        "additionalProperties": False,
    }
    values = [{"v": "short"}, {"v": long_value}, {"v": "q"}, {"v": "y" * 310}, {"v": 1}]
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert_walks_agree(grammar, schema, values, smollm2_tokenizer)
