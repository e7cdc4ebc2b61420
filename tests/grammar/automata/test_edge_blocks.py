"""A copied DFA's byte edges are held as arrays (``ByteNFA.edge_blocks``), exactly.

The NFA builder copies a DFA (a counted chain of JSON string characters, a lookahead's
intersection) into the NFA as an edge block instead of one Python tuple per edge. Oracle: the
same NFA with every block written out as per-state edge lists must determinise to the same
table, and the language must be that of ``re.fullmatch`` on the tree's own Python regex.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.regex.combinators import alt, literal, repeat, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Node, to_python_regex


def _written_out(nfa: ByteNFA) -> ByteNFA:
    """``nfa`` with each edge block's edges as per-state ``(lo, hi, target)`` lists."""
    byte_edges = [list(edges) for edges in nfa.byte_edges]
    for first, counts, edges in nfa.edge_blocks:
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        for k in range(len(counts)):
            rows = edges[bounds[k] : bounds[k + 1]].tolist()
            byte_edges[first + k] = [(lo, hi, target) for lo, hi, target in rows]
    return ByteNFA(
        byte_edges=byte_edges,
        epsilon_edges=nfa.epsilon_edges,
        positions=nfa.positions,
        start=nfa.start,
        final=nfa.final,
    )


def _string(lo: int, hi: int) -> Node:
    return seq(literal('"'), repeat(JSON_CHAR, lo, hi), literal('"'))


@given(
    bounds=st.lists(
        st.tuples(st.integers(0, 6), st.integers(4, 12)).map(lambda b: (min(b), max(b))),
        min_size=1,
        max_size=3,
    ),
    is_alternation=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_edge_blocks_determinise_like_edge_lists(bounds, is_alternation):
    strings = [_string(lo, hi) for lo, hi in bounds]
    tree = alt(strings) if is_alternation else seq(*[seq(s, literal(",")) for s in strings])
    nfa = build_nfa(tree, CompileBudget())
    assert nfa.edge_blocks  # the chains are copied DFAs
    assert all(not nfa.byte_edges[first] for first, _, _ in nfa.edge_blocks)
    dfa = determinize(nfa, CompileBudget())
    again = determinize(_written_out(nfa), CompileBudget())
    assert np.array_equal(dfa.transitions, again.transitions)
    assert np.array_equal(dfa.byte_to_class, again.byte_to_class)
    assert np.array_equal(dfa.is_accepting, again.is_accepting)


@pytest.mark.parametrize(
    "pattern, samples",
    [
        ('"[a-c]{0,5}"x', ['""x', '"abc"x', '"aaaaa"x', '"aaaaaa"x', '"ab"', '"d"x']),
        (
            "(?=[a-z]{2,4},)[a-z]+,|[0-9]{4,6}",
            ["ab,", "abcd,", "abcde,", "a,", "ab", "1234", "123", "1234567"],
        ),
        ('(?:"[é-ü]{4,8}",)+', ['"éééé",', '"éééé","üüüüü",', '"ééé",', '"éééé"']),
    ],
)
def test_languages_with_edge_blocks_match_fullmatch(pattern, samples):
    tree = parse_regex(pattern, "python")
    nfa = build_nfa(tree, CompileBudget())
    dfa = determinize(nfa, CompileBudget())
    regex = re.compile(to_python_regex(tree))
    for text in samples:
        state = dfa.start_state
        for byte in text.encode():
            state = dfa.step(state, byte) if state >= 0 else state
        is_accepted = state >= 0 and bool(dfa.is_accepting[state])
        assert is_accepted == bool(regex.fullmatch(text)), text
