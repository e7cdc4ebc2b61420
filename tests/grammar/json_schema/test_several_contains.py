"""Several ``contains`` merged from ``allOf`` parts: an item for each (one item may serve
several), in any order (``arrays._several_hits`` over ordered partitions, the private
``merge.CONTAINS_ALSO_KEY``). Checked against jsonschema on every array of up to 4 items over
five values, through the regex's fullmatch and by token walks of the structural grammar.
"""

from __future__ import annotations

import itertools
import json

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.arrays import _ordered_partitions
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from tests.grammar.schema_oracle import (
    assert_regex_agrees,
    assert_walks_agree,
    validator,
    walk_checked,
)

ARRAYS = [list(a) for n in range(5) for a in itertools.product([1, 7, 14, "x", None], repeat=n)]
BIG = {"contains": {"type": "integer", "minimum": 5}}
SEVENS = {"contains": {"type": "integer", "multipleOf": 7}}
TEXT = {"contains": {"type": "string"}}
SCHEMAS = {
    "two": {"type": "array", "allOf": [BIG, TEXT]},
    "overlapping": {"type": "array", "allOf": [BIG, SEVENS]},  # [7] holds both
    "three": {"type": "array", "allOf": [BIG, SEVENS, TEXT]},
    "typed_items": {
        "type": "array",
        "items": {"type": ["integer", "string"]},
        "allOf": [BIG, TEXT],
    },
}


def test_ordered_partitions():
    assert len(_ordered_partitions((0, 1))) == 3
    assert len(_ordered_partitions((0, 1, 2))) == 13


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_matches_jsonschema(name):
    schema = SCHEMAS[name]
    assert_regex_agrees(json_schema_to_regex(schema, strict=False, max_any_depth=1), schema, ARRAYS)


@pytest.mark.parametrize("name", ["overlapping", "typed_items"])
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    oracle = validator(schema)
    for value in ARRAYS[::7]:
        ids = smollm2_tokenizer.encode(json.dumps(value, separators=(",", ":")))
        assert walk_checked(grammar, ids) == oracle.is_valid(value), value


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "maxItems": 3, "allOf": [BIG, TEXT]},
        {"type": "array", "allOf": [BIG, {"contains": {"type": "string"}, "minContains": 2}]},
    ],
    ids=["item_counts", "min_contains"],
)
def test_refused_with_counts(schema):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, strict=False, max_any_depth=1)
    assert info.value.keyword == "contains"


# an array case that must be empty beside contains: no item can hold them (not a refusal).
# The overlapping oneOf below ("no items, or items of A, or items of A or B") splits its
# exclusivity into such cases: [] holds only the first branch, ["x"] the second and third
ONE_OF_LISTS = {
    "oneOf": [
        {"type": "array", "maxItems": 0},
        {"type": "array", "minItems": 1, "items": {"type": "string"}},
        {"type": "array", "minItems": 1, "items": {"type": ["string", "integer"]}},
    ]
}
EMPTY_CASES = {
    "several_contains": {"type": "array", "maxItems": 0, "allOf": [BIG, TEXT]},
    "one_contains": {"type": "array", "maxItems": 0, **TEXT},
}


@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_contains_beside_max_items_0_holds_no_array(name):
    schema = {"anyOf": [EMPTY_CASES[name], {"type": "null"}]}
    assert_regex_agrees(json_schema_to_regex(schema, strict=False), schema, [*ARRAYS, None])


@pytest.mark.parametrize("route", ["regex", "cfg"])
def test_overlapping_one_of_lists_match_jsonschema(route, smollm2_vocab, smollm2_tokenizer):
    grammar = compile_json_schema(
        ONE_OF_LISTS, smollm2_vocab, route=route, strict=False, cache=False
    )
    assert_walks_agree(grammar, ONE_OF_LISTS, [*ARRAYS[::3], "x", None], smollm2_tokenizer)
