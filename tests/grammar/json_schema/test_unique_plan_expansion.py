"""The places a shared nonterminal is used at, memoised where the walk up met no cycle.

``UniqueItemsPlan`` expands each path recorded inside a shared nonterminal (a ``$ref``
target) into the paths the nonterminal is used at, walking the use graph upwards. A
nonterminal whose walk met no cycle is expanded once and its paths reused in every context
(a DAG of ``$ref``s is then walked once per nonterminal instead of once per use chain).
Oracle: the same plan without that memo, on generated ``$defs`` graphs (DAGs and cycles)
small enough for both to stay within the expansion budget: the same guarded patterns, or
the same refusal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import FormcastError
from formcast.grammar.json_schema import unique_plan
from formcast.grammar.json_schema.compile import compile_json_schema

UNIQUE = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
PLAIN = {"type": "array", "items": {"type": "string"}}
BOUNDED = {"type": "string", "maxLength": 300}  # past the counter: the matcher counts it
LEAVES = [UNIQUE, PLAIN, BOUNDED, {"type": "integer"}]


@st.composite
def def_graphs(draw) -> dict:
    """``$defs`` d0..dn-1: objects whose members refer to any def (cycles too) or are leaves."""
    num_defs = draw(st.integers(2, 5))
    defs = {}
    for i in range(num_defs):
        members = {}
        for k in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                members[f"m{k}"] = {"$ref": f"#/$defs/d{draw(st.integers(0, num_defs - 1))}"}
            else:
                members[f"m{k}"] = draw(st.sampled_from(LEAVES))
        defs[f"d{i}"] = {"type": "object", "properties": members, "additionalProperties": False}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def _outcome(schema, vocab, route: str):
    """The guarded patterns of every plan checked while compiling, or the refusal."""
    plans = []
    check = unique_plan.UniqueItemsPlan.check

    def recording(self, lenient: bool = False) -> None:
        plans.append(self)
        check(self, lenient)

    unique_plan.UniqueItemsPlan.check = recording
    try:
        compile_json_schema(schema, vocab, cache=False, route=route)
    except FormcastError as exc:
        return type(exc).__name__, str(exc)
    finally:
        unique_plan.UniqueItemsPlan.check = check
    return [
        (sorted(map(repr, p.patterns())), sorted(map(repr, p.text_patterns())))
        for p in plans
        if p.is_filled
    ]


class _Forgetful(dict):
    """A memo that keeps nothing."""

    def __setitem__(self, key, value) -> None:
        return None


@pytest.mark.parametrize("route", ["auto", "cfg"])
@given(schema=def_graphs())
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_memoised_expansion_equals_the_walk_per_use_chain(
    smollm2_vocab, monkeypatch, route, schema
):
    memoised = _outcome(schema, smollm2_vocab, route)
    init = unique_plan.UniqueItemsPlan.__init__

    def forgetful_init(self) -> None:
        init(self)
        self._acyclic_memo = _Forgetful()

    with monkeypatch.context() as patch:
        patch.setattr(unique_plan.UniqueItemsPlan, "__init__", forgetful_init)
        walked = _outcome(schema, smollm2_vocab, route)
    assert memoised == walked


def test_a_dag_of_references_expands_once_per_nonterminal():
    # 12 levels, each def used twice by the one above: 4,096 use chains to the bottom, walked
    # once per def with the memo (the budget of MAX_EXPANSION_STEPS calls is never reached)
    plan = unique_plan.UniqueItemsPlan()
    sites = {
        f"d{i + 1}": {(unique_plan.RefSite(f"d{i}"), k) for k in ("a", "b")} for i in range(12)
    }
    sites["d0"] = {("root",)}
    plan._sites = sites
    expanded = plan._expanded((unique_plan.RefSite("d12"), "tags"))
    assert plan._num_steps == 2 * 12 + 1  # each def walked once, its second use a memo hit
    assert set(plan._acyclic_memo) == {f"d{i}" for i in range(13)}
    # d7 passes MAX_EXPANDED_PATHS (128 chains): "**", then two members per level below it
    assert len(expanded) == 2**5
    assert all(path[0] == unique_plan.ANY_PATH and path[-1] == "tags" for path in expanded)
