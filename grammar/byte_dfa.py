"""ByteDFA: a trimmed, minimal DFA over bytes, stored as a numpy table over byte classes.

Bytes that no edge of the NFA tells apart share a *byte class*, so the table is
``(num_states, num_classes)`` rather than ``(num_states, 256)``. Determinisation is the subset
construction over epsilon closures, grouping the classes that lead to the same NFA targets so
each distinct successor is closed once. Every state of the result can reach an accepting state
(states that cannot are dropped; a missing transition is ``-1``), which is what makes token
masks exact: a byte string is a prefix of the language iff walking it never hits ``-1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.byte_nfa import ByteNFA
from formcast.grammar.compile_budget import CompileBudget

DEAD = -1
_LIST_TABLE_MAX_CELLS = 4_000_000


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
    """

    transitions: np.ndarray
    byte_to_class: np.ndarray
    is_accepting: np.ndarray
    start_state: int = 0
    _rows: list[list[int]] | None = field(default=None, repr=False, compare=False)

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
        rows = self._list_rows()
        if rows is None:
            table, classes = self.transitions, self.byte_to_class
            for byte in data:
                state = int(table[state, classes[byte]])
                if state < 0:
                    return DEAD
            return state
        for byte in data:
            state = rows[state][byte]
            if state < 0:
                return DEAD
        return state

    def _list_rows(self) -> list[list[int]] | None:
        """Per-state 256-entry Python lists for fast scalar walks (small DFAs only)."""
        if self._rows is None and self.num_states * 256 <= _LIST_TABLE_MAX_CELLS:
            full = self.transitions[:, self.byte_to_class]  # (N, 256)
            object.__setattr__(self, "_rows", full.tolist())
        return self._rows

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
        }

    def __setstate__(self, state: dict) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_rows", None)


def byte_classes(nfa: ByteNFA) -> np.ndarray:
    """``(256,)`` uint8: bytes no edge distinguishes get the same class id (numbered by byte)."""
    points = {0}
    for edges in nfa.byte_edges:
        for lo, hi, _ in edges:
            points.add(lo)
            points.add(hi + 1)
    is_boundary = np.zeros(257, dtype=bool)
    is_boundary[list(points)] = True
    return (np.cumsum(is_boundary[:256]) - 1).astype(np.uint8)


def refine_class_blocks(
    blocks: list[tuple[int, tuple[int, ...]]], moves: Iterable[tuple[int, int]]
) -> list[tuple[int, tuple[int, ...]]]:
    """Split ``(class bit set, targets)`` blocks by each ``(target, class bit set)`` move: the
    classes inside the move's set gain its target. Blocks stay a partition of the classes."""
    for target, mask in moves:
        refined = []
        for block, targets in blocks:
            inside = block & mask
            if not inside:
                refined.append((block, targets))
                continue
            refined.append((inside, (*targets, target)))
            outside = block & ~mask
            if outside:
                refined.append((outside, targets))
        blocks = refined
    return blocks


def determinize(nfa: ByteNFA, budget: CompileBudget) -> ByteDFA:
    """Subset construction, then removal of states that cannot reach acceptance.

    Byte classes are handled as bit sets (Python ints): the out-edges of one DFA state are
    found by refining the set of all classes by each NFA move's class set, so the work per
    state is (moves x distinct target sets), not (moves x classes).
    """
    classes = byte_classes(nfa)
    num_classes = int(classes[-1]) + 1
    class_of = classes.tolist()
    # per NFA state: [(target, class bit set), ...] one entry per target
    moves: list[list[tuple[int, int]]] = []
    for edges in nfa.byte_edges:
        by_target: dict[int, int] = {}
        for lo, hi, target in edges:
            first, last = class_of[lo], class_of[hi]
            span = ((1 << (last - first + 1)) - 1) << first
            by_target[target] = by_target.get(target, 0) | span
        moves.append(list(by_target.items()))
    all_classes = (1 << num_classes) - 1
    closure_of = _ClosureCache(nfa)
    start_set = closure_of(nfa.start)
    state_ids: dict[frozenset[int], int] = {start_set: 0}
    state_sets = [start_set]
    rows: list[list[int]] = []
    # targets (one NFA state id, or a frozenset of several) -> DFA state id
    successor_ids: dict[int | frozenset[int], int] = {}
    single_blocks = [[(mask, (target,)) for target, mask in m] for m in moves]
    bits_of: dict[int, list[int]] = {}  # class bit set -> its class ids

    def position_of(current: frozenset[int]) -> int:
        return max(nfa.positions[s] for s in current)

    k = 0
    while k < len(state_sets):
        current = state_sets[k]
        k += 1
        if k % 256 == 0:
            budget.check_time("determinising the automaton", position_of(current))
        # partition of the classes by the set of NFA targets they lead to
        movers = [s for s in current if moves[s]]
        if len(movers) == 1:  # (literal chains: most states) one NFA state's own moves
            blocks = single_blocks[movers[0]]
            movers = []
        else:
            blocks = [(all_classes, ())]
        for s in movers:
            blocks = refine_class_blocks(blocks, moves[s])
        row = [DEAD] * num_classes
        for block, targets in blocks:
            if not targets:
                continue
            key = targets[0] if len(targets) == 1 else frozenset(targets)
            nxt = successor_ids.get(key)
            if nxt is None:
                if len(targets) == 1:
                    subset = closure_of(targets[0])
                else:
                    union: set[int] = set()
                    for t in targets:
                        union |= closure_of(t)
                    subset = frozenset(union)
                nxt = state_ids.get(subset)
                if nxt is None:
                    nxt = len(state_sets)
                    state_ids[subset] = nxt
                    state_sets.append(subset)
                    if nxt + 1 > budget.max_states:
                        budget.check_states(nxt + 1, position_of(current))
                successor_ids[key] = nxt
            indices = bits_of.get(block)
            if indices is None:
                indices = bits_of[block] = _bit_indices(block)
            for c in indices:
                row[c] = nxt
        rows.append(row)
    transitions = np.array(rows, dtype=np.int32).reshape(len(rows), num_classes)
    final = nfa.final
    is_accepting = np.array([final in s for s in state_sets], dtype=bool)
    return trim(transitions, classes, is_accepting)


def _bit_indices(bits: int) -> list[int]:
    """Positions of the set bits of ``bits``, ascending."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


class _ClosureCache:
    """Epsilon closure of one NFA state, restricted to states with byte edges or final."""

    def __init__(self, nfa: ByteNFA) -> None:
        self.nfa = nfa
        self.cache: dict[int, frozenset[int]] = {}

    def __call__(self, state: int) -> frozenset[int]:
        found = self.cache.get(state)
        if found is not None:
            return found
        eps, byte_edges, final = self.nfa.epsilon_edges, self.nfa.byte_edges, self.nfa.final
        seen = {state}
        stack = [state]
        kept = []
        while stack:
            s = stack.pop()
            if byte_edges[s] or s == final:
                kept.append(s)
            for t in eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        result = frozenset(kept)
        self.cache[state] = result
        return result


def trim(transitions: np.ndarray, byte_to_class: np.ndarray, is_accepting: np.ndarray) -> ByteDFA:
    """Drop states that cannot reach acceptance; renumber in BFS order from the start state.

    Raises
    ------
    GrammarError
        If the start state cannot reach acceptance (the pattern matches no string).
    """
    num_states, num_classes = transitions.shape
    # distinct edges (s, t), sorted by s then t
    flat = transitions.reshape(-1)
    defined = np.flatnonzero(flat >= 0)
    edges = np.unique((defined // num_classes).astype(np.int64) * num_states + flat[defined])
    edge_src, edge_dst = edges // num_states, edges % num_states
    # co-reachability: reverse search from the accepting states (each edge looked at once)
    order = np.argsort(edge_dst, kind="stable")
    preds = edge_src[order].tolist()
    pred_starts = np.searchsorted(edge_dst[order], np.arange(num_states + 1)).tolist()
    is_alive_list = is_accepting.tolist()
    stack = np.flatnonzero(is_accepting).tolist()
    while stack:
        t = stack.pop()
        for s in preds[pred_starts[t] : pred_starts[t + 1]]:
            if not is_alive_list[s]:
                is_alive_list[s] = True
                stack.append(s)
    if not is_alive_list[0]:
        raise GrammarError("the pattern matches no string (its language is empty)")
    is_alive = np.array(is_alive_list, dtype=bool)
    safe = np.maximum(transitions, 0)
    table = np.where((transitions >= 0) & is_alive[safe], transitions, DEAD)
    # BFS renumbering (level by level, ascending within a level) from state 0
    succs = edge_dst.tolist()
    succ_starts = np.searchsorted(edge_src, np.arange(num_states + 1)).tolist()
    new_id_list = [DEAD] * num_states
    new_id_list[0] = 0
    order_list = [0]
    frontier = [0]
    while frontier:
        found = set()
        for s in frontier:
            for t in succs[succ_starts[s] : succ_starts[s + 1]]:
                if new_id_list[t] < 0 and is_alive_list[t]:
                    found.add(t)
        frontier = sorted(found)
        for t in frontier:
            new_id_list[t] = len(order_list)
            order_list.append(t)
    new_id = np.array(new_id_list, dtype=np.int64)
    old = np.array(order_list, dtype=np.int64)
    remapped = table[old]
    remapped = np.where(remapped >= 0, new_id[np.maximum(remapped, 0)], DEAD).astype(np.int32)
    return ByteDFA(
        transitions=np.ascontiguousarray(remapped),
        byte_to_class=byte_to_class.astype(np.uint8),
        is_accepting=is_accepting[old].copy(),
    )
