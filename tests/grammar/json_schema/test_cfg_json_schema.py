"""Recursive JSON Schemas through the CFG path: trees, linked lists, nested lists, JSON itself."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from formcast.errors import GrammarError, SchemaError
from formcast.grammar.json_schema.structural import compile_json_schema_cfg

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value", "children"],
        }
    },
    "$ref": "#/$defs/node",
}
LINKED_LIST = {
    "type": "object",
    "properties": {
        "head": {"type": "string", "maxLength": 5},
        "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
    },
    "required": ["head", "next"],
}
NESTED_LIST = {
    "$defs": {
        "item": {
            "anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/item"}}]
        }
    },
    "type": "array",
    "items": {"$ref": "#/$defs/item"},
    "minItems": 1,
}
SCHEMAS = {"tree": TREE, "linked_list": LINKED_LIST, "nested_list": NESTED_LIST}


def deep_tree(depth: int) -> dict:
    node = {"value": depth, "children": []}
    for k in range(depth):
        node = {"value": k, "children": [node, {"value": -k, "children": []}]}
    return node


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_random_walks_validate(name, smollm2_vocab):
    schema = SCHEMAS[name]
    grammar = compile_json_schema_cfg(schema, smollm2_vocab)
    rng = random.Random(1)
    num_finished = 0
    for _ in range(5):
        matcher, text = grammar.matcher(), b""
        for step in range(150):
            allowed = matcher.allowed_token_ids().tolist()
            assert allowed
            if 2 in allowed and (step > 10 or rng.random() < 0.3):
                break
            short = [t for t in allowed if len(smollm2_vocab.token_bytes[t]) == 1]
            token_id = rng.choice(short if short and rng.random() < 0.8 else allowed)
            if token_id == 2:
                break
            assert matcher.accept_token(token_id)
            text += smollm2_vocab.token_bytes[token_id]
        if matcher.accept_token(2):
            num_finished += 1
            jsonschema.validate(json.loads(text), schema)
    assert num_finished >= 2


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("tree", deep_tree(12), True),
        ("tree", {"value": 1, "children": [{"value": 2}]}, False),
        (
            "linked_list",
            {"head": "a", "next": {"head": "bb", "next": {"head": "c", "next": None}}},
            True,
        ),
        ("linked_list", {"head": "toolong", "next": None}, False),
        ("nested_list", [1, [2, [3, [4, [5, [6, [7, [8, [9, []]]]]]]]]], True),
        ("nested_list", [], False),
        ("nested_list", [1, ["x"]], False),
    ],
)
def test_instances_accepted_iff_valid(name, value, valid, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[name]
    assert jsonschema.Draft202012Validator(schema).is_valid(value) == valid
    grammar = compile_json_schema_cfg(schema, smollm2_vocab)
    text = json.dumps(value, separators=(",", ":"))
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    matcher = grammar.matcher()
    got = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
    assert got == valid


def test_recursive_ref_with_sibling_assertions_under_indent_is_refused(smollm2_vocab):
    # (compact layouts merge them: test_recursive_merges)
    schema = {"type": "object", "properties": {"x": {"$ref": "#", "minProperties": 1}}}
    with pytest.raises(SchemaError, match="indent"):
        compile_json_schema_cfg(schema, smollm2_vocab, indent=2)


def test_compile_json_schema_routes_recursive_schemas_to_the_cfg_path(smollm2_vocab):
    from formcast.grammar.cfg.compiled import CompiledCFG
    from formcast.grammar.index.compiled_grammar import CompiledGrammar
    from formcast.grammar.json_schema.compile import compile_json_schema

    recursive = compile_json_schema(TREE, smollm2_vocab)
    assert isinstance(recursive, CompiledCFG)
    matcher = recursive.matcher()
    assert matcher.accept_bytes(json.dumps(deep_tree(20), separators=(",", ":")).encode())
    assert matcher.is_accepting()
    flat = compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "integer"}}}, smollm2_vocab
    )
    assert isinstance(flat, CompiledGrammar)


def _chain(num_nodes: int) -> dict:
    """A TREE instance ``num_nodes`` nodes deep (each node has one child but the last)."""
    node = {"value": 0, "children": []}
    for k in range(num_nodes - 1):
        node = {"value": k + 1, "children": [node]}
    return node


@pytest.mark.parametrize("name", ["tree", "linked_list"])
def test_max_depth_bounds_recursive_schemas(name, smollm2_vocab, smollm2_tokenizer):
    def instance(num_levels: int):
        if name == "tree":
            return _chain(num_levels)
        value = None
        for k in range(num_levels):
            value = {"head": f"h{k}", "next": value}
        return value

    schema = SCHEMAS[name]
    bounded = compile_json_schema_cfg(schema, smollm2_vocab, max_depth=3)
    assert bounded.max_depth == 3
    assert compile_json_schema_cfg(schema, smollm2_vocab).max_depth is None
    for levels in (1, 2, 3):  # within the bound: accepted token by token, valid per jsonschema
        text = json.dumps(instance(levels), separators=(",", ":"))
        jsonschema.validate(json.loads(text), schema)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = bounded.matcher()
        assert matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
    # one level past the bound: valid JSON for the schema, refused with depth and offset
    text = json.dumps(instance(4), separators=(",", ":"))
    jsonschema.validate(json.loads(text), schema)
    matcher = bounded.matcher()
    with pytest.raises(GrammarError) as info:
        for byte in text.encode():
            assert matcher.accept_bytes(bytes([byte]))
    position = info.value.position
    message = str(info.value)
    assert "nesting depth 4" in message and "max_depth=3" in message
    assert f"output byte {position}" in message
    # the offset is the byte that opens the fourth level: past the fourth object's '{' ...
    fourth_open = [k for k, ch in enumerate(text) if ch == "{"][3]
    assert fourth_open <= position < len(text)
    assert matcher.num_accepted == position  # ... every earlier byte was accepted, none after
    # the unbounded grammar accepts it, and a bound one deeper does too
    for grammar in (
        compile_json_schema_cfg(schema, smollm2_vocab),
        compile_json_schema_cfg(schema, smollm2_vocab, max_depth=4),
    ):
        matcher = grammar.matcher()
        assert matcher.accept_bytes(text.encode()) and matcher.is_accepting()


def test_max_depth_is_validated(smollm2_vocab):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(GrammarError, match="max_depth"):
            compile_json_schema_cfg(TREE, smollm2_vocab, max_depth=bad)


def test_compile_json_schema_forwards_max_depth(smollm2_vocab, smollm2_tokenizer):
    from formcast.grammar import compile_json_schema

    bounded = compile_json_schema(TREE, smollm2_vocab, max_depth=3)
    assert bounded.max_depth == 3
    text = json.dumps(_chain(3), separators=(",", ":"))
    matcher = bounded.matcher()
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
    deeper = json.dumps(_chain(4), separators=(",", ":")).encode()
    matcher = bounded.matcher()
    with pytest.raises(GrammarError, match="max_depth=3"):
        for byte in deeper:
            matcher.accept_bytes(bytes([byte]))
    # a bound on a non-recursive schema: the structural path, which enforces it
    flat = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert compile_json_schema(flat, smollm2_vocab, max_depth=1).max_depth == 1
    with pytest.raises(SchemaError, match="max_depth"):
        compile_json_schema(flat, smollm2_vocab, route="regex", max_depth=1)
