"""Intersection of two byte NFAs: a product of their DFAs, with a prefix check.

Used for ``(?=A)R`` (a :class:`~formcast.grammar.regex.syntax_tree.Lookahead` followed by the rest of
its group): each side is determinised and minimised on its own, then the DFA of ``A & R`` is
the breadth-first product of the two over their common byte classes, exploring only pairs of
states reachable on common prefixes (:func:`~formcast.grammar.automata.kernels.pair_product`),
so a large guard (``A`` = "at most 1024 JSON characters then a quote", ~14k DFA states on its
own) costs only the pairs the other side allows (a few per counted character when ``R`` is
ASCII).

The same exploration decides whether the intersection equals ``re``'s lookahead: ``(?=A)R``
followed by any text ``T`` matches ``(A & R) T`` iff no string of ``A`` is a proper prefix of
a string of ``R`` and vice versa (if ``a`` is a proper prefix of ``r``, ``r t`` has a prefix
in ``A`` without ``r`` being in ``A``). Both DFAs are trimmed (every state reaches
acceptance), so a pair reached on a common prefix ``u`` where one side accepts ``u`` and the
other has a move witnesses such a prefix, and every witness shows up as such a pair.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.automata import kernels
from formcast.grammar.automata.budget import DEFAULT_MAX_STATES, CompileBudget
from formcast.grammar.automata.byte_dfa import ByteDFA, determinize, trim
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
    # the sides may be larger than the product (a guard of 1,000 counted characters, a
    # 5-character body): only the product counts against ``max_states``
    sides = replace(budget, max_states=max(budget.max_states, DEFAULT_MAX_STATES))
    try:
        dfa_a = minimize(determinize(nfa_a, sides), sides, position)
        dfa_b = minimize(determinize(nfa_b, sides), sides, position)
    except GrammarError:  # a side matches nothing: so does the intersection
        return None, True
    # common classes: bytes alike on both sides (the pair of their classes)
    joint = dfa_a.byte_to_class.astype(np.int64) * 256 + dfa_b.byte_to_class
    _, firsts, classes = np.unique(joint, return_index=True, return_inverse=True)
    table_a = np.ascontiguousarray(dfa_a.transitions[:, dfa_a.byte_to_class[firsts]])  # (S_a, C)
    table_b = np.ascontiguousarray(dfa_b.transitions[:, dfa_b.byte_to_class[firsts]])  # (S_b, C)
    limit = budget.max_states
    max_pairs = min(limit, max(1024, 4 * (len(table_a) + len(table_b))))
    while True:  # a capacity that doubles until the pairs fit (or the budget is spent)
        status, rows, left, right = kernels.pair_product(table_a, table_b, max_pairs)
        if status == 0:
            break
        if max_pairs >= limit:
            budget.check_states(limit + 1, position)
        budget.check_time("intersecting a length guard", position)
        max_pairs = min(limit, 2 * max_pairs)
    accepts_a, accepts_b = dfa_a.is_accepting[left], dfa_b.is_accepting[right]  # (M,)
    moves_a = (table_a >= 0).any(axis=1)[left]
    moves_b = (table_b >= 0).any(axis=1)[right]
    is_prefix_free = not bool(((accepts_a & moves_b) | (accepts_b & moves_a)).any())
    try:
        dfa = trim(rows, classes.astype(np.uint8), accepts_a & accepts_b)
    except GrammarError:
        return None, is_prefix_free
    return minimize(dfa, budget, position), is_prefix_free


def _clear_memo() -> None:
    with _MEMO_LOCK:
        _MEMO.clear()


caches.register("automata.intersections", f"LRU: {_MEMO_SIZE} intersections", _clear_memo)
