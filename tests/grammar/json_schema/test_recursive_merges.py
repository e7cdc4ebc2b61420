"""Recursive merges on the structural route: an ``allOf`` (or a ``$ref`` with sibling
assertions) over a ``$ref`` that is being compiled is one nonterminal named by the merge's
content, so meeting the merge again inside it is a reference (``structural._shared_merge``).

Each schema is checked against jsonschema on generated values (written in formcast's member
order, walked token by token with SmolLM2's tokenizer): a value is accepted iff valid, and at
every step the token taken is in the mask iff the matcher accepts it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator, walk_checked


def tree(kids_items: dict, **extra) -> dict:
    """An object with an integer ``v`` and an array ``kids`` of ``kids_items``, closed."""
    properties = {"v": {"type": "integer"}, "kids": {"type": "array", "items": kids_items}}
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}


NODE_MERGED = {  # each child is a Node and a Small at once (allOf over the recursive $ref)
    "$ref": "#/definitions/Node",
    "definitions": {
        "Node": tree(
            {"allOf": [{"$ref": "#/definitions/Node"}, {"$ref": "#/definitions/Small"}]},
            required=["v"],
        ),
        "Small": {"properties": {"v": {"maximum": 5}, "kids": {"maxItems": 2}}},
    },
}
SIBLINGS = tree({"$ref": "#", "required": ["v"]})  # 2020-12: assertions beside it apply
SIBLINGS["properties"]["v"]["minimum"] = 0
NESTED_ALL_OF = {  # the recursive $ref one allOf level down, next to a plain part
    "definitions": {
        "T": tree({"allOf": [{"allOf": [{"$ref": "#/definitions/T"}]}, {"minProperties": 1}]})
    },
    "$ref": "#/definitions/T",
}
ONE_OF_RECURSIVE = {  # branches told apart by type, one of them recursive
    "definitions": {
        "E": {
            "type": "object",
            "properties": {
                "op": {"enum": ["and", "or"]},
                "args": {
                    "type": "array",
                    "items": {"oneOf": [{"$ref": "#/definitions/E"}, {"type": "integer"}]},
                },
            },
            "required": ["op"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/definitions/E",
}
SCHEMAS = {
    "node_merged": NODE_MERGED,
    "siblings": SIBLINGS,
    "nested_all_of": NESTED_ALL_OF,
    "one_of_recursive": ONE_OF_RECURSIVE,
}

KEYS = st.sampled_from(["v", "kids", "op", "args"])
LEAVES = st.one_of(
    st.integers(-2, 8), st.sampled_from(["and", "or", "x"]), st.none(), st.booleans()
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    return {
        name: compile_json_schema(schema, smollm2_vocab, cache=False)
        for name, schema in SCHEMAS.items()
    }


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_regex_route_refuses_and_structural_route_compiles(name, grammars):
    with pytest.raises(SchemaError, match="recursive"):
        json_schema_to_regex(SCHEMAS[name])
    assert isinstance(grammars[name], CompiledCFG)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=VALUES)
def test_generated_values_accepted_iff_valid(name, value, grammars, smollm2_tokenizer):
    schema = SCHEMAS[name]
    text = serialize(value, schema, schema)
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert walk_checked(grammars[name], ids) == validator(schema).is_valid(json.loads(text)), text


VALID = {
    "node_merged": [
        {"v": 9},
        {"v": 9, "kids": [{"v": 5}, {"v": -1, "kids": [{"v": 0, "kids": []}]}]},
    ],
    "siblings": [{}, {"v": 0, "kids": [{"v": 1, "kids": [{"v": 2}]}]}],
    "nested_all_of": [{}, {"kids": [{"v": 1, "kids": [{"kids": []}]}]}],
    "one_of_recursive": [{"op": "and", "args": [1, {"op": "or", "args": [{"op": "and"}, 2]}]}],
}
INVALID = {
    "node_merged": [
        {"v": 1, "kids": [{"v": 6}]},  # a child over Small's maximum
        {"v": 1, "kids": [{"v": 1, "kids": [{"v": 1}, {"v": 1}, {"v": 1}]}]},  # 3 grandchildren
        {"v": 1, "kids": [{}]},  # a child without v
    ],
    "siblings": [
        {"kids": [{}]},
        {"kids": [{"v": 1, "kids": [{"v": -1}]}]},
        {"kids": [{"v": 1, "kids": [{"v": 2, "kids": [{}]}]}]},  # a great-grandchild without v
    ],
    "nested_all_of": [{"kids": [{}]}, {"kids": [{"kids": [{}]}]}],
    "one_of_recursive": [{"op": "and", "args": [{"op": "xor"}]}, {"args": []}],
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_deep_values_on_both_sides(name, grammars, smollm2_tokenizer):
    schema = SCHEMAS[name]
    oracle = validator(schema)
    for value, expected in [(v, True) for v in VALID[name]] + [(v, False) for v in INVALID[name]]:
        assert oracle.is_valid(value) == expected, value
        text = serialize(value, schema, schema)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert walk_checked(grammars[name], ids) == expected, text
