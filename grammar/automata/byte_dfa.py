"""ByteDFA: a trimmed, minimal DFA over bytes, stored as a numpy table over byte classes.

Bytes that no edge of the NFA tells apart share a *byte class*, so the table is
``(num_states, num_classes)`` rather than ``(num_states, 256)``. Determinisation is the subset
construction over epsilon closures, run as a numba kernel
(:func:`formcast.grammar.automata.kernels.determinize`). Every state of the result can reach an accepting state
(states that cannot are dropped; a missing transition is ``-1``), which is what makes token
masks exact: a byte string is a prefix of the language iff walking it never hits ``-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.automata import kernels
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.chain_keys import ChainKeys

DEAD = -1
# subset-construction steps (~1 ns each) between clock checks; doubles on every check
_WORK_QUANTUM = 20_000_000


def scalar_rows(table: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """``table (N, K)`` as nested tuples of Python ints, for scalar lookups in Python loops.

    Tuples, not lists: the cyclic garbage collector stops tracking a tuple of ints after its
    first pass over it, while every list stays tracked, and a full collection of a long-lived
    process visits every element of every tracked list (a 15,000-state table: 4 million visits
    each time, which landed inside token masks).
    """
    return tuple(map(tuple, table.tolist()))


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic byte automaton whose every state can still reach acceptance.

    Attributes
    ----------
    transitions:
        ``(num_states, num_classes)`` int32; ``transitions[s, byte_to_class[b]]`` is the state
        after byte ``b`` from ``s``, or ``-1`` if no string of the language continues so.
    byte_to_class:
        ``(256,)`` uint8 byte -> class id.
    is_accepting:
        ``(num_states,)`` bool.
    start_state:
        Always 0.
    walk_keys:
        For a counted chain ``X{m,n}`` (:func:`~formcast.grammar.automata.nfa_builder.counted_chain_dfa`):
        the keys its lexer walks are shared by (:class:`~formcast.grammar.automata.chain_keys.
        ChainKeys`); ``None`` for other DFAs.
    """

    transitions: np.ndarray
    byte_to_class: np.ndarray
    is_accepting: np.ndarray
    start_state: int = 0
    walk_keys: ChainKeys | None = field(default=None, repr=False, compare=False)
    # per state, its 256 successors for scalar walks, made on the state's first walk (tuples of
    # ints, which the collector stops tracking; see scalar_rows)
    _rows: list[tuple[int, ...] | None] | None = field(default=None, repr=False, compare=False)

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.transitions.shape[1])

    def step(self, state: int, byte: int) -> int:
        """The state after one byte, or ``-1``."""
        return int(self.transitions[state, self.byte_to_class[byte]])

    def walk(self, state: int, data: bytes) -> int:
        """The state after ``data`` from ``state``, or ``-1`` if the language has no such prefix."""
        rows = self._rows
        if rows is None:
            rows = [None] * self.num_states
            object.__setattr__(self, "_rows", rows)
        for byte in data:
            row = rows[state]
            if row is None:  # a state's first walk: its 256 successors as a tuple of ints
                row = rows[state] = tuple(self.transitions[state, self.byte_to_class].tolist())
            state = row[byte]
            if state < 0:
                return DEAD
        return state

    def allowed_bytes(self, state: int) -> np.ndarray:
        """The bytes with a transition out of ``state``: ``(k,)`` uint8."""
        return np.flatnonzero(self.transitions[state, self.byte_to_class] >= 0).astype(np.uint8)

    def forced_byte(self, state: int) -> int:
        """The only byte that can follow ``state`` if it is not accepting, else ``-1``."""
        if self.is_accepting[state]:
            return DEAD
        allowed = self.allowed_bytes(state)
        return int(allowed[0]) if len(allowed) == 1 else DEAD

    def __getstate__(self) -> dict:
        return {
            "transitions": self.transitions,
            "byte_to_class": self.byte_to_class,
            "is_accepting": self.is_accepting,
            "start_state": self.start_state,
            "walk_keys": self.walk_keys,
        }

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "walk_keys", None)
        for key, value in state.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_rows", None)


def determinize(nfa: ByteNFA, budget: CompileBudget) -> ByteDFA:
    """Subset construction, then removal of states that cannot reach acceptance.

    The NFA's edge lists are flattened into arrays and the construction (byte classes,
    epsilon closures, subsets, trimming) runs in
    :func:`~formcast.grammar.automata.kernels.determinize`, in work quanta that double
    between clock checks.

    Raises
    ------
    GrammarError
        If the language is empty.
    CompileBudgetError
        Over ``budget.max_states`` states or past the time budget.
    """
    counts, edges = _flat_edges(nfa)
    eps_counts = np.fromiter(map(len, nfa.epsilon_edges), dtype=np.int64, count=nfa.num_states)
    eps_dst = np.fromiter(
        chain.from_iterable(nfa.epsilon_edges), dtype=np.int64, count=int(eps_counts.sum())
    )
    max_work = _WORK_QUANTUM
    while True:
        status, table, is_accepting, classes, subset = kernels.determinize(
            counts, edges, eps_counts, eps_dst, nfa.start, nfa.final, budget.max_states, max_work
        )
        if status == kernels.DONE:
            return ByteDFA(transitions=table, byte_to_class=classes, is_accepting=is_accepting)
        if status == kernels.EMPTY:
            raise GrammarError("the pattern matches no string (its language is empty)")
        position = max((nfa.positions[s] for s in subset.tolist()), default=0)
        if status == kernels.TOO_MANY_STATES:
            budget.check_states(budget.max_states + 1, position)
        budget.check_time("determinising the automaton", position)
        max_work *= 2


def _flat_edges(nfa: ByteNFA) -> tuple[np.ndarray, np.ndarray]:
    """``(counts (N,), edges (E, 3))`` int64: each state's number of byte edges, and the
    edges ``(lo, hi, target)`` in state order (edge blocks copied in as arrays)."""
    byte_edges = nfa.byte_edges
    counts = np.fromiter(map(len, byte_edges), dtype=np.int64, count=nfa.num_states)

    def flat(lo: int, hi: int) -> np.ndarray:
        num = int(counts[lo:hi].sum())
        found = np.fromiter(
            chain.from_iterable(chain.from_iterable(byte_edges[lo:hi])),
            dtype=np.int64,
            count=3 * num,
        )
        return found.reshape(num, 3)

    pieces, state = [], 0
    for first, block_counts, block_edges in nfa.edge_blocks:
        pieces.append(flat(state, first))
        pieces.append(block_edges)
        state = first + len(block_counts)
        counts[first:state] = block_counts
    pieces.append(flat(state, nfa.num_states))
    edges = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    return counts, edges


def trim(transitions: np.ndarray, byte_to_class: np.ndarray, is_accepting: np.ndarray) -> ByteDFA:
    """Drop states that cannot reach acceptance; renumber in BFS order from the start state.

    Raises
    ------
    GrammarError
        If the start state cannot reach acceptance (the pattern matches no string).
    """
    transitions = np.ascontiguousarray(transitions, dtype=np.int32)  # one kernel signature
    new_id, old = kernels.trim_order(transitions, np.ascontiguousarray(is_accepting, dtype=bool))
    if not len(old):
        raise GrammarError("the pattern matches no string (its language is empty)")
    remapped = kernels.renumber(transitions, new_id, old)
    return ByteDFA(
        transitions=remapped,
        byte_to_class=byte_to_class.astype(np.uint8),
        is_accepting=is_accepting[old].copy(),
    )


def restrict_bytes(dfa: ByteDFA, is_allowed: np.ndarray) -> ByteDFA:
    """The trimmed (not necessarily minimal) DFA of the strings of ``dfa``'s language that
    consist only of bytes ``b`` with ``is_allowed[b]``.

    A byte class holding allowed and disallowed bytes is split in two; transitions on
    disallowed bytes become dead, then states that can no longer reach acceptance are dropped.

    Raises
    ------
    GrammarError
        If no string of the language consists of allowed bytes only.
    """
    allowed = np.asarray(is_allowed, dtype=bool)
    pairs = dfa.byte_to_class.astype(np.int64) * 2 + allowed  # (old class, allowed) per byte
    kept_pairs, byte_to_class = np.unique(pairs, return_inverse=True)
    transitions = dfa.transitions[:, kept_pairs // 2]
    transitions[:, kept_pairs % 2 == 0] = DEAD
    return trim(transitions, byte_to_class.reshape(256), dfa.is_accepting)


def split_classes(
    byte_to_class: np.ndarray, split_bytes: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Byte classes refining ``byte_to_class`` (``(256,)``) with each byte of ``split_bytes`` in
    a class of its own: ``(byte_to_class (256,) uint8, representative (K,) int64)``, a byte of
    each class. For an automaton built from one whose classes are ``byte_to_class`` plus edges
    on ``split_bytes`` only, bytes of one class still move alike (a class need not be maximal:
    minimisation merges states, not classes)."""
    raw = byte_to_class.astype(np.int64)  # (256,)
    raw[sorted(set(split_bytes))] = 256 + np.arange(len(set(split_bytes)))
    _, representative, classes = np.unique(raw, return_index=True, return_inverse=True)
    return classes.reshape(-1).astype(np.uint8), representative


def same_language(first: ByteDFA, second: ByteDFA) -> bool:
    """True if the two DFAs accept the same byte strings.

    Both are trimmed (every state can reach acceptance), so the languages differ iff a
    lockstep walk from the start states reaches a pair where one side accepts and the other
    does not, or one side has a transition the other lacks. Linear in the reachable pairs.
    """
    start = (first.start_state, second.start_state)
    seen = {start}
    stack = [start]
    first_rows = first.transitions[:, first.byte_to_class]  # (S1, 256)
    second_rows = second.transitions[:, second.byte_to_class]  # (S2, 256)
    while stack:
        a, b = stack.pop()
        if first.is_accepting[a] != second.is_accepting[b]:
            return False
        row_a, row_b = first_rows[a], second_rows[b]
        if ((row_a < 0) != (row_b < 0)).any():
            return False
        for pair in set(zip(row_a[row_a >= 0].tolist(), row_b[row_b >= 0].tolist(), strict=True)):
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
    return True
