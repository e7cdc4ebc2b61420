"""Malformed keyword values: a ``SchemaError`` naming the keyword and its pointer, never a crash.

Before the check, ``{"properties": "x"}`` raised ``AttributeError`` deep in the compiler,
``{"minimum": "zero"}`` a bare ``ValueError`` from ``Fraction``, and ``{"required": "ab"}``
silently required the keys ``"a"`` and ``"b"``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import CompileBudgetError, FormcastError, SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.keyword_types import check_keyword_types
from formcast.grammar.json_schema.structural import json_schema_to_cfg

MALFORMED = [
    ({"type": "object", "properties": "x"}, "properties", ""),
    ({"type": "number", "minimum": "zero"}, "minimum", ""),
    ({"type": "object", "required": "ab"}, "required", ""),
    ({"properties": {"a": {"maxLength": -1}}}, "maxLength", "/properties/a"),
    ({"properties": {"a/b": {"type": "strin"}}}, "type", "/properties/a~1b"),
    ({"items": 3}, "items", ""),
    ({"anyOf": []}, "anyOf", ""),
    ({"allOf": [{"type": "string"}, {"pattern": 5}]}, "pattern", "/allOf/1"),
    ({"$defs": {"d": {"multipleOf": 0}}}, "multipleOf", "/$defs/d"),
    ({"additionalProperties": "no"}, "additionalProperties", ""),
    ({"type": "array", "uniqueItems": "yes"}, "uniqueItems", ""),
    ({"exclusiveMinimum": "1"}, "exclusiveMinimum", ""),
    (
        {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 1},
        "exclusiveMinimum",
        "",
    ),  # fmt: skip
    ({"$ref": 7}, "$ref", ""),
    ({"type": "string", "minLength": 1.5}, "minLength", ""),
]


@pytest.mark.parametrize("schema,keyword,pointer", MALFORMED)
def test_malformed_values_name_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, max_any_depth=2)
    assert info.value.keyword == keyword
    assert info.value.pointer == pointer
    assert isinstance(info.value, ValueError)
    assert keyword in str(info.value)
    with pytest.raises(SchemaError):  # the structural route checks the same way
        json_schema_to_cfg(schema)


def test_well_formed_values_pass():
    check_keyword_types(
        {
            "type": ["string", "null"],
            "minLength": 2.0,
            "required": [],
            "items": [{"type": "integer"}, True],
            "properties": {"a": False},
            "exclusiveMaximum": 3,
            "definitions": {"x": {"enum": [1, "a"]}},
        }
    )
    check_keyword_types(
        {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMaximum": True},
        "draft4",
    )


def test_through_compile_json_schema(smollm2_vocab):
    for route in ("auto", "cfg", "regex"):
        with pytest.raises(SchemaError, match="'minimum' must be a number"):
            compile_json_schema({"minimum": "zero"}, smollm2_vocab, route=route, cache=False)


_KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "minimum", "maximum",
    "exclusiveMinimum", "multipleOf", "minLength", "maxLength", "pattern", "format", "enum",
    "const", "anyOf", "allOf", "oneOf", "not", "additionalProperties", "minItems",
    "uniqueItems", "contains", "propertyNames", "patternProperties", "$ref", "minProperties",
]  # fmt: skip
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.sampled_from(
        ["", "a", "string", "object", "^a$", "#", "#/x", "[", "date"]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYWORDS + ["a"]), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYWORDS), _JSON, min_size=1, max_size=3))
def test_fuzzed_schemas_compile_or_raise_typed_errors(schema):
    """Any JSON under any keyword: a regex or a typed formcast error, nothing else."""
    for compile_to in (
        lambda s: json_schema_to_regex(s, max_any_depth=1, lenient=False),
        json_schema_to_cfg,
    ):
        try:
            compile_to(json.loads(json.dumps(schema)))
        except (SchemaError, CompileBudgetError):
            pass
        except FormcastError as exc:  # any other typed error must still be the input's fault
            assert isinstance(exc, ValueError), (schema, exc)
