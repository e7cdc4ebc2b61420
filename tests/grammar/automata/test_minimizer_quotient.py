"""``minimize``'s quotient (one kernel pass: the blocks' rows and their BFS numbering) against
the definition: Moore's partition refinement for the state count, ``same_language`` with the
input, and ``trim`` (which numbers states breadth first and drops none of a trimmed DFA) as
the identity on the result: it is trimmed and numbered as trim numbers states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize, same_language, trim
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import strip_anchors


def _moore_num_blocks(table: np.ndarray, is_accepting: np.ndarray) -> int:
    """The number of Myhill-Nerode classes of a trimmed partial DFA (refinement to a fixpoint)."""
    block = is_accepting.astype(np.int64)
    while True:
        moves = np.where(table >= 0, block[np.maximum(table, 0)], -1)
        _, refined = np.unique(np.column_stack([block, moves]), axis=0, return_inverse=True)
        refined = refined.reshape(-1)
        if len(np.unique(refined)) == len(np.unique(block)):
            return len(np.unique(refined))
        block = refined


_atoms = st.sampled_from(["a", "b", "c", "ab", "ba", "[ab]", "[a-c]", "(?:a|b)", "(?:ab|b)"])


@st.composite
def _patterns(draw, depth: int = 0) -> str:
    if depth >= 3 or draw(st.booleans()):
        return draw(_atoms)
    kind = draw(st.sampled_from(["seq", "alt", "star", "count", "opt"]))
    left = draw(_patterns(depth + 1))
    if kind == "star":
        return f"(?:{left})*"
    if kind == "opt":
        return f"(?:{left})?"
    if kind == "count":
        lo = draw(st.integers(0, 2))
        return f"(?:{left}){{{lo},{lo + draw(st.integers(0, 2))}}}"
    right = draw(_patterns(depth + 1))
    return f"{left}{right}" if kind == "seq" else f"(?:{left}|{right})"


@settings(max_examples=300, deadline=None)
@given(_patterns())
def test_quotient_is_the_minimal_dfa_numbered_breadth_first(pattern):
    budget = CompileBudget()
    raw = determinize(build_nfa(strip_anchors(parse_regex(pattern)), budget), budget)
    minimal = minimize(raw, budget)
    assert minimal.num_states == _moore_num_blocks(raw.transitions, raw.is_accepting)
    assert same_language(minimal, raw)
    renumbered = trim(minimal.transitions, minimal.byte_to_class, minimal.is_accepting)
    assert np.array_equal(renumbered.transitions, minimal.transitions)
    assert np.array_equal(renumbered.is_accepting, minimal.is_accepting)
    assert minimal.transitions.dtype == np.int32 and minimal.is_accepting.dtype == np.bool_


@pytest.mark.parametrize(
    "pattern,num_raw,num_minimal",
    [
        ("(?:ba|(?:a|b)*)", 3, 1),
        ("(?:(?:a|b)[ab]|(?:ab|b|[a-c]))?", 4, 3),
        ("(?:a|[a-c]{2}){2,3}", 14, 13),
    ],
)
def test_quotient_of_dfas_with_equivalent_states(pattern, num_raw, num_minimal):
    budget = CompileBudget()
    raw = determinize(build_nfa(strip_anchors(parse_regex(pattern)), budget), budget)
    minimal = minimize(raw, budget)
    assert (raw.num_states, minimal.num_states) == (num_raw, num_minimal)
    assert same_language(minimal, raw)
    renumbered = trim(minimal.transitions, minimal.byte_to_class, minimal.is_accepting)
    assert np.array_equal(renumbered.transitions, minimal.transitions)
