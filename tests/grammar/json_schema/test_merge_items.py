"""``allOf`` over item keywords: element ``i`` satisfies every branch's own schema for it.

The merge used to keep one branch's ``prefixItems`` for the first elements and drop the other
branch's ``items`` there (``{items: R}`` and ``{prefixItems: [A]}`` checked element 0 against
``A`` alone: a superset). Every check compares the regex's fullmatch of each array's formcast
text with jsonschema (both outcomes must occur).
"""

from __future__ import annotations

import functools
import itertools
import json
import re

import pytest

from formcast.grammar.json_schema.compile import json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

to_regex = functools.partial(json_schema_to_regex, max_any_depth=2)

ELEMENTS = [0, 5, 7, -1, "a", "", True, None, [1]]
ARRAYS = [[]] + [list(a) for n in (1, 2, 3) for a in itertools.product(ELEMENTS[:6], repeat=n)]

DRAFT7 = "http://json-schema.org/draft-07/schema#"
CASES = [
    # 2020-12: schema-form items with prefixItems in another branch
    {"allOf": [{"items": {"type": "integer"}}, {"prefixItems": [{"minimum": 5}]}]},
    {"allOf": [{"prefixItems": [{"minimum": 5}]}, {"items": {"type": "integer"}}]},
    # both branches with prefixes of different lengths and their own rests
    {
        "allOf": [
            {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
            {"prefixItems": [{"minimum": 0}, {"minLength": 1}, True], "items": False},
        ]
    },
    # a prefix beside a rest that forbids more elements
    {"allOf": [{"items": False}, {"prefixItems": [{"type": "integer"}]}]},
    # sibling keywords next to allOf take part in the merge too
    {"items": {"type": "integer"}, "allOf": [{"prefixItems": [{"maximum": 5}, {"minimum": 5}]}]},
    # draft-07 spelling: list-form items with additionalItems
    {
        "$schema": DRAFT7,
        "allOf": [
            {"items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
            {"items": [True, {"minLength": 1}, {"type": "string"}]},
        ],
    },
    {
        "$schema": DRAFT7,
        "allOf": [{"items": {"type": "integer"}}, {"items": [{"minimum": 5}, True]}],
    },
    {
        "$schema": DRAFT7,
        "allOf": [
            {"items": [{"type": "integer"}], "additionalItems": False},
            {"items": {"minimum": 1}},
        ],
    },
]


@pytest.mark.parametrize("schema", CASES, ids=lambda s: json.dumps(s)[:60])
def test_merged_items_match_jsonschema(schema):
    rx = re.compile(to_regex(schema, strict=False))
    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for value in ARRAYS:
        text = serialize(value, schema, schema)
        is_valid = oracle.is_valid(json.loads(text))
        assert bool(rx.fullmatch(text)) == is_valid, (schema, text, is_valid)
        seen[is_valid] += 1
    assert seen[True] and seen[False], seen


def test_first_element_checked_against_both_branches():
    # the case that was a superset: ["a"] passes the prefix schema (minimum ignores strings)
    # but not the other branch's items
    rx = re.compile(
        to_regex({"allOf": [{"items": {"type": "integer"}}, {"prefixItems": [{"minimum": 5}]}]})
    )
    assert rx.fullmatch("[5,6]") and rx.fullmatch("[7]")
    assert not rx.fullmatch('["a"]') and not rx.fullmatch("[4]") and not rx.fullmatch('[5,"b"]')
