"""``$ref`` through base URIs: ``$id`` (draft-04 ``id``) resources relative to their enclosing
base, ``$anchor`` and draft-06/07 plain-name fragment ids. Languages against jsonschema (which
resolves them as the specification does) on both routes, and the real SmolLM2 token walk."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema import refs
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.refs import localize_refs
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from tests.grammar.schema_oracle import validator

NESTED_IDS = {
    "$id": "https://example.com/schemas/order.json",
    "type": "object",
    "properties": {
        "item": {"$ref": "item.json"},
        "qty": {"$ref": "https://example.com/schemas/order.json#/$defs/count"},
        "code": {"$ref": "#code"},
        "inner": {"$ref": "parts/inner.json#/properties/sku"},
    },
    "required": ["item", "qty"],
    "additionalProperties": False,
    "$defs": {
        "item": {"$id": "item.json", "enum": ["pen", "cup"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "code": {"$anchor": "code", "type": "string", "pattern": "^[A-Z]{2}$"},
        "inner": {
            "$id": "parts/inner.json",
            "properties": {"sku": {"$ref": "../item.json"}},  # relative to parts/
        },
    },
}
DRAFT7_PLAIN_NAME = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "array",
    "items": {"$ref": "#flag"},
    "maxItems": 3,
    "definitions": {"flag": {"$id": "#flag", "type": "boolean"}},
}
DRAFT4_ID = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "id": "http://example.com/root.json",
    "type": "object",
    "properties": {"size": {"$ref": "defs.json#/small"}},
    "required": ["size"],
    "definitions": {"d": {"id": "defs.json", "small": {"enum": [1, 2]}}},
}
# a tree whose recursion goes through a resource: the structural route
RECURSIVE = {
    "$id": "https://example.com/tree.json",
    "type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "tree.json"}, "maxItems": 2}},
    "required": ["v"],
    "additionalProperties": False,
}  # fmt: skip

VALUES = {
    "nested": [
        {"item": "pen", "qty": 3},
        {"item": "cup", "qty": 9, "code": "AB", "inner": "pen"},
        {"item": "box", "qty": 3},
        {"item": "pen", "qty": 0},
        {"item": "pen", "qty": 2, "code": "ab"},
        {"item": "pen", "qty": 2, "inner": "mug"},
        {"qty": 1},
    ],
    "draft7": [[], [True, False], [True, 1], ["x"], [True, True, True, False]],
    "draft4": [{"size": 1}, {"size": 2}, {"size": 3}, {}],
}
SCHEMAS = {"nested": NESTED_IDS, "draft7": DRAFT7_PLAIN_NAME, "draft4": DRAFT4_ID}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_equals_jsonschema(name):
    schema = SCHEMAS[name]
    pattern = re.compile(json_schema_to_regex(schema, max_any_depth=0))
    oracle = validator(schema)
    seen = set()
    for value in VALUES[name]:
        text = json.dumps(value, separators=(",", ":"))
        is_valid = oracle.is_valid(value)
        assert bool(pattern.fullmatch(text)) == is_valid, (name, text)
        seen.add(is_valid)
    assert seen == {True, False}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_token_walks_on_both_routes(smollm2_vocab, smollm2_tokenizer, name):
    schema = SCHEMAS[name]
    oracle = validator(schema)
    grammars = [
        compile_json_schema(schema, smollm2_vocab),
        compile_json_schema_cfg(schema, smollm2_vocab),
    ]
    for value in VALUES[name]:
        text = json.dumps(value, separators=(",", ":"))
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        for grammar in grammars:
            matcher = grammar.matcher()
            complete = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
            assert complete == oracle.is_valid(value), (name, text, type(grammar).__name__)


def test_recursion_through_a_resource(smollm2_vocab):
    grammar = compile_json_schema(RECURSIVE, smollm2_vocab)
    oracle = validator(RECURSIVE)
    for value in (
        {"v": 1},
        {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]},
        {"v": 1, "kids": [{}]},
    ):
        matcher = grammar.matcher()
        text = json.dumps(value, separators=(",", ":")).encode()
        assert (matcher.accept_bytes(text) and matcher.is_accepting()) == oracle.is_valid(value)


def test_local_refs_are_left_alone_and_other_documents_refused(smollm2_vocab):
    plain = {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}}
    assert localize_refs(plain) is plain  # nothing to change: the very same object
    for schema in SCHEMAS.values():  # idempotent: nested bases are resolved and dropped
        once = localize_refs(schema)
        assert localize_refs(once) is once
    remote = {"$id": "https://example.com/a.json", "properties": {"b": {"$ref": "other.json"}}}
    with pytest.raises(SchemaError, match="non-local") as info:
        compile_json_schema(remote, smollm2_vocab)
    assert info.value.pointer == "/properties/b"


# documents whose keys and strings are drawn from what the base-URI walk reads (base keywords,
# $ref, data keywords it skips, schema containers), with refs of every shape it treats apart
_REF_VALUES = ["#", "#/a", "#/$defs/x", "#a", "#%2Fa", "", "a.json", "a.json#/b", "x#y", "?q"]
_KEYS = ["$id", "id", "$anchor", "$ref", "properties", "items", "enum", "const", "a", "$defs"]
_documents = st.recursive(
    st.sampled_from(_REF_VALUES) | st.integers(0, 3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_documents)
def test_the_scan_skips_only_documents_the_walk_leaves_unchanged(document):
    """``_may_localize`` False (the scan's early return) only where the full walk returns the
    document itself; compared against the walk with the scan turned off."""
    if not isinstance(document, dict):
        return
    try:
        full = refs._localize_all(document)
    except SchemaError:
        full = None  # a malformed base the walk refuses: the scan must not skip it either
    if not refs._may_localize(document):
        assert full is document


# draft-04 documents written by generators (Heroku's prmd): an ``id`` on each definition and
# pointers from the document's root inside it, which the definition's resource does not hold
ROOT_POINTERS_UNDER_ID = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "properties": {"lemon": {"$ref": "#/definitions/lemon"}},
    "required": ["lemon"],
    "definitions": {
        "lemon": {
            "id": "schema/lemon",
            "type": "object",
            "properties": {
                "ripe": {"$ref": "#/definitions/lemon/definitions/ripe"},
                "size": {"$ref": "#/definitions/lemon/definitions/size"},
            },
            "required": ["size"],
            "additionalProperties": False,
            "definitions": {"ripe": {"type": "boolean"}, "size": {"enum": ["s", "l"]}},
        }
    },
}


def test_root_pointers_under_an_id_are_read_from_the_root(smollm2_vocab, smollm2_tokenizer):
    with pytest.warns(UserWarning, match="read from the document's root") as record:
        grammar = compile_json_schema(ROOT_POINTERS_UNDER_ID, smollm2_vocab, cache=False)
    assert {str(w.message).split("'")[1] for w in record} == {
        "#/definitions/lemon/definitions/ripe", "#/definitions/lemon/definitions/size",
    }  # fmt: skip
    accepted = {'{"lemon":{"ripe":true,"size":"s"}}', '{"lemon":{"size":"l"}}'}
    rejected = {'{"lemon":{"ripe":1,"size":"s"}}', '{"lemon":{"size":"m"}}', '{"lemon":{}}'}
    for text in accepted | rejected:
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = grammar.matcher()
        complete = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert complete == (text in accepted), text
    # a pointer that names nothing from the root either is refused with its place
    broken = json.loads(json.dumps(ROOT_POINTERS_UNDER_ID))
    broken["definitions"]["lemon"]["properties"]["size"]["$ref"] = "#/definitions/nowhere"
    with pytest.warns(UserWarning), pytest.raises(SchemaError, match="does not resolve") as info:
        compile_json_schema(broken, smollm2_vocab, cache=False)
    assert info.value.pointer == "/definitions/lemon/properties/size"
