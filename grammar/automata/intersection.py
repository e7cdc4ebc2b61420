"""Intersection of two byte NFAs: a product subset construction, with a prefix check.

Used for ``(?=A)R`` (a :class:`~formcast.grammar.regex.syntax_tree.Lookahead` followed by the rest of
its group): the DFA of ``A & R`` is built by exploring pairs ``(subset of A, subset of R)``
reachable on common prefixes only, so a large guard (``A`` = "at most 1024 JSON characters
then a quote", ~14k DFA states on its own) costs only the pairs the other side allows (a few
per counted character when ``R`` is ASCII).

The same exploration decides whether the intersection equals ``re``'s lookahead: ``(?=A)R``
followed by any text ``T`` matches ``(A & R) T`` iff no string of ``A`` is a proper prefix of
a string of ``R`` and vice versa (if ``a`` is a proper prefix of ``r``, ``r t`` has a prefix
in ``A`` without ``r`` being in ``A``). A pair reached on a common prefix ``u`` where one side
accepts ``u`` and the other can still read a byte witnesses such a prefix (conservatively:
"can read a byte" over-approximates "can reach acceptance", so doubtful cases are refused).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import (
    DEAD,
    ByteDFA,
    _ClosureCache,
    refine_class_blocks,
    trim,
)
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.regex.syntax_tree import Node

# intersect results by (guard tree, rest tree): the JSON Schema compiler checks a guarded
# string's size once, then the same string is built again inside the document (or a
# structural-route terminal)
_MEMO: OrderedDict[tuple[Node, Node], tuple[ByteDFA | None, bool]] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 64


def intersect_memoized(
    guard: Node,
    rest: Node,
    build_sides: Callable[[], tuple[ByteNFA, ByteNFA]],
    budget: CompileBudget,
    position: int = 0,
) -> tuple[ByteDFA | None, bool]:
    """:func:`intersect` of the NFAs ``build_sides()`` makes for ``guard`` and ``rest``,
    memoised by the two trees (NFAs are built only on a miss)."""
    key = (guard, rest)
    with _MEMO_LOCK:
        found = _MEMO.get(key)
        if found is not None:
            _MEMO.move_to_end(key)
    if found is not None:
        if found[0] is not None:
            budget.check_states(found[0].num_states, position)
        return found
    nfa_a, nfa_b = build_sides()
    result = intersect(nfa_a, nfa_b, budget, position)
    with _MEMO_LOCK:
        _MEMO[key] = result
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return result


def intersect(
    nfa_a: ByteNFA, nfa_b: ByteNFA, budget: CompileBudget, position: int = 0
) -> tuple[ByteDFA | None, bool]:
    """The minimal DFA of ``L(a) & L(b)`` (``None`` if empty) and whether the two languages are
    prefix-free relative to each other (no string of one is a proper prefix of the other's).
    """
    boundaries = np.zeros(257, dtype=bool)
    boundaries[0] = True
    for nfa in (nfa_a, nfa_b):
        for edges in nfa.byte_edges:
            for lo, hi, _ in edges:
                boundaries[lo] = True
                boundaries[hi + 1] = True
    classes = (np.cumsum(boundaries[:256]) - 1).astype(np.uint8)
    num_classes = int(classes[-1]) + 1
    moves_a = _moves(nfa_a, classes)
    moves_b = _moves(nfa_b, classes)
    closure_a, closure_b = _ClosureCache(nfa_a), _ClosureCache(nfa_b)
    edges_a, edges_b = nfa_a.byte_edges, nfa_b.byte_edges
    final_a, final_b = nfa_a.final, nfa_b.final
    all_classes = (1 << num_classes) - 1
    start = (closure_a(nfa_a.start), closure_b(nfa_b.start))
    state_ids: dict[tuple[frozenset[int], frozenset[int]], int] = {start: 0}
    pairs = [start]
    rows: list[list[int]] = []
    is_prefix_free = True
    k = 0
    while k < len(pairs):
        set_a, set_b = pairs[k]
        k += 1
        if k % 256 == 0:
            budget.check_time("intersecting a length guard", position)
        if is_prefix_free:
            ends_a, ends_b = final_a in set_a, final_b in set_b
            if (ends_a and any(edges_b[s] for s in set_b)) or (
                ends_b and any(edges_a[s] for s in set_a)
            ):
                is_prefix_free = False
        # partition of the classes by (targets in a, targets in b); -t - 1 marks a b target
        blocks: list[tuple[int, tuple[int, ...]]] = [(all_classes, ())]
        for s in set_a:
            blocks = refine_class_blocks(blocks, moves_a[s])
        for s in set_b:
            blocks = refine_class_blocks(blocks, ((-t - 1, mask) for t, mask in moves_b[s]))
        row = [DEAD] * num_classes
        for block, targets in blocks:
            union_a: set[int] = set()
            union_b: set[int] = set()
            for t in targets:
                if t >= 0:
                    union_a |= closure_a(t)
                else:
                    union_b |= closure_b(-t - 1)
            if not union_a or not union_b:
                continue
            key = (frozenset(union_a), frozenset(union_b))
            nxt = state_ids.get(key)
            if nxt is None:
                nxt = state_ids[key] = len(pairs)
                pairs.append(key)
                if nxt + 1 > budget.max_states:
                    budget.check_states(nxt + 1, position)
            while block:
                low = block & -block
                row[low.bit_length() - 1] = nxt
                block ^= low
        rows.append(row)
    table = np.array(rows, dtype=np.int32).reshape(len(rows), num_classes)
    is_accepting = np.array([final_a in a and final_b in b for a, b in pairs], dtype=bool)
    try:
        dfa = trim(table, classes, is_accepting)
    except GrammarError:
        return None, is_prefix_free
    return minimize(dfa, budget, position), is_prefix_free


def _moves(nfa: ByteNFA, classes: np.ndarray) -> list[list[tuple[int, int]]]:
    """Per NFA state: ``[(target, class bit set), ...]``, one entry per target."""
    out: list[list[tuple[int, int]]] = []
    for edges in nfa.byte_edges:
        by_target: dict[int, int] = {}
        for lo, hi, target in edges:
            first, last = int(classes[lo]), int(classes[hi])
            span = ((1 << (last - first + 1)) - 1) << first
            by_target[target] = by_target.get(target, 0) | span
        out.append(list(by_target.items()))
    return out


def class_ranges(byte_to_class: np.ndarray) -> list[list[tuple[int, int]]]:
    """Per byte class: the maximal runs ``(lo, hi)`` of bytes in it."""
    num_classes = int(byte_to_class.max()) + 1
    out: list[list[tuple[int, int]]] = [[] for _ in range(num_classes)]
    values = byte_to_class.tolist()
    lo = 0
    for b in range(1, 257):
        if b == 256 or values[b] != values[lo]:
            out[values[lo]].append((lo, b - 1))
            lo = b
    return out


def _clear_memo() -> None:
    with _MEMO_LOCK:
        _MEMO.clear()


caches.register("automata.intersections", f"LRU: {_MEMO_SIZE} intersections", _clear_memo)
