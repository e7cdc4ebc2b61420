"""The compile budget covers the whole compilation: the structural JSON-schema path (many
automata, LR tables, parsing of the schema's grammar) stops at ``timeout_s`` with a
CompileBudgetError, like the regex path's automaton."""

from __future__ import annotations

import time

import pytest

from formcast.errors import CompileBudgetError, FormcastError
from formcast.grammar.automata.budget import CompileBudget, check_deadline, compile_deadline
from formcast.grammar.json_schema.compile import compile_json_schema

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "size": {"type": "integer", "minimum": 0},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/node",
}


def test_deadline_is_checked_inside_and_ignored_outside():
    check_deadline("outside any deadline")  # no deadline: nothing to check
    with compile_deadline(1e-6):
        time.sleep(0.001)
        with pytest.raises(CompileBudgetError, match="timeout_s=1e-06"):
            check_deadline("a loop")
        with pytest.raises(CompileBudgetError):
            CompileBudget(timeout_s=60.0).check_time("determinising", 3)
    check_deadline("after the block")


def test_nested_deadlines_keep_the_earliest():
    with compile_deadline(1e-6):
        with compile_deadline(60.0):
            time.sleep(0.001)
            with pytest.raises(CompileBudgetError, match="timeout_s=1e-06"):
                check_deadline("inner")
    with compile_deadline(60.0), compile_deadline(1e-6):
        time.sleep(0.001)
        with pytest.raises(CompileBudgetError, match="timeout_s=1e-06"):
            check_deadline("inner")


@pytest.mark.parametrize("timeout_s", [0.0, -1.0])
def test_deadline_must_be_positive(timeout_s):
    with pytest.raises(CompileBudgetError, match="timeout_s must be > 0"):
        with compile_deadline(timeout_s):
            pass


def test_structural_path_stops_at_the_budget(smollm2_vocab):
    with pytest.raises(CompileBudgetError) as info:
        compile_json_schema(TREE, smollm2_vocab, route="cfg", timeout_s=1e-6, cache=False)
    assert isinstance(info.value, FormcastError) and isinstance(info.value, ValueError)
    assert "timeout_s=1e-06" in str(info.value)
    grammar = compile_json_schema(TREE, smollm2_vocab, route="cfg", timeout_s=60.0, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'{"name":"a","children":[{"name":"b"}]}')
    assert matcher.is_accepting()
