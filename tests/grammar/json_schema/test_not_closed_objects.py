"""The negation of a closed object where the schema around it allows other keys: some member
under none of the negated object's names, valid against the negation of its
``additionalProperties`` (``complement`` via the private ``merge.SOME_EXTRA_KEY``).

Languages are compared with jsonschema on both routes: the regex's fullmatch of each value's
formcast text, and a token walk of the structural grammar (SmolLM2's tokenizer) where every
token taken is in the mask iff the matcher accepts it.
"""

from __future__ import annotations

import itertools

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from tests.grammar.json_schema.test_not_oneof_if import check
from tests.grammar.schema_oracle import assert_walks_agree

NOT_CLOSED = {  # valid: a is an integer if present, and some key is neither a nor b
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "not": {"properties": {"a": True, "b": True}, "additionalProperties": False},
}
NOT_TYPED_EXTRAS = {  # valid: some key other than a holds a non-string
    "type": "object",
    "not": {"properties": {"a": True}, "additionalProperties": {"type": "string"}},
}
ONE_OF_CLOSED = {  # overlapping closed variants: exactly one may hold
    "type": "object",
    "oneOf": [
        {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        {"properties": {"b": {"type": "integer"}}, "additionalProperties": False},
    ],
}
SCHEMAS = {"not_closed": NOT_CLOSED, "not_typed_extras": NOT_TYPED_EXTRAS, "one_of": ONE_OF_CLOSED}

KEYS = ["a", "b", "c", "d"]
ATOMS = [1, "s", None, [2]]
VALUES = [{}] + [
    dict(zip(names, atoms, strict=True))
    for size in (1, 2, 3)
    for names in itertools.combinations(KEYS, size)
    for atoms in itertools.product(ATOMS[:2] if size == 3 else ATOMS, repeat=size)
]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES, smollm2_tokenizer)


@pytest.mark.parametrize(
    "rest",
    [
        {"patternProperties": {"^x": {"type": "integer"}}},
        {"minProperties": 1},
    ],
    ids=["pattern_properties", "member_counts"],
)
def test_refused_beside_what_the_extra_member_cannot_be_counted_with(rest):
    schema = {"type": "object", **rest, "not": NOT_CLOSED["not"]}
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, strict=False)
    assert info.value.keyword == "additionalProperties"
