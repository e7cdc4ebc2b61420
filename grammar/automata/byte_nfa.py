"""ByteNFA: an epsilon-NFA over bytes with byte-range edges (built by :mod:`nfa_builder`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

DEAD_EDGE = -1


@dataclass
class ByteNFA:
    """An epsilon-NFA over bytes with one start and one final state.

    Attributes
    ----------
    byte_edges:
        ``byte_edges[s]`` lists ``(lo, hi, target)``: bytes ``lo..hi`` lead from ``s`` to target
        (empty for a state inside an edge block, whose edges are the block's). A state's list
        gets its edges as the builder makes the state; block states share one empty tuple.
    epsilon_edges:
        ``epsilon_edges[s]`` lists the targets reachable without input (a tuple for block
        states).
    positions:
        Pattern offset that created each state (for error messages).
    edge_blocks:
        ``(first, counts, edges)`` per run of states whose byte edges are arrays (a copied
        DFA: thousands of edges for a bounded string): states ``first .. first + len(counts)
        - 1`` have ``counts[k]`` edges each, rows ``(lo, hi, target)`` of ``edges`` ``(E, 3)``
        int64 in state order. Ascending ``first``, disjoint.
    """

    byte_edges: list[Sequence[tuple[int, int, int]]]
    epsilon_edges: list[Sequence[int]]
    positions: list[int]
    start: int = 0
    final: int = 0
    edge_blocks: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def num_states(self) -> int:
        return len(self.byte_edges)
