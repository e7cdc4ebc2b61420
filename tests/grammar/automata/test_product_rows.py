"""The product kernel and the character-DFA minimiser against plain-Python references.

``kernels.product_rows`` explores the tuples of states that complete DFAs reach together, in
breadth-first order of discovery; ``char_dfa.minimize`` (Hopcroft's kernel) must give the
same number of states as Moore's refinement written out here, and the same language.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata import kernels
from formcast.grammar.json_schema.char_dfa import CharDFA, minimize


@st.composite
def _dfas(draw, num_classes: int) -> CharDFA:
    num_states = draw(st.integers(1, 6))
    cells = st.integers(0, num_states - 1)
    table = np.array(
        draw(
            st.lists(
                st.lists(cells, min_size=num_classes, max_size=num_classes),
                min_size=num_states,
                max_size=num_states,
            )
        ),
        dtype=np.int32,
    )
    accepting = np.array(
        draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)), dtype=bool
    )
    return CharDFA(table, accepting)


def _reference_product(dfas: list[CharDFA]) -> tuple[list[list[int]], list[tuple[int, ...]]]:
    start = (0,) * len(dfas)
    ids, tuples, rows = {start: 0}, [start], []
    k = 0
    while k < len(tuples):
        row = []
        for c in range(dfas[0].table.shape[1]):
            nxt = tuple(int(d.table[s, c]) for d, s in zip(dfas, tuples[k], strict=True))
            if nxt not in ids:
                ids[nxt] = len(tuples)
                tuples.append(nxt)
            row.append(ids[nxt])
        rows.append(row)
        k += 1
    return rows, tuples


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda c: st.lists(_dfas(c), min_size=1, max_size=3)))
def test_product_rows_matches_a_breadth_first_reference(dfas: list[CharDFA]):
    tables = np.ascontiguousarray(np.concatenate([d.table for d in dfas]), dtype=np.int32)
    offsets = np.cumsum([0] + [len(d.table) for d in dfas]).astype(np.int64)
    status, rows, tuples = kernels.product_rows(tables, offsets, 10_000)
    want_rows, want_tuples = _reference_product(dfas)
    assert status == 0
    assert rows.tolist() == want_rows
    assert [tuple(t) for t in tuples.tolist()] == want_tuples
    if len(want_tuples) > 1:  # one state short: refused
        status, _, _ = kernels.product_rows(tables, offsets, len(want_tuples) - 1)
        assert status == 1


def _moore_classes(dfa: CharDFA) -> int:
    """Number of Myhill-Nerode classes among the states reachable from 0."""
    reach, frontier = {0}, [0]
    while frontier:
        frontier = [int(t) for s in frontier for t in dfa.table[s] if int(t) not in reach]
        reach.update(frontier)
    states = sorted(reach)
    block = {s: int(dfa.is_accepting[s]) for s in states}
    while True:
        signature = {s: (block[s], *(block[int(t)] for t in dfa.table[s])) for s in states}
        ids: dict[tuple, int] = {}
        new = {s: ids.setdefault(signature[s], len(ids)) for s in states}
        if len(ids) == len(set(block.values())):
            return len(ids)
        block = new


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3).flatmap(_dfas))
def test_char_dfa_minimize_is_minimal_and_keeps_the_language(dfa: CharDFA):
    small = minimize(dfa)
    assert small.table.shape[0] == _moore_classes(dfa)
    num_classes = dfa.table.shape[1]
    for length in range(5):
        for word in itertools.product(range(num_classes), repeat=length):
            s = t = 0
            for c in word:
                s, t = int(dfa.table[s, c]), int(small.table[t, c])
            assert bool(dfa.is_accepting[s]) == bool(small.is_accepting[t])
