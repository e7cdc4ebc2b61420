"""The set-walk bookkeeping kernels (one jitted pass per terminal on a first set walk) against
their numpy definitions: walkability, stacking into the shared tables, first bytes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.kernels import is_acyclic
from formcast.grammar.cfg.walks.kernels import (
    first_byte_words,
    is_set_walkable,
    stack_terminal,
)
from tests.grammar.automata.test_acyclic import tables


@st.composite
def class_tables(draw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random ``(S, K)`` class table (``-1`` dead; the cycle-check tests' tables), its
    ``(256,)`` byte -> class map (every class used) and acceptance."""
    table = draw(tables())
    num_states, num_classes = table.shape
    extra = draw(st.lists(st.integers(0, num_classes - 1), min_size=256 - num_classes,
                          max_size=256 - num_classes))  # fmt: skip
    byte_to_class = np.array(list(range(num_classes)) + extra, dtype=np.uint8)
    byte_to_class = byte_to_class[np.argsort(draw(st.permutations(list(range(256)))))]
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states,
                                       max_size=num_states)), dtype=bool)  # fmt: skip
    return table, byte_to_class, accepting


@settings(max_examples=300, deadline=None)
@given(class_tables(), st.integers(1, 12), st.integers(0, 300))
def test_walkability_matches_its_definition(tables, max_states, max_loop_bytes):
    table, byte_to_class, _ = tables
    class_sizes = np.bincount(byte_to_class, minlength=table.shape[1])
    widest = int(((table >= 0) @ class_sizes).max())
    expected = table.shape[0] <= max_states and (widest <= max_loop_bytes or is_acyclic(table))
    assert is_set_walkable(table, byte_to_class, max_states, max_loop_bytes) == expected


@settings(max_examples=200, deadline=None)
@given(class_tables(), class_tables())
def test_stacking_two_terminals_matches_numpy(first, second):
    """Terminal 3 then terminal 1 stacked into tables sized for both: each state's cells are
    its successors shifted into global ids, rows point at their cells, classes per terminal."""
    size = sum(t[0].shape[0] for t in (first, second))
    cells = np.full(sum(t[0].size for t in (first, second)), 99, np.int32)
    row_start = np.full(size, -7, np.int64)
    classes = np.zeros((4, 256), np.uint8)
    term_of = np.full(size, -7, np.int64)
    accepting = np.zeros(size, bool)
    lo = first_cell = 0
    for terminal, (table, byte_to_class, is_accepting) in ((3, first), (1, second)):
        stack_terminal(table, byte_to_class, is_accepting, terminal, lo, first_cell,
                       cells, row_start, classes, term_of, accepting)  # fmt: skip
        hi = lo + table.shape[0]
        width = table.shape[1]
        assert row_start[lo:hi].tolist() == list(range(first_cell, first_cell + table.size, width))
        written = cells[first_cell : first_cell + table.size].reshape(table.shape)
        assert (written == np.where(table >= 0, table + lo, -1)).all()
        assert (term_of[lo:hi] == terminal).all() and (accepting[lo:hi] == is_accepting).all()
        assert (classes[terminal] == byte_to_class).all()
        for state in range(table.shape[0]):  # the set walk's read: global successor by byte
            for byte in (0, 97, 255):
                cell = cells[row_start[lo + state] + classes[terminal, byte]]
                local = table[state, byte_to_class[byte]]
                assert cell == (local + lo if local >= 0 else -1)
        lo, first_cell = hi, first_cell + table.size
    assert (classes[[0, 2]] == 0).all()


@settings(max_examples=200, deadline=None)
@given(class_tables(), st.data())
def test_first_byte_words_match_numpy(tables, data):
    table, byte_to_class, _ = tables
    state = data.draw(st.integers(0, table.shape[0] - 1))
    is_live = table[state][byte_to_class] >= 0
    words = first_byte_words(table, byte_to_class, state)
    expected = int.from_bytes(np.packbits(is_live, bitorder="little").tobytes(), "little")
    assert int.from_bytes(words.tobytes(), "little") == expected
