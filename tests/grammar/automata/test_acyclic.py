"""The jitted DFA cycle check (``automata.kernels.is_acyclic``) against a depth-first search."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.kernels import is_acyclic


def has_cycle_by_dfs(table: np.ndarray) -> bool:
    """Reference: a state on the current DFS path reached again is a cycle (self-loops too)."""
    num_states = table.shape[0]
    colour = [0] * num_states  # 0 new, 1 on the path, 2 done

    def visit(state: int) -> bool:
        colour[state] = 1
        for target in table[state].tolist():
            if target < 0:
                continue
            if colour[target] == 1 or (colour[target] == 0 and visit(target)):
                return True
        colour[state] = 2
        return False

    return any(colour[s] == 0 and visit(s) for s in range(num_states))


@st.composite
def tables(draw) -> np.ndarray:
    num_states = draw(st.integers(1, 12))
    num_classes = draw(st.integers(1, 4))
    # mostly forward edges (acyclic), some back edges and self-loops
    cells = st.one_of(st.just(-1), st.integers(0, num_states - 1))
    values = draw(st.lists(cells, min_size=num_states * num_classes,
                           max_size=num_states * num_classes))  # fmt: skip
    table = np.array(values, dtype=np.int32).reshape(num_states, num_classes)
    if draw(st.booleans()):  # keep only forward edges: a DAG
        rows = np.arange(num_states)[:, None]
        table = np.where(table > rows, table, -1).astype(np.int32)
    return table


@settings(max_examples=300, deadline=None)
@given(tables())
def test_matches_depth_first_search(table):
    assert is_acyclic(table) == (not has_cycle_by_dfs(table))


def test_known_tables():
    chain = np.array([[1, -1], [2, -1], [-1, -1]], dtype=np.int32)
    assert is_acyclic(chain)
    assert not is_acyclic(np.array([[0]], dtype=np.int32))  # a self-loop
    assert not is_acyclic(np.array([[1], [2], [0]], dtype=np.int32))  # a 3-cycle
    parallel = np.array([[1, 1, 1], [-1, -1, -1]], dtype=np.int32)  # one edge, three classes
    assert is_acyclic(parallel)
    assert not is_acyclic(np.array([[1, 1], [-1, 0]], dtype=np.int32))
