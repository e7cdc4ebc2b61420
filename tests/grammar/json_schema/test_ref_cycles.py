"""has_ref_cycle: recursive schemas take the structural route without a regex attempt; the
scan's answers on the shapes it must tell apart, and the languages against jsonschema."""

from __future__ import annotations

import json

import pytest

import formcast.grammar.json_schema.compile as compile_module
from formcast.errors import SchemaError
from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.ref_cycles import has_ref_cycle
from tests.grammar.schema_oracle import validator

TREE = {
    "type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["v"],
    "additionalProperties": False,
}
CHAIN = {  # a -> b -> a through definitions, reached from a property
    "type": "object",
    "properties": {"a": {"$ref": "#/definitions/a"}},
    "additionalProperties": False,
    "definitions": {
        "a": {"type": "array", "items": {"$ref": "#/definitions/b"}, "maxItems": 2},
        "b": {"anyOf": [{"type": "integer"}, {"$ref": "#/definitions/a"}]},
    },
}
JSON_VALUE = {  # recursive, but read as any value (`true`): the regex route takes it
    "$ref": "#/definitions/v",
    "definitions": {
        "v": {
            "anyOf": [
                {"type": "null"},
                {"type": "boolean"},
                {"type": "number"},
                {"type": "string"},
                {"type": "array", "items": {"$ref": "#/definitions/v"}},
                {"type": "object", "additionalProperties": {"$ref": "#/definitions/v"}},
            ]
        }
    },
}
UNUSED_CYCLE = {"type": "string", "definitions": {"a": {"$ref": "#/definitions/a"}}}
DRAFT7_SIBLINGS = {  # draft-07 ignores a $ref's siblings: the cycle there is never read
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$ref": "#/definitions/s",
    "properties": {"x": {"$ref": "#"}},
    "definitions": {"s": {"type": "string", "maxLength": 3}},
}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (TREE, True),
        (CHAIN, True),
        (JSON_VALUE, False),
        (UNUSED_CYCLE, False),
        (DRAFT7_SIBLINGS, False),
        ({"$ref": "#/nope"}, False),  # unresolvable: refused by both routes alike
        ({"type": "integer"}, False),
        (True, False),
    ],
)
def test_scan(schema, expected):
    assert has_ref_cycle(schema, strict=False, max_any_depth=None) is expected


def test_any_value_bound_makes_the_json_value_recursive():
    assert has_ref_cycle(JSON_VALUE, strict=False, max_any_depth=3)


@pytest.mark.parametrize("schema", [TREE, CHAIN], ids=["tree", "chain"])
def test_recursive_schemas_skip_the_regex_attempt(smollm2_vocab, monkeypatch, schema):
    def no_regex_attempt(*args, **kwargs):
        raise AssertionError("the regex route was attempted")

    monkeypatch.setattr(compile_module, "compile_tree", no_regex_attempt)
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, CompiledCFG)
    oracle = validator(schema)
    values = [{"v": 1}, {"v": 1, "kids": [{"v": 2, "kids": []}]}, {"a": [1, [2, 3]]}, {"a": []}]
    values += [{"v": "x"}, {"a": [1, 2, 3]}, {"kids": []}, {"a": [[[[1]]], "x"]}]
    for value in values:
        matcher = grammar.matcher()
        text = json.dumps(value, separators=(",", ":")).encode()
        assert (matcher.accept_bytes(text) and matcher.is_accepting()) == oracle.is_valid(value)


def test_refusals_are_unchanged(smollm2_vocab):
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_json_schema({"$ref": "#"}, smollm2_vocab, cache=False)
    with pytest.raises(SchemaError, match="does not resolve"):
        compile_json_schema({"$ref": "#/nope"}, smollm2_vocab, cache=False)
