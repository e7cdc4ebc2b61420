""" "Valid against none of these branches" where a branch is an ``anyOf`` itself or repeats
another (``StructuredNegation._flat_branches``: ``not ((A or B) or A) = not (A or B)``): the
product of the branches' disjuncts as written goes over ``MAX_DISJUNCTS`` (the inner
``anyOf``'s disjuncts are conjunctions, which the product cannot prune against the repeated
branch's own), that of the flat branches fits. Variants extend one base (``allOf: [{$ref:
base}, {...}]``), as real schemas write them: the product keeps each of the base's
disjuncts once for all variants (a choice that holds another is dropped). Checked against
jsonschema by regex fullmatch and by structural token walks, as the other negation tests.
"""

from __future__ import annotations

import itertools

import pytest

from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.compiler import SchemaCompiler
from formcast.grammar.json_schema.complement import (
    MAX_DISJUNCTS,
    StructuredNegation,
    TooManyDisjuncts,
)
from tests.grammar.json_schema.test_not_oneof_if import check
from tests.grammar.schema_oracle import assert_walks_agree

BASE = {  # the variants' base: two integer members required
    "type": "object",
    "properties": {name: {"type": "integer", "minimum": 0} for name in "ab"},
    "required": ["a", "b"],
}
DEFS = {"base": BASE}


def variant(kind: str, **more) -> dict:
    """A variant of the base: the base and a ``kind`` member of its own."""
    own = {"properties": {"kind": {"const": kind}, **more}, "required": ["kind"]}
    return {"allOf": [{"$ref": "#/$defs/base"}, own]}


def pair(first: str, second: str) -> dict:
    """An object with two required integer members (5 ways to fail, a non-object one)."""
    return {
        "type": "object",
        "properties": {first: {"type": "integer"}, second: {"type": "integer"}},
        "required": [first, second],
    }


AB, CD = pair("a", "b"), pair("c", "d")
SCHEMAS = {
    # (AB or CD) or AB: the inner anyOf's 17 disjuncts are conjunctions, none of which
    # holds one of AB's 5: 17 x 5 choices as written, 17 flat
    "nested_any_of": {"not": {"anyOf": [{"anyOf": [AB, CD]}, AB]}},
    # ((CD)) or AB, through a $ref
    "nested_ref": {
        "$defs": {"cd": {"anyOf": [CD]}},
        "not": {"anyOf": [{"$ref": "#/$defs/cd"}, AB]},
    },
    # an overlapping oneOf of variants of one base (each branch minus the others)
    "one_of_variants": {
        "$defs": DEFS,
        "oneOf": [variant("x"), variant("x", e={"type": "string"}), variant("y")],
    },
    # a branch that is the base itself beside a variant of it
    "base_itself": {"$defs": DEFS, "not": {"anyOf": [variant("x"), {"$ref": "#/$defs/base"}]}},
}

ABSENT = object()
ATOMS = [ABSENT, 1, -1, "s"]


def _values() -> list:
    """Objects over members a, b, c, d (absent, a valid or a negative integer, a string),
    kinds and an ``e``, and values of other types."""
    out: list = []
    kinds, es = (ABSENT, "x", "y"), (ABSENT, 2)
    for atoms in itertools.product(ATOMS, ATOMS, ATOMS[:2], (ABSENT, 1, "s"), kinds, es):
        named = zip(("a", "b", "c", "d", "kind", "e"), atoms, strict=True)
        out.append({name: atom for name, atom in named if atom is not ABSENT})
    return out + [None, "x", 3, [], [{"a": 1}]]


VALUES = _values()


def test_the_product_of_the_branches_as_written_is_over_budget():
    """The nested schema exercises the flattening: the product of its branches as written
    is refused, the negation of the flat branches fits."""
    c = SchemaCompiler(SCHEMAS["nested_any_of"], strict=False)
    negation = StructuredNegation(c, {})
    branches = SCHEMAS["nested_any_of"]["not"]["anyOf"]
    with pytest.raises(TooManyDisjuncts):
        negation._product(branches, "/not/anyOf")
    assert negation._flat_branches(branches, "/not/anyOf") == [AB, CD]
    assert 0 < len(negation._none_of(branches, "/not/anyOf")) <= MAX_DISJUNCTS
    flat = [AB, CD]
    assert negation._flat_branches(flat, "/not/anyOf") is flat  # nothing to do: as given


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", ["nested_any_of", "one_of_variants"])
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES[::3], smollm2_tokenizer)
