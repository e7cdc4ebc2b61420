"""JSON-Schema grammars that are not SLR(1) run on the forking LR parser, exactly.

An open object split into cases by ``dependencies`` (and a top-level ``anyOf`` of
``required`` sets: package.json's shape) has several rules after ``{`` whose optional first
members differ: the SLR(1) table has conflicts, and the parser forks into a forest of stacks
where it cannot tell the cases apart. Checked against jsonschema (token walks of valid
and invalid values) and against the Earley runtime's masks (every token of every walk).
"""

from __future__ import annotations

from formcast.grammar.cfg.lr import LRForest, LRTable
from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.schema_oracle import assert_walks_agree, heads_agreeing_with_earley

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",  # `dependencies` is draft-07's
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
        "description": {"type": "string"},
        "private": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "children": {"type": "array", "items": {"$ref": "#"}},  # forests in nested contexts
        "author": {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {"name": {"type": "string"}}},
            ]
        },
    },
    "dependencies": {"description": ["name"], "extra": {"required": ["tags"]}},
    "anyOf": [
        {"required": ["name", "version"]},
        {"required": ["private"], "properties": {"private": {"const": True}}},
    ],
}

VALUES = [
    {"name": "w", "version": "1.2"},
    {"name": "w", "version": "1.2", "description": "d", "private": False},
    {"private": True},
    {"private": True, "tags": ["a", "b"], "author": {"name": "x"}},
    {"name": "w", "version": "1.2", "private": True, "author": "x"},
    {"description": "d", "private": True, "name": "n"},
    # invalid: neither case, a dependency missing, a value out of its schema
    {"private": False},
    {"name": "w"},
    {"description": "d", "private": True},
    {"name": "too long a name", "version": "1.2"},
    {"private": True, "tags": ["c"]},
    {"version": "1.2", "private": True, "extra": 1},
    {"private": True, "tags": [], "extra": 1, "more": 2},
    {"private": True, "more": ["x", {"y": None}]},
    # forests (after "version", until "private" decides the case) at the end of an object,
    # at the top and nested: their masks differ below the stacks' common part
    {"version": "1.2", "private": True},
    {"private": True, "children": [{"version": "1.2", "private": True}]},
    {"private": True, "children": [[]]},
    {"private": True, "children": [{"version": "1.2", "private": True}, {"version": "1"}]},
    {
        "private": True,
        "children": [{"name": "c", "version": "0.1", "children": [{"private": True}]}],
    },
    {"private": True, "children": [{"private": True, "children": []}, {"private": True}]},
    {"private": True, "children": [{"name": "c"}]},
    {"name": "w", "version": "1.2", "children": [{"private": True, "children": [{"private": 0}]}]},
]


def test_the_grammar_has_conflicts_and_runs_on_the_forking_parser(smollm2_vocab):
    grammar = compile_json_schema(SCHEMA, smollm2_vocab, strict=False, cache=False, route="cfg")
    assert grammar.runtime.is_lr
    assert LRTable(grammar.prepared).build_all().has_conflicts  # not SLR(1)


def test_walks_agree_with_jsonschema(smollm2_vocab, smollm2_tokenizer):
    grammar = compile_json_schema(SCHEMA, smollm2_vocab, strict=False, cache=False, route="cfg")
    assert_walks_agree(grammar, SCHEMA, VALUES, smollm2_tokenizer)


def test_masks_equal_the_earley_masks_along_every_walk(smollm2_vocab, smollm2_tokenizer):
    grammar = compile_json_schema(SCHEMA, smollm2_vocab, strict=False, cache=False, route="cfg")
    walk = heads_agreeing_with_earley(grammar, SCHEMA, VALUES, smollm2_vocab, smollm2_tokenizer)
    num_forests = sum(any(isinstance(node, LRForest) for node, _ in heads) for heads in walk)
    assert num_forests  # the walks went through forests of stacks
