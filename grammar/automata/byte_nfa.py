"""ByteNFA: an epsilon-NFA over bytes with byte-range edges (built by :mod:`nfa_builder`)."""

from __future__ import annotations

from dataclasses import dataclass

DEAD_EDGE = -1


@dataclass
class ByteNFA:
    """An epsilon-NFA over bytes with one start and one final state.

    Attributes
    ----------
    byte_edges:
        ``byte_edges[s]`` lists ``(lo, hi, target)``: bytes ``lo..hi`` lead from ``s`` to target.
    epsilon_edges:
        ``epsilon_edges[s]`` lists the targets reachable without input.
    positions:
        Pattern offset that created each state (for error messages).
    """

    byte_edges: list[list[tuple[int, int, int]]]
    epsilon_edges: list[list[int]]
    positions: list[int]
    start: int = 0
    final: int = 0

    @property
    def num_states(self) -> int:
        return len(self.byte_edges)
