"""``embed_schema``: a schema placed inside another document keeps its references' meaning."""

from __future__ import annotations

import jsonschema
import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.embedding import embed_schema

INNER = {
    "$id": "https://example.com/node.json",
    "type": "object",
    "properties": {
        "value": {"$ref": "#/$defs/Value"},
        "next": {"$ref": "https://example.com/node.json"},
        "tag": {"const": {"$ref": "#/not/a/schema"}},
    },
    "$defs": {"Value": {"enum": [1, 2]}},
    "additionalProperties": False,
}


def test_embedded_copy_validates_like_the_original():
    outer = {
        "type": "object",
        "properties": {"arguments": embed_schema(INNER, "/properties/arguments")},
    }
    original = jsonschema.Draft202012Validator(INNER)
    embedded = jsonschema.Draft202012Validator(outer)
    for value in (
        {"value": 1},
        {"value": 3},
        {"value": 2, "next": {"value": 1, "next": {"value": 2}}},
        {"value": 1, "next": {"value": 5}},
        {"tag": {"$ref": "#/not/a/schema"}},
        {"tag": {"$ref": "#/properties/arguments/not/a/schema"}},
    ):
        assert original.is_valid(value) == embedded.is_valid({"arguments": value}), value


def test_the_original_is_untouched_and_data_is_not_rewritten():
    copy = embed_schema(INNER, "/x")
    assert INNER["properties"]["value"] == {"$ref": "#/$defs/Value"}
    assert copy["properties"]["value"] == {"$ref": "#/x/$defs/Value"}
    assert copy["properties"]["next"] == {"$ref": "#/x"}
    assert copy["properties"]["tag"] == {"const": {"$ref": "#/not/a/schema"}}
    assert "$id" not in copy
    assert embed_schema({"$ref": "#"}, "") == {"$ref": "#"}
    assert embed_schema({"$ref": "other.json#/a"}, "/x") == {"$ref": "other.json#/a"}


def test_malformed_schema_keywords_raise():
    with pytest.raises(SchemaError):
        embed_schema({"properties": [1]}, "/x")
