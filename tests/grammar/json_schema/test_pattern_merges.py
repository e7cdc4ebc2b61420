"""``allOf`` parts with different ``pattern`` values: a string must match each.

The merge keeps the first ``pattern`` and lists the others (``merge.PATTERNS_ALSO_KEY``); the
string compiler intersects their automata. Checked against jsonschema on both routes, with
length bounds (the guard path), a ``format`` beside them, three patterns, patterns that no
string satisfies together, the merge under ``not`` (the text difference) and in the items of
a ``uniqueItems`` array.
"""

from __future__ import annotations

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.schema_oracle import assert_member_walks_agree, assert_walks_agree

CASES = [
    (
        {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$"}]},
        ["ab", "a-b", "axxb", "ba", "a", "b", "abc", "xab", "", 3],
    ),
    (
        {"allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "x"}], "type": "string", "maxLength": 4},
        ["x", "abx", "xxxx", "axxxx", "ab", "aX", "x1", ""],
    ),
    (
        {
            "type": "string",
            "allOf": [{"pattern": "^[0-9]+$"}, {"pattern": "7"}, {"pattern": "^.{2,3}$"}],
        },
        ["17", "777", "1777", "7", "12", "a7", "70"],
    ),
    (
        {"type": "string", "format": "date", "allOf": [{"pattern": "^2024-"}, {"pattern": "-01$"}]},
        ["2024-05-01", "2024-05-02", "2023-05-01", "2024-13-01", "2024-1-01"],
    ),
    (
        {"type": "string", "not": {"allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}},
        ["ab", "axb", "a", "b", "ba", "", "xyz"],
    ),
]


@pytest.mark.parametrize("route", ["auto", "cfg"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_merged_patterns_agree_with_jsonschema(case, route, smollm2_vocab, smollm2_tokenizer):
    schema, values = CASES[case]
    assert_member_walks_agree(schema, values, smollm2_vocab, smollm2_tokenizer, route)


@pytest.mark.parametrize("route", ["auto", "cfg"])
def test_unique_items_of_merged_patterns(route, smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "array",
        "items": {"allOf": [{"type": "string", "pattern": "^[ab]+$"}, {"pattern": "^.{1,2}$"}]},
        "uniqueItems": True,
    }
    values = [["a"], ["a", "ab"], ["ab", "ab"], ["abc"], ["c"], ["aab"], ["b", "a", "bb"]]
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    assert_walks_agree(grammar, schema, values, smollm2_tokenizer)


def test_patterns_without_a_common_string(smollm2_vocab, smollm2_tokenizer):
    disjoint = {"allOf": [{"type": "string", "pattern": "^a+$"}, {"pattern": "^b+$"}]}
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_json_schema(disjoint, smollm2_vocab, strict=False, cache=False)
    # an optional property whose strings cannot exist: only the objects without it
    schema = {"type": "object", "properties": {"v": disjoint, "w": {"type": "integer"}}}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    values = [{}, {"w": 1}, {"v": "a"}, {"v": "b"}, {"v": "ab"}]
    assert_walks_agree(grammar, schema, values, smollm2_tokenizer)
