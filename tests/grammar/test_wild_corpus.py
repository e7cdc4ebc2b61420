"""The committed wild corpus (benchmarks/data/wild_corpus.jsonl) is well formed and labelled.

Every schema is valid under its metaschema, every instance's ``valid`` label is the oracle's,
every instance's text is one a tokenizer round-trips, and each row is in the split row format
the JSON Schema benchmark reads. No tokenizer, no
compile: this guards the data, the benchmark measures the engines on it.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import jsonschema
import pytest
from jsonschema import validators

from tests.grammar.schema_oracle import validator

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "wild_corpus.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def _floats_with_exponent(value) -> list[float]:
    if isinstance(value, float):
        return [value] if "e" in repr(value) else []
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    )
    return [f for child in children for f in _floats_with_exponent(child)]


def test_corpus_shape():
    assert 60 <= len(ROWS) <= 100
    assert CORPUS.stat().st_size < 3_000_000
    ids = [row["id"] for row in ROWS]
    assert len(set(ids)) == len(ids)
    for row in ROWS:
        assert row["id"] == f"{row['split']}---{row['name']}"
        assert 1 <= len(row["tests"]) <= 8, row["id"]
        assert {"data", "valid"} <= set(row["tests"][0])
    # the corpus walks both kinds of instance, across many families
    assert len({row["split"] for row in ROWS}) >= 10
    num_valid = sum(t["valid"] for row in ROWS for t in row["tests"])
    num_invalid = sum(not t["valid"] for row in ROWS for t in row["tests"])
    assert num_valid >= len(ROWS) and num_invalid >= len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_schema_valid_under_metaschema_and_labels_are_the_oracles(row):
    schema = row["schema"]
    cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    oracle = validator(schema)
    for test in row["tests"]:
        assert oracle.is_valid(test["data"]) == test["valid"], (row["id"], test)
        # instance text a tokenizer gives back: NFC, no control/format/private/unassigned chars
        text = json.dumps(test["data"], ensure_ascii=False)
        assert unicodedata.is_normalized("NFC", text), (row["id"], text)
        odd = {"Cc", "Cf", "Co", "Cs", "Cn"}
        assert not [ch for ch in text if unicodedata.category(ch) in odd], (row["id"], text)
        # numbers in the layout every engine writes bounded numbers in: no exponent
        assert not _floats_with_exponent(test["data"]), (row["id"], text)
