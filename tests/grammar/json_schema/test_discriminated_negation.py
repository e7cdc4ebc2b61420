""" "Valid against none of these branches" split by a member whose values the branches list
(``StructuredNegation._split_by_listed_member``): the overlapping ``oneOf`` of a
discriminated union whose discriminator may be absent, where the product of the branches'
disjuncts goes over ``MAX_DISJUNCTS``.

Languages are compared with jsonschema on both routes: the regex's fullmatch of each value's
formcast text, and a token walk of the structural grammar (SmolLM2's tokenizer) where every
token taken is in the mask iff the matcher accepts it.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.compiler import SchemaCompiler
from formcast.grammar.json_schema.complement import StructuredNegation, TooManyDisjuncts
from formcast.grammar.json_schema.values import serialize
from tests.grammar.json_schema.test_not_oneof_if import check, to_regex
from tests.grammar.schema_oracle import assert_walks_agree, validator

NUM_BRANCHES = 7
BRANCHES = [  # branch i: kind "k<i>" and v one of two neighbouring pool values, if present
    {"properties": {"kind": {"const": f"k{i}"}, "v": {"enum": [f"p{i}", f"p{i + 1}"]}}}
    for i in range(NUM_BRANCHES)
]
UNION = {"type": "object", "oneOf": BRANCHES}
CLOSED = {  # closed branches sharing a kind (kind stays declared when held), some requiring it
    "type": "object",
    "oneOf": [
        {
            "properties": {"kind": {"enum": [f"k{i}", "shared"]}, "v": b["properties"]["v"]},
            "additionalProperties": False,
            **({"required": ["kind"]} if i % 2 else {}),
        }
        for i, b in enumerate(BRANCHES)
    ],
}
REST_LISTS = {  # the schema around lists kind's values and requires it
    "type": "object",
    "properties": {"kind": {"enum": ["k0", "k1", "k2", "zz"]}},
    "required": ["kind"],
    "oneOf": BRANCHES,
}
NONE_OF = {"type": "object", "not": {"anyOf": BRANCHES}}
UNLISTED = {"properties": {"v": {"type": "string", "maxLength": 2}}}  # lists no kind
WITH_UNLISTED = {"type": "object", "oneOf": [*BRANCHES, UNLISTED]}
NONE_OF_UNLISTED = {  # the unlisted branch stays whole in every case
    "type": "object",
    "not": {"anyOf": [*CLOSED["oneOf"], UNLISTED]},
}
NOT_TYPED = {"not": {"type": "object", "anyOf": BRANCHES}}  # arrays fail it by their type
NOT_OBJECT_BRANCHES = {"not": {"anyOf": [{**b, "type": "object"} for b in BRANCHES]}}  # arrays too
SCHEMAS = {
    "union": UNION,
    "closed": CLOSED,
    "rest_lists": REST_LISTS,
    "none_of": NONE_OF,
    "with_unlisted": WITH_UNLISTED,
    "none_of_unlisted": NONE_OF_UNLISTED,
    "not_typed": NOT_TYPED,
    "not_object_branches": NOT_OBJECT_BRANCHES,
}

ABSENT = object()
KINDS = [ABSENT, "k0", "k3", "k6", "shared", "zz", 1]
VS = [ABSENT, "p0", "p1", "p4", "p7", "q", None]
EXTRAS = [ABSENT, 1]
VALUES = [
    {name: atom for name, atom in zip(("kind", "v", "x"), atoms, strict=True) if atom is not ABSENT}
    for atoms in itertools.product(KINDS, VS, EXTRAS)
] + ["k0", None, [], [{"kind": "k0"}], [{"kind": "zz"}]]


def test_the_product_of_disjuncts_is_over_budget():
    """The schemas exercise the split: the plain product alone is refused."""
    c = SchemaCompiler(UNION, strict=False)
    with pytest.raises(TooManyDisjuncts):
        StructuredNegation(c, {"type": "object"})._product(BRANCHES, "/not/anyOf")
    split = StructuredNegation(c, {"type": "object"})._none_of(BRANCHES, "/not/anyOf")
    assert 0 < len(split) <= 64


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_matches_jsonschema(name):
    check(SCHEMAS[name], VALUES)


@pytest.mark.parametrize("name", ["union", "closed", "none_of_unlisted"])
def test_structural_route_matches_jsonschema(name, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False, cache=False)
    assert_walks_agree(grammar, schema, VALUES, smollm2_tokenizer)


def test_cases_that_rest_excludes_are_not_written():
    """Values ``rest`` does not list get no case, nor does the discriminator's absence where
    ``rest`` requires it (such cases would only be empty after the merge)."""
    c = SchemaCompiler({}, strict=False)
    rest = {"type": "object", "properties": {"kind": {"enum": ["k0", "k1"]}}, "required": ["kind"]}
    cases = [d["allOf"][0] for d in StructuredNegation(c, rest)._none_of(BRANCHES, "/not/anyOf")]
    assert cases and all("kind" in case["required"] for case in cases)
    assert {v for case in cases for v in case["properties"]["kind"]["enum"]} == {"k0", "k1"}


def test_numbers_are_not_listed_values():
    """Listed numbers are left to the product (``1`` and ``1.0`` are one value)."""
    c = SchemaCompiler({}, strict=False)
    assert c.listed_values({"enum": [1, "a"]}, "") is None
    assert c.listed_values({"enum": ["a", None, True]}, "") == {
        '"a"': "a",
        "null": None,
        "true": True,
    }
    assert c.listed_values({"type": "string", "enum": ["a", None]}, "") == {'"a"': "a"}
    assert c.listed_values({"enum": ["a"], "maxLength": 3}, "") is None
    assert c.listed_values({"enum": ["a", "b"], "const": "b"}, "") == {'"b"': "b"}


def _listed(pool: list[str]) -> st.SearchStrategy:
    return st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True).map(
        lambda values: {"enum": values} if len(values) > 1 else {"const": values[0]}
    )


_BRANCH = st.fixed_dictionaries(
    {
        "properties": st.fixed_dictionaries(
            {},
            optional={
                "kind": _listed(["a", "b", "c"]),
                "v": st.one_of(_listed(["x", "y"]), st.just({"type": "string", "maxLength": 1})),
            },
        )
    },
    optional={
        "required": st.lists(st.sampled_from(["kind", "v"]), max_size=2, unique=True),
        "additionalProperties": st.just(False),
    },
)
# the names are declared around the union, so the instance's text has formcast's order
_DECLARED = {"kind": True, "v": True}
_SCHEMA = st.builds(
    lambda branches, how, rest: (
        {"type": "object", **rest, how: branches}
        if how == "oneOf"
        else {"type": "object", **rest, "not": {"anyOf": branches}}
    ),
    st.lists(_BRANCH, min_size=2, max_size=4),
    st.sampled_from(["oneOf", "not"]),
    st.sampled_from(
        [
            {"properties": _DECLARED},
            {"properties": _DECLARED, "required": ["kind"]},
            {"properties": {**_DECLARED, "kind": {"enum": ["a", "b", "d"]}}},
        ]
    ),
)
_OBJECTS = [
    {name: atom for name, atom in zip(("kind", "v", "w"), atoms, strict=True) if atom is not ABSENT}
    for atoms in itertools.product(
        [ABSENT, "a", "b", "c", "d", 1], [ABSENT, "x", "y", "yy", "z", None], [ABSENT, 0]
    )
]


@settings(max_examples=20, deadline=None)
@given(_SCHEMA)
def test_the_split_alone_matches_jsonschema_on_generated_unions(schema):
    """Every none-of that has a listed member is split (the product refused), on generated
    discriminated unions: listed or open discriminators, required or not, closed or open
    branches, a rest that requires or lists the discriminator."""

    def product_unless_listed(self, branches, pointer, types=None):
        is_listed = any(
            isinstance(sub, dict) and ("enum" in sub or "const" in sub)
            for branch in branches
            if isinstance(branch, dict)
            for sub in (branch.get("properties") or {}).values()
        )
        if is_listed and types != {"array"}:
            raise TooManyDisjuncts("the split alone", pointer, "anyOf")
        return ORIGINAL_PRODUCT(self, branches, pointer, types)

    oracle = validator(schema)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StructuredNegation, "_product", product_unless_listed)
        try:
            rx = re.compile(to_regex(schema, strict=False))
        except SchemaError as exc:  # refused elsewhere (e.g. a closed object's negation
            # beside member counts), or no value is valid at all
            assert "unsatisfiable" not in str(exc) or not any(map(oracle.is_valid, _OBJECTS))
            reject()
    for value in _OBJECTS:
        text = serialize(value, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)


ORIGINAL_PRODUCT = StructuredNegation._product
