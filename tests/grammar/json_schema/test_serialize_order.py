"""``serialize`` writes object members in the order the grammar lays them out.

The benchmarks and the exactness tests write each valid instance with ``values.serialize`` and
walk it through the compiled grammar; where the two disagree on member order a valid
instance is rejected. Shapes found on the shared splits (a scan of all 7,093 schemas): a name
required by one ``allOf`` part and declared by another, the branches of a union merged after
the ``allOf`` parts, and a union whose branches are told apart by a ``const``/``enum`` member.
Each instance is valid (jsonschema) and must be accepted as ``serialize`` writes it, on both
routes.
"""

from __future__ import annotations

import json

import pytest

from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

REQUIRED_IN_ONE_PART_DECLARED_IN_ANOTHER = {
    "type": "array",
    "items": {
        "allOf": [
            {"type": "object", "required": ["name", "type"], "properties": {"name": {"type": "string"}}},
            {
                "properties": {"user": {"type": "string"}},
                "oneOf": [
                    {"properties": {"type": {"enum": ["file"]}, "size": {"type": "integer"}}},
                    {"properties": {"type": {"enum": ["dir"]}, "files": {"type": "integer"}}},
                ],
            },
        ]
    },
}  # fmt: skip
UNION_INSIDE_AN_ALLOF_PART = {
    "allOf": [
        {"type": "object", "properties": {"match": {"type": "string"}}, "required": ["match"]},
        {"anyOf": [{"properties": {"devices": {"type": "object"}}}, {"properties": {"device": {"type": "string"}}}]},
        {"properties": {"platforms": {"type": "array", "items": {"type": "string"}}, "engine": {"type": "string"}}},
    ]
}  # fmt: skip
DISCRIMINATED_BRANCHES = {
    "type": "object",
    "properties": {
        "failure": {
            "type": "object",
            "oneOf": [
                {"properties": {"type": {"enum": ["NotTSV"]}}, "required": ["type"]},
                {"properties": {"count": {"type": "integer"}, "type": {"const": "Mismatch"}}, "required": ["type", "count"]},
                {"properties": {"errors": {"type": "array"}, "type": {"enum": ["Decoding"]}}, "required": ["type", "errors"]},
            ],
        }
    },
    "required": ["failure"],
}  # fmt: skip
# names only a negated schema declares: the complement lays them out after the schema's own
# members and before any other key (a not in an allOf part and under a $ref too; several nots
# are one anyOf, laid out branch by branch)
NEGATED_NAMES = {
    "type": "object",
    "properties": {"kind": {"type": "string"}},
    "additionalProperties": {"type": "string"},
    "not": {"properties": {"v": {"const": "x"}}, "required": ["v"]},
}
NEGATED_IN_PARTS = {
    "type": "object",
    "$defs": {"vx": {"properties": {"v": {"const": "x"}}, "required": ["v"]}},
    "allOf": [{"not": {"$ref": "#/$defs/vx"}}, {"properties": {"kind": {"type": "string"}}}],
    "not": {"properties": {"w": {"const": 1}}, "required": ["w"]},
}
CASES = [
    (NEGATED_NAMES, {"kind": "a", "z": "q", "v": "y"}),
    (NEGATED_NAMES, {"z": "q", "v": "y"}),
    (NEGATED_IN_PARTS, {"z": 1, "v": "y", "kind": "k", "w": 2}),
    (NEGATED_IN_PARTS, {"z": 1, "w": 2, "v": "xy"}),

    (REQUIRED_IN_ONE_PART_DECLARED_IN_ANOTHER, [{"size": 1, "user": "u", "type": "file", "name": "a"}, {"type": "dir", "name": "b", "files": 2}]),
    (UNION_INSIDE_AN_ALLOF_PART, {"platforms": ["x"], "devices": {"d": True}, "match": "m"}),
    (UNION_INSIDE_AN_ALLOF_PART, {"engine": "e", "device": "d", "match": "m"}),
    (DISCRIMINATED_BRANCHES, {"failure": {"type": "Decoding", "errors": []}}),
    (DISCRIMINATED_BRANCHES, {"failure": {"count": 3, "type": "Mismatch"}}),
    # several branches fit by keys and by discriminators: each branch's own order, in turn
    ({"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}, {"b": "s", "a": 1}),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "value"), CASES)
def test_serialized_valid_instances_are_accepted(smollm2_vocab, schema, value):
    assert validator(schema).is_valid(value)
    text = serialize(value, schema, schema)
    assert json.loads(text) == value
    for grammar in (
        compile_json_schema(schema, smollm2_vocab, strict=False, cache=False),
        compile_json_schema_cfg(schema, smollm2_vocab, strict=False),
    ):
        matcher = grammar.matcher()
        assert matcher.accept_bytes(text.encode()) and matcher.is_accepting(), (
            text,
            type(grammar).__name__,
        )
