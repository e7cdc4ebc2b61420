"""``oneOf`` branches told apart by listed values: a branch whose ``enum`` / ``const`` values
all fail the other branch is disjoint from it (``SchemaCompiler._may_admit``), so the union
needs no complement; a value both admit keeps the complement (and is rejected). Values with
numbers are never judged by text (``2.0`` is an integer to the specification).

Checked against jsonschema through the regex's fullmatch (``test_not_oneof_if.check``).
"""

from __future__ import annotations

import pytest

from formcast.grammar.json_schema.compiler import SchemaCompiler
from tests.grammar.json_schema.test_not_oneof_if import check

KIND_DISJOINT = {  # the second branch's strings exclude every value the first lists
    "type": "object",
    "required": ["kind"],
    "oneOf": [
        {"properties": {"kind": {"enum": ["a", "b"]}}},
        {"properties": {"kind": {"type": "string", "not": {"enum": ["a", "b", "c"]}}}},
    ],
}
KIND_OVERLAP = {  # "b" is valid against both branches: invalid under oneOf
    "type": "object",
    "required": ["kind"],
    "oneOf": [
        {"properties": {"kind": {"enum": ["a", "b"]}}},
        {"properties": {"kind": {"type": "string", "not": {"enum": ["a"]}}}},
    ],
}
OBJECT_CONST = {  # a constant object that an open variant admits too
    "oneOf": [
        {"const": {"type": "void"}},
        {"type": "object", "properties": {"type": {"type": "string", "maxLength": 4}}},
    ]
}
NUMBER_SPELLINGS = {"oneOf": [{"enum": [2.0, "x"]}, {"type": "integer"}]}

KINDS = ["a", "b", "c", "d", "", 1, None]


@pytest.mark.parametrize("schema", [KIND_DISJOINT, KIND_OVERLAP], ids=["disjoint", "overlap"])
def test_kind_discriminators(schema):
    check(schema, [{"kind": k} for k in KINDS] + [{}, {"kind": "a", "x": 1}], strict=False)


def test_constant_object_against_an_open_variant():
    values = [{"type": "void"}, {"type": "voids"}, {"type": "ab"}, {}, {"type": "void", "x": 1}]
    check(OBJECT_CONST, values + [{"type": 1}, "void", None], strict=False)


def test_values_with_numbers_are_not_judged_by_text():
    check(NUMBER_SPELLINGS, [2, 2.0, 3, "x", "y", 2.5, None], strict=False)


def test_disjointness_by_listed_values():
    c = SchemaCompiler(KIND_DISJOINT, strict=False)
    first, second = (b["properties"]["kind"] for b in KIND_DISJOINT["oneOf"])
    assert c._disjoint(first, second) and c._disjoint(second, first)
    overlap = KIND_OVERLAP["oneOf"][1]["properties"]["kind"]
    assert not c._disjoint(first, overlap)
    assert not c._disjoint({"enum": [2.0]}, {"type": "integer"})  # (not judged: a number)
