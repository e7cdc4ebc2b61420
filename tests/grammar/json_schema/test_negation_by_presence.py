""" "Valid against none of these branches" split by the presence of a member the branches
require (``StructuredNegation._split_by_required_member``): variants told apart by their
keys (``{"$date": 1}``, ``{"$oid": "..."}``, each closed), whose disjuncts' product goes over
``MAX_DISJUNCTS``; and ``oneOf`` branches proven disjoint by a required key that a closed
branch's ``patternProperties`` cannot match (``SchemaCompiler._disjoint``), which then need no
negation at all; and the names of the negated schema that the layout places among the declared
ones (``StructuredNegation.laid_out``): a closed variant fails on such a name through its own
disjunct, since it is no "other key" of the merged object.

Languages are compared with jsonschema on both routes: the regex's fullmatch of each value's
formcast text, and a token walk of the structural grammar (SmolLM2's tokenizer) where every
token taken is in the mask iff the matcher accepts it.
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


def tagged(name: str, value: dict, **more) -> dict:
    """A closed object with the required member ``name`` (and optional others)."""
    return {
        "type": "object",
        "properties": {name: value, **more},
        "required": [name],
        "additionalProperties": False,
    }


VARIANTS = [
    tagged("$date", {"type": "integer"}),
    tagged("$oid", {"type": "string", "maxLength": 3}, note={"type": "string"}),
    tagged("$num", {"type": "integer", "minimum": 0}),
    tagged("$ts", {"type": "object", "properties": {"t": {"type": "integer"}}, "required": ["t"]}),
]
OPEN = {"type": "object", "properties": {"$date": {"type": "string"}}, "required": ["$date"]}
SCHEMAS = {
    # none of two closed variants (the product): a member one variant declares fails the
    # other, at the place the layout gives the names of the negated schema
    "two_variants": {"not": {"anyOf": VARIANTS[1:3]}},
    # none of four closed variants: each case keeps one variant
    "none_of_variants": {"not": {"anyOf": VARIANTS}},
    # an open branch (other keys allowed) stays whole in every case
    "with_open_branch": {"not": {"anyOf": [*VARIANTS[:3], OPEN]}},
    # values or variants, and a document whose keys cannot start with "$": disjoint from the
    # variants by their required keys, so the oneOf needs no negation
    "value_one_of": {
        "$defs": {
            "value": {
                "oneOf": [
                    {"type": ["string", "integer"]},
                    *VARIANTS[:2],
                    {
                        "type": "object",
                        "patternProperties": {"^[^$]": {"$ref": "#/$defs/value"}},
                        "additionalProperties": False,
                    },
                ]
            }
        },
        "$ref": "#/$defs/value",
    },
}

ABSENT = object()
KEYS = ("$date", "$oid", "$num", "note", "x")
ATOMS = [ABSENT, 1, -1, "ab", "abcd"]


def _values() -> list:
    """Objects over the variants' keys, a shared optional member and an unknown one, with
    values of several types; nested documents; values of other types."""
    out: list = []
    for atoms in itertools.product(ATOMS, ATOMS[:4], ATOMS[:3], (ABSENT, "n"), (ABSENT, 2)):
        out.append({k: v for k, v in zip(KEYS, atoms, strict=True) if v is not ABSENT})
    out += [{"$ts": {"t": 1}}, {"$ts": {"t": "a"}}, {"$ts": {}}, {"a": {"$date": 1}}]
    out += [{"a": {"b": "c"}}, {"a": {"$x": 1}}, {"$date": 1, "a": 1}]
    return out + [None, "x", 3, [], [{"$date": 1}]]


VALUES = _values()


def test_the_product_of_disjuncts_is_over_budget():
    """The schemas exercise the split: the plain product alone is refused."""
    c = SchemaCompiler(SCHEMAS["none_of_variants"], strict=False)
    negation = StructuredNegation(c, {})
    with pytest.raises(TooManyDisjuncts):
        negation._product(VARIANTS, "/not/anyOf")
    assert negation._split_by_listed_member(VARIANTS, "/not/anyOf") is None  # nothing listed
    assert 0 < len(negation._none_of(VARIANTS, "/not/anyOf")) <= MAX_DISJUNCTS


def test_required_keys_outside_closed_patterns_are_disjoint():
    c = SchemaCompiler({}, strict=False)
    document = SCHEMAS["value_one_of"]["$defs"]["value"]["oneOf"][3]
    assert c._disjoint(VARIANTS[0], document)
    assert not c._disjoint({"required": ["a"]}, document)  # "a" matches the pattern
    assert not c._disjoint(VARIANTS[0], {**document, "patternProperties": {"^\\$": True}})


@pytest.mark.parametrize("name", ["two_variants", "none_of_variants", "with_open_branch"])
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES[::2], smollm2_tokenizer)
