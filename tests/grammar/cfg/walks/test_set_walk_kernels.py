"""The set-walk bookkeeping kernels against their numpy definitions: walkability, first bytes,
and stacking every small terminal into the shared tables in one pass (which must agree with
both)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.kernels import is_acyclic
from formcast.grammar.cfg.walks.kernels import (
    first_byte_words,
    is_set_walkable,
    stack_terminals,
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
@given(st.lists(class_tables(), min_size=1, max_size=4), st.data())
def test_stacking_terminals_matches_numpy(terminals, data):
    """Terminals stacked side by side under distinct ids: each state's cells are its successors
    shifted into global ids, rows point at their cells, classes per terminal id, walkability
    and first bytes as their own kernels give them."""
    num_ids = 2 * len(terminals) + 1
    ids = data.draw(st.permutations(list(range(num_ids))))[: len(terminals)]
    sizes = [t[0].shape[0] for t in terminals]
    state_lo = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cell_lo = np.concatenate([[0], np.cumsum([t[0].size for t in terminals])]).astype(np.int64)
    cells = np.concatenate([t[0].ravel() for t in terminals]).astype(np.int32)
    class_rows = np.stack([t[1] for t in terminals])
    total = int(state_lo[-1])
    row_start = np.full(total, -7, np.int64)
    term_of = np.full(total, -7, np.int64)
    classes = np.zeros((num_ids, 256), np.uint8)
    is_walkable = np.zeros(num_ids, bool)
    first_words = np.zeros((total, 4), np.uint64)
    max_states, max_loop_bytes = data.draw(st.integers(1, 12)), data.draw(st.integers(0, 300))
    stack_terminals(cells, class_rows, np.array(ids, np.int64), state_lo, cell_lo, max_states,
                    max_loop_bytes, row_start, classes, term_of, is_walkable,
                    first_words)  # fmt: skip
    for i, (terminal, (table, byte_to_class, _)) in enumerate(zip(ids, terminals, strict=True)):
        lo, hi, first_cell = int(state_lo[i]), int(state_lo[i + 1]), int(cell_lo[i])
        width = table.shape[1]
        assert row_start[lo:hi].tolist() == list(range(first_cell, first_cell + table.size, width))
        written = cells[first_cell : first_cell + table.size].reshape(table.shape)
        assert (written == np.where(table >= 0, table + lo, -1)).all()
        assert (term_of[lo:hi] == terminal).all()
        assert (classes[terminal] == byte_to_class).all()
        assert is_walkable[terminal] == is_set_walkable(
            table, byte_to_class, max_states, max_loop_bytes
        )
        for state in range(table.shape[0]):
            expected = first_byte_words(table, byte_to_class, state)
            assert (first_words[lo + state] == expected).all()
            for byte in (0, 97, 255):  # the set walk's read: global successor by byte
                cell = cells[row_start[lo + state] + classes[terminal, byte]]
                local = table[state, byte_to_class[byte]]
                assert cell == (local + lo if local >= 0 else -1)
    others = [t for t in range(num_ids) if t not in ids]
    assert (classes[others] == 0).all() and not is_walkable[others].any()


@settings(max_examples=200, deadline=None)
@given(class_tables(), st.data())
def test_first_byte_words_match_numpy(tables, data):
    table, byte_to_class, _ = tables
    state = data.draw(st.integers(0, table.shape[0] - 1))
    is_live = table[state][byte_to_class] >= 0
    words = first_byte_words(table, byte_to_class, state)
    expected = int.from_bytes(np.packbits(is_live, bitorder="little").tobytes(), "little")
    assert int.from_bytes(words.tobytes(), "little") == expected
