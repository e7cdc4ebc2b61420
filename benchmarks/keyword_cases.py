"""Schemas with the keywords stop 50 made exact (issue 24), as a corpus for bench_json_schema.

``uniqueItems`` over items of any value (alone, with ``contains``, in a recursive schema, in a
tuple), ``unevaluatedProperties`` beside ``oneOf`` / ``anyOf`` / ``if``, and ``if``/``then``
without ``else`` around a ``uniqueItems`` enum array (PEP 621's ``dynamic``); since stop 67
``not`` of closed key-tagged variants, ``not`` of a nested ``anyOf``, and a ``oneOf`` whose
branches are unions themselves. Instances are
hand-written, valid and invalid; every label is the oracle's
(``tests.grammar.schema_oracle.validator(schema).is_valid``). Writes
``benchmarks/data/keyword_cases.jsonl`` in the row format of the shared splits. Run by hand,
then measure with the peers:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/keyword_cases.py
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py --splits '' \\
        --corpus benchmarks/data/keyword_cases.jsonl --engines formcast,xgrammar,llguidance
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.grammar.schema_oracle import validator  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "keyword_cases.jsonl"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"

NODE = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "uniqueItems": True},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    },
}
CASES: list[tuple[str, dict, list[Any]]] = [
    (
        "unique_any",
        {"$schema": DRAFT2020, "type": "object",
         "properties": {"labels": {"type": "array", "uniqueItems": True}}},
        [{"labels": [1, True, "1", None, [1], {"a": 1}]}, {"labels": [1, 1.0]},
         {"labels": [{"a": 1, "b": [2]}, {"b": [2], "a": 1}]}, {"labels": []},
         {"labels": [[1, 2], [2, 1], "x", False, 0]}, {"labels": [None, None]}],
    ),
    (
        "unique_any_contains",
        {"$schema": DRAFT2020, "type": "array", "uniqueItems": True, "contains": {"const": "ok"}},
        [["ok", 1], ["ok", "ok"], [1, 2], [{"k": "ok"}, "ok", ["ok"]]],
    ),
    (
        "unique_any_recursive",
        {"$schema": DRAFT2020, "$defs": {"node": NODE}, "$ref": "#/$defs/node"},
        [{"tags": ["a", 1], "kids": [{"tags": [[1], [1, 1]]}]}, {"kids": [{"tags": [2, 2]}]},
         {"tags": [{"kids": [{"tags": [1, 1]}]}]}, {"tags": [{"x": 1}, {"x": 1.0}]}],
    ),
    (
        "unique_tuple",
        {"$schema": DRAFT2020, "type": "array",
         "prefixItems": [{"type": "string"}, {"type": "number"}],
         "items": {"type": "string"}, "uniqueItems": True},
        [["a", 1, "b"], ["a", 1, "a"], ["1", 1], ["a", 2.5, "2.5", "c"], ["a", "b"]],
    ),
    (
        "unevaluated_oneof",
        {"$schema": DRAFT2020, "type": "object", "properties": {"id": {"type": "integer"}},
         "oneOf": [{"properties": {"card": {"type": "string"}}, "required": ["card"]},
                   {"properties": {"iban": {"type": "string"}}, "required": ["iban"]}],
         "unevaluatedProperties": False},
        [{"id": 1, "card": "4111"}, {"id": 1, "iban": "DE00"}, {"id": 1, "card": "4", "iban": "D"},
         {"id": 1, "card": "4", "note": "x"}, {"id": 1}, {"id": 1, "card": "4", "iban": 3}],
    ),
    (
        "unevaluated_anyof",
        {"$schema": DRAFT2020, "type": "object",
         "anyOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                   {"properties": {"b": {"type": "integer"}}, "required": ["b"]}],
         "unevaluatedProperties": {"type": "boolean"}},
        [{"a": "x"}, {"a": "x", "b": 1}, {"a": "x", "c": True}, {"a": "x", "c": 1},
         {"b": 2, "a": 3}, {}],
    ),
    (
        "unevaluated_if",
        {"$schema": DRAFT2020, "type": "object", "properties": {"kind": {"enum": ["file", "url"]}},
         "required": ["kind"],
         "if": {"properties": {"kind": {"const": "file"}}},
         "then": {"properties": {"path": {"type": "string"}}, "required": ["path"]},
         "else": {"properties": {"url": {"type": "string", "format": "uri"}}},
         "unevaluatedProperties": False},
        [{"kind": "file", "path": "/a"}, {"kind": "url", "url": "https://x.org"},
         {"kind": "file", "url": "https://x.org", "path": "/a"}, {"kind": "url", "path": "/a"},
         {"kind": "file"}],
    ),
    (
        "if_then_unique_enum",
        {"$schema": DRAFT2020, "type": "object",
         "properties": {"name": {"type": "string"}, "version": {"type": "string"},
                        "dynamic": {"type": "array", "uniqueItems": True,
                                    "items": {"enum": ["version", "description", "readme",
                                                       "license", "authors", "scripts",
                                                       "classifiers", "keywords"]}}},
         "required": ["name"],
         "if": {"not": {"properties": {"dynamic": {"contains": {"const": "version"}}}}},
         "then": {"required": ["version"]}},
        [{"name": "p", "version": "1"}, {"name": "p"}, {"name": "p", "dynamic": ["version"]},
         {"name": "p", "dynamic": ["readme", "version", "readme"]},
         {"name": "p", "version": "1", "dynamic": ["readme", "license"]},
         {"name": "p", "dynamic": ["readme"]}],
    ),
    (
        "not_key_tagged_variants",
        {"type": "object",
         "not": {"anyOf": [
             {"type": "object", "properties": {"$date": {"type": "integer"}},
              "required": ["$date"], "additionalProperties": False},
             {"type": "object", "properties": {"$oid": {"type": "string", "maxLength": 24},
                                               "note": {"type": "string"}},
              "required": ["$oid"], "additionalProperties": False},
             {"type": "object", "properties": {"$num": {"type": "integer", "minimum": 0}},
              "required": ["$num"], "additionalProperties": False},
             {"type": "object", "properties": {"$ts": {"type": "object"}},
              "required": ["$ts"], "additionalProperties": False}]}},
        [{"note": "n", "$num": 1}, {"x": 1}, {"$date": "s"}, {"$num": -1}, {"$date": 1},
         {"$oid": "ab", "note": "n"}, {"$num": 3}, {"$ts": {}}],
    ),
    (
        "not_nested_any_of",
        {"$defs": {"ab": {"type": "object", "properties": {"a": {"type": "integer"},
                                                           "b": {"type": "integer"}},
                          "required": ["a", "b"]},
                   "cd": {"type": "object", "properties": {"c": {"type": "integer"},
                                                           "d": {"type": "integer"}},
                          "required": ["c", "d"]}},
         "not": {"anyOf": [{"anyOf": [{"$ref": "#/$defs/ab"}, {"$ref": "#/$defs/cd"}]},
                           {"$ref": "#/$defs/ab"}]}},
        [{"a": 1}, {"a": "s", "b": 1}, {"c": 1, "d": "x"}, {}, "x", {"a": 1, "b": 2},
         {"c": 1, "d": 2}, {"a": 1, "b": 2, "c": 3}],
    ),
    (
        "one_of_union_branches",
        {"oneOf": [
            {"oneOf": [{"type": "object", "properties": {"size": {"type": "integer"}},
                        "required": ["size"], "additionalProperties": False},
                       {"type": "string", "maxLength": 2}]},
            {"oneOf": [{"type": "object", "properties": {"$date": {"type": "integer"}},
                        "required": ["$date"], "additionalProperties": False},
                       {"type": "object", "patternProperties": {"^[a-z]{2,3}$": True},
                        "minProperties": 1, "additionalProperties": False}]}]},
        [{"size": 1}, "ab", {"$date": 1}, {"ab": 1}, {"size": 1, "ab": 1}, "abc",
         {"abcd": 1}, {}],
    ),
]  # fmt: skip


def main() -> None:
    with open(OUT, "w", encoding="utf-8") as out:
        for name, schema, values in CASES:
            oracle = validator(schema)
            tests = [
                {"description": f"instance {i}", "data": value, "valid": oracle.is_valid(value)}
                for i, value in enumerate(values)
            ]
            row = {"id": f"keywords---{name}", "split": "keywords", "name": name,
                   "schema": schema, "tests": tests, "meta": {}, "description": name}  # fmt: skip
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(CASES)} rows to {OUT}")


if __name__ == "__main__":
    main()
