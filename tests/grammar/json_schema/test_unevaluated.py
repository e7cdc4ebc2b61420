"""``unevaluatedProperties`` / ``unevaluatedItems`` where the evaluated set is fixed: languages
against jsonschema (2020-12 and 2019-09) on the regex route and the structural route, and
refusals, with their pointer, where it depends on the instance."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import json_schema_to_regex
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from tests.grammar.schema_oracle import validator

D2019 = "https://json-schema.org/draft/2019-09/schema"
BASE = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
SCHEMAS = {
    # the common form: a $ref'd base, more properties here, nothing else allowed
    "ref_closed": {
        "$defs": {"base": BASE},
        "$ref": "#/$defs/base",
        "properties": {"name": {"enum": ["a", "b"]}},
        "unevaluatedProperties": False,
    },
    "allof_patterns": {
        "allOf": [BASE],
        "patternProperties": {"^x_": {"type": "boolean"}},
        "unevaluatedProperties": {"type": "string", "maxLength": 1},
    },
    "additional_evaluates_all": {
        "allOf": [{**BASE, "additionalProperties": True}],
        "unevaluatedProperties": False,
    },
    "items_2020": {
        "allOf": [{"prefixItems": [{"type": "integer"}, {"type": "integer"}]}],
        "prefixItems": [{"type": "integer"}],
        "unevaluatedItems": False,
        "maxItems": 4,
    },
    "items_2019": {
        "$schema": D2019,
        "allOf": [{"items": [{"type": "integer"}]}],
        "unevaluatedItems": {"type": "boolean"},
        "maxItems": 3,
    },
    # branches: what the validating branches evaluate (one choice per branch / subset / if)
    "oneof_branches": {
        "properties": {"id": {"type": "integer"}},
        "oneOf": [
            {"properties": {"name": {"enum": ["a", "b"]}}, "required": ["name"]},
            {"properties": {"zz": {"type": "string"}}, "required": ["zz"]},
        ],
        "unevaluatedProperties": False,
    },
    "anyof_branches": {
        "$defs": {"named": {"properties": {"name": {"enum": ["a", "b"]}}, "required": ["name"]}},
        "properties": {"id": {"type": "integer"}},
        "anyOf": [{"$ref": "#/$defs/named"}, {"properties": {"zz": {"type": "string"}}}],
        "unevaluatedProperties": False,
    },
    "if_then_else": {
        "properties": {"id": {"type": "integer"}},
        "if": {"properties": {"name": {"const": "a"}}, "required": ["name"]},
        "then": {"properties": {"x_ok": {"type": "boolean"}}},
        "else": {"properties": {"zz": {"type": "string"}}},
        "unevaluatedProperties": False,
    },
    "ignored_in_draft7": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
        "unevaluatedProperties": False,
    },
}
OBJECT_VALUES = [
    {"id": 1},
    {"id": 1, "name": "a"},
    {"id": 1, "name": "c"},
    {"id": 1, "x_ok": True},
    {"id": 1, "x_ok": 3},
    {"id": 1, "zz": "q"},
    {"id": 1, "zz": "long"},
    {"name": "a"},
    {"id": 1, "name": "a", "zz": "q"},
    {"id": 1, "name": "a", "x_ok": True},
    {"id": 1, "name": "c", "zz": "q"},
    {"zz": "q"},
    {"id": 1, "name": "a", "zz": 5},
]
ARRAY_VALUES = [
    list(v)
    for n in range(5)
    for v in itertools.product([1, True], repeat=n)
]  # fmt: skip


def _values(name: str) -> list:
    return ARRAY_VALUES if name.startswith("items") else OBJECT_VALUES


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_equals_jsonschema(name):
    schema = SCHEMAS[name]
    pattern = re.compile(json_schema_to_regex(schema, max_any_depth=0, strict=False))
    oracle = validator(schema)
    seen = set()
    for value in _values(name):
        text = json.dumps(value, separators=(",", ":"))
        is_valid = oracle.is_valid(value)
        # formcast writes properties in the schema's order: only test texts in that order
        if is_valid and not pattern.fullmatch(text):
            reordered = {k: value[k] for k in ("id", "name", "x_ok", "zz") if k in value}
            text = json.dumps(reordered, separators=(",", ":"))
        assert bool(pattern.fullmatch(text)) == is_valid, (name, text)
        seen.add(is_valid)
    assert seen == {True, False}


@pytest.mark.parametrize("name", ["ref_closed", "items_2020", "oneof_branches", "if_then_else"])
def test_structural_route_equals_jsonschema(smollm2_vocab, name):
    schema = SCHEMAS[name]
    grammar = compile_json_schema_cfg(schema, smollm2_vocab, strict=False)
    oracle = validator(schema)
    for value in _values(name):
        matcher = grammar.matcher()
        text = json.dumps(value, separators=(",", ":")).encode()
        assert (matcher.accept_bytes(text) and matcher.is_accepting()) == oracle.is_valid(value)


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"dependentSchemas": {"id": BASE}, "unevaluatedProperties": False}, ""),
        ({"oneOf": [{"anyOf": [BASE]}, BASE], "unevaluatedProperties": False}, ""),
        ({"anyOf": [{"properties": {str(i): {}}} for i in range(7)],
          "unevaluatedProperties": False}, ""),
        ({"properties": {"a": {"if": {"anyOf": [BASE]}, "then": BASE, "unevaluatedProperties": False}}}, "/properties/a"),
        ({"contains": {"type": "integer"}, "unevaluatedItems": False}, ""),
        ({"allOf": [{**BASE, "unevaluatedProperties": False}], "unevaluatedProperties": False}, ""),
    ],
)  # fmt: skip
def test_instance_dependent_cases_are_refused(schema, pointer):
    with pytest.raises(SchemaError, match="unevaluated") as info:
        json_schema_to_regex(schema)
    assert info.value.pointer == pointer
