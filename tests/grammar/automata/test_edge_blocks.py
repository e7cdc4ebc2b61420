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

from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize, same_language
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.regex.combinators import alt, literal, repeat, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Automaton, Node, to_python_regex


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


def _automaton(pattern: str) -> Automaton:
    dfa = regex_to_dfa(pattern)
    return Automaton.of(dfa.transitions, dfa.byte_to_class, dfa.is_accepting, pattern)


@given(
    bounds=st.lists(
        st.tuples(st.integers(0, 5), st.integers(4, 9)).map(lambda b: (min(b), max(b))),
        min_size=1,
        max_size=3,
    ),
    num_uses=st.integers(2, 4),
    is_alternation=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_blocks_prepared_once_are_placed_like_fresh_ones(bounds, num_uses, is_alternation):
    # the same chains and automaton, named several times after different continuations: each
    # copy's edges are the prepared block shifted to its own place (memo cold, then warm)
    def tree_with(part: Node) -> Node:
        # (two chains of one item and one lower bound always among them)
        pairs = [(1, 4), *bounds, (1, 6)]
        parts = [seq(_string(lo, hi), literal(","), part) for lo, hi in pairs]
        uses = [seq(*parts, literal(str(k))) for k in range(num_uses)]
        return alt(uses) if is_alternation else seq(*[seq(u, literal(";")) for u in uses])

    tree = tree_with(_automaton("(?:ab|c)+d?"))
    caches.clear("automata.edge_blocks")
    cold = minimize(determinize(build_nfa(tree, CompileBudget()), CompileBudget()), CompileBudget())
    warm = minimize(determinize(build_nfa(tree, CompileBudget()), CompileBudget()), CompileBudget())
    # oracle: NFA copies of every repetition and the automaton's regex itself: no blocks
    plain_tree = tree_with(parse_regex("(?:ab|c)+d?", "python"))
    plain_nfa = build_nfa(plain_tree, CompileBudget(), chain_min_copies=1 << 30)
    assert not plain_nfa.edge_blocks
    plain = minimize(determinize(plain_nfa, CompileBudget()), CompileBudget())
    assert same_language(cold, plain)
    assert same_language(warm, plain)
