"""``contains`` (with ``minContains``) beside ``minItems`` / ``maxItems``: at least ``m`` hits
among ``lo..hi`` items (``arrays._with_hits``, a continuation per items and hits counted).

Checked against jsonschema on every array of up to 6 items over three item kinds (an item,
a hit, a value of another type), through the regex's fullmatch, and by token walks of the
structural grammar (every token taken is in the mask iff the matcher accepts it).
"""

from __future__ import annotations

import itertools
import json

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema import arrays
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from tests.grammar.schema_oracle import assert_regex_agrees, validator, walk_checked

ARRAYS = [list(a) for n in range(7) for a in itertools.product([1, 7, "x"], repeat=n)]
BOUNDS = [
    (0, None, 1),
    (3, None, 1),
    (2, 4, 1),
    (1, 1, 1),
    (0, 3, 2),
    (4, None, 2),
    (3, 5, 2),
    (2, None, 3),
]


def counted(lo: int, hi: int | None, m: int) -> dict:
    schema = {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}}
    schema |= {"minItems": lo} | ({} if hi is None else {"maxItems": hi})
    return schema | ({} if m == 1 else {"minContains": m})


@pytest.mark.parametrize(("lo", "hi", "m"), BOUNDS)
def test_regex_route_matches_jsonschema(lo, hi, m):
    schema = counted(lo, hi, m)
    assert_regex_agrees(json_schema_to_regex(schema, strict=False), schema, ARRAYS)


def test_negated_items_under_counts():
    """``not: {items: S}`` is ``contains: {not: S}``, merged with the counts around it."""
    schema = {"type": "array", "minItems": 2, "maxItems": 3, "not": {"items": {"type": "integer"}}}
    assert_regex_agrees(json_schema_to_regex(schema, strict=False, max_any_depth=2), schema, ARRAYS)


@pytest.mark.parametrize(("lo", "hi", "m"), [(2, 4, 1), (3, None, 2)])
def test_structural_route_matches_jsonschema(lo, hi, m, smollm2_vocab, smollm2_tokenizer):
    schema = counted(lo, hi, m)
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    oracle = validator(schema)
    for value in ARRAYS[::3]:
        ids = smollm2_tokenizer.encode(json.dumps(value, separators=(",", ":")))
        assert walk_checked(grammar, ids) == oracle.is_valid(value), value


def test_too_many_continuations_are_refused():
    schema = counted(0, arrays.MAX_HIT_STATES, 2)
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, strict=False)
    assert info.value.keyword == "contains"


def test_contains_beside_prefix_items_is_refused():
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"minimum": 5}}
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, strict=False)
    assert info.value.keyword == "contains"
