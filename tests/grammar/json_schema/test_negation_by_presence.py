""" "Valid against none of these branches" split by the presence of a member the branches
require (``StructuredNegation._split_by_required_member``): variants told apart by their
keys (``{"$date": 1}``, ``{"$oid": "..."}``, each closed), whose disjuncts' product goes over
``MAX_DISJUNCTS``; and ``oneOf`` branches proven disjoint by a required key that a closed
branch's ``patternProperties`` cannot match, or by unions whose every branch is disjoint from
the other side (``SchemaCompiler._disjoint``), which then need no negation at all; and the names of the negated schema that the layout places among the declared
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

# oneOf branches that are unions themselves: disjoint where every branch of one is disjoint
# from the other (a closed object needing "size" or a string, against closed selectors)
SIZED = tagged("size", {"type": "integer"}, style={"enum": ["a", "b"]})
SELECTORS = {
    "oneOf": [
        tagged("$date", {"type": "integer"}),
        {
            "type": "object",
            "patternProperties": {"^[a-z]{2,3}$": True},
            "minProperties": 1,
            "additionalProperties": False,
        },
    ]
}
SCHEMAS["one_of_unions"] = {
    "$defs": {"selectors": SELECTORS},
    "oneOf": [
        {"oneOf": [SIZED, {"type": "string", "maxLength": 2}]},
        {"$ref": "#/$defs/selectors"},
    ],
}
# ... and where one branch of a union is not: {"$date": 1} is valid against both sides
SCHEMAS["one_of_overlapping_unions"] = {
    "oneOf": [
        {"anyOf": [SIZED, {"type": "object", "properties": {"$date": {"type": "integer"}}}]},
        {"oneOf": VARIANTS[:2]},
    ],
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
    out += [{"size": 1}, {"size": 1, "style": "a"}, {"size": "1"}, {"ab": 1}, {"abc": 1, "x": 1}]
    out += [{"size": 1, "ab": 1}, "ab", "abc"]
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


def test_unions_are_disjoint_branch_by_branch():
    c = SchemaCompiler(SCHEMAS["one_of_unions"], strict=False)
    sized_or_string = SCHEMAS["one_of_unions"]["oneOf"][0]
    assert c._disjoint(sized_or_string, SELECTORS) and c._disjoint(SELECTORS, sized_or_string)
    assert not c._disjoint({"anyOf": [SIZED, {"type": "object"}]}, SELECTORS)


@pytest.mark.parametrize(
    "name",
    [
        "two_variants",
        "none_of_variants",
        "with_open_branch",
        "one_of_unions",
        "one_of_overlapping_unions",
    ],
)
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES[::2], smollm2_tokenizer)
