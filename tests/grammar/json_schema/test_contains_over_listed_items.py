"""``contains`` where the items list finitely many values that all hold it: any one item holds
it, so it is ``minItems: 1`` (``arrays.array_tree``). The overlapping ``oneOf`` of arrays over
disjoint enums with ``maxItems`` (each branch's complement a ``contains`` per other branch)
was refused as "several contains together with item counts".

Compared with jsonschema on both routes: the regex's fullmatch of each value's text, and a
token walk of the structural grammar (SmolLM2's tokenizer) where every token taken is in the
mask iff the matcher accepts it.
"""

from __future__ import annotations

import itertools

import pytest

from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.json_schema.test_not_oneof_if import check
from tests.grammar.schema_oracle import assert_walks_agree

HELD_BY_ALL = {  # both contains hold for every listed item: one item, at most three
    "type": "array",
    "items": {"enum": ["a", "b", "c"]},
    "maxItems": 3,
    "allOf": [{"contains": {"not": {"const": "x"}}}, {"contains": {"enum": ["a", "b", "c", "d"]}}],
}
DISJOINT_ENUMS = {  # [] is valid against every branch, so invalid; other arrays one branch
    "oneOf": [
        {"type": "array", "maxItems": 3, "items": {"enum": ["a", "b"]}},
        {"type": "array", "maxItems": 3, "items": {"enum": ["c", "d"]}},
        {"type": "array", "maxItems": 3, "items": {"enum": ["e"]}},
    ]
}
HELD_BY_SOME = {  # "b" does not hold it: kept as a contains
    "type": "array",
    "items": {"enum": ["a", "b"]},
    "maxItems": 2,
    "allOf": [{"contains": {"const": "a"}}, {"contains": {"enum": ["a", "b"]}}],
}
NO_ROOM = {  # a contains held by all beside maxItems 0: no array
    "anyOf": [
        {"type": "array", "items": {"enum": ["a"]}, "maxItems": 0, "contains": {"const": "a"}},
        {"type": "string", "maxLength": 1},
    ]
}
SCHEMAS = {
    "held_by_all": HELD_BY_ALL,
    "disjoint_enums": DISJOINT_ENUMS,
    "held_by_some": HELD_BY_SOME,
    "no_room": NO_ROOM,
}
POOL = ["a", "b", "c", "d", "e", "x"]
VALUES = [list(items) for n in range(4) for items in itertools.product(POOL, repeat=n)] + [
    ["a", "b", "c", "d"],
    "a",
    None,
]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", ["held_by_all", "disjoint_enums"])
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES[::7], smollm2_tokenizer)
