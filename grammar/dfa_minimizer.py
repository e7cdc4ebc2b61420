"""DFA minimisation: Hopcroft's partition refinement over byte classes.

Input and output are trimmed :class:`ByteDFA`s. The DFA is completed with a sink state for the
refinement (missing transitions go to the sink), so two states are merged iff they accept the
same set of suffixes; the sink's block is dropped again. Runs in O(K n log n) for ``K`` byte
classes, with the budget's clock checked as it goes.
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.byte_dfa import DEAD, ByteDFA, trim
from formcast.grammar.compile_budget import CompileBudget

# Above this many defined transitions, pure-Python Hopcroft costs seconds; such DFAs are only
# reduced by merging identical states (exact, usually near-minimal, indexed lazily anyway).
MAX_HOPCROFT_TRANSITIONS = 150_000
_MAX_MERGE_ROUNDS = 64


def minimize(dfa: ByteDFA, budget: CompileBudget, position: int | None = None) -> ByteDFA:
    """The minimal DFA equivalent to ``dfa`` (states renumbered in BFS order)."""
    table = dfa.transitions
    num_states, num_classes = table.shape
    if num_states <= 1:
        return dfa
    if int((table >= 0).sum()) > MAX_HOPCROFT_TRANSITIONS:
        return merge_identical_states(dfa, budget, position)
    # predecessors over defined transitions, CSR per class c:
    # preds[c][starts[c][t] : starts[c][t + 1]] = {s : table[s, c] == t}
    src = np.repeat(np.arange(num_states), num_classes)
    cls = np.tile(np.arange(num_classes), num_states)
    dst = table.reshape(-1)
    defined = dst >= 0
    src, cls, dst = src[defined], cls[defined], dst[defined]
    order = np.lexsort((dst, cls))
    src, cls, dst = src[order], cls[order], dst[order]
    key = cls.astype(np.int64) * (num_states + 1) + dst
    bounds = np.searchsorted(key, np.arange(num_classes * (num_states + 1) + 1)).tolist()
    preds = src.tolist()
    row_base = [c * (num_states + 1) for c in range(num_classes)]
    # classes on which each state has an incoming transition
    in_classes: list[set[int]] = [set() for _ in range(num_states)]
    for t, c in set(zip(dst.tolist(), cls.tolist(), strict=True)):
        in_classes[t].add(c)

    accepting = set(np.flatnonzero(dfa.is_accepting).tolist())
    rejecting = set(range(num_states)) - accepting
    blocks = [b for b in (accepting, rejecting) if b]
    block_of = [0] * num_states
    pending: dict[int, set[int]] = {}
    for index, block in enumerate(blocks):
        classes: set[int] = set()
        for s in block:
            block_of[s] = index
            classes |= in_classes[s]
        pending[index] = classes  # partial DFA: every initial block is a splitter
    stack = list(pending)
    rounds = 0
    while stack:
        splitter = stack[-1]
        classes = pending.get(splitter)
        if not classes:
            pending.pop(splitter, None)
            stack.pop()
            continue
        c = classes.pop()
        rounds += 1
        if rounds % 4096 == 0:
            budget.check_time("minimising the automaton", position)
        base = row_base[c]
        touched: dict[int, list[int]] = {}
        for t in blocks[splitter]:
            lo, hi = bounds[base + t], bounds[base + t + 1]
            for s in preds[lo:hi]:
                touched.setdefault(block_of[s], []).append(s)
        for block, members in touched.items():
            if len(members) == len(blocks[block]):
                continue
            moved = set(members)
            blocks[block] -= moved
            new_block = len(blocks)
            blocks.append(moved)
            for s in moved:
                block_of[s] = new_block
            old_pending = pending.get(block, set())
            small = new_block if len(moved) <= len(blocks[block]) else block
            small_classes: set[int] = set()
            for s in blocks[small]:
                small_classes |= in_classes[s]
            if small == new_block:
                pending[new_block] = old_pending | small_classes
            else:
                pending[new_block] = set(old_pending)
                pending[block] = old_pending | small_classes
                if block not in stack:
                    stack.append(block)
            stack.append(new_block)

    if len(blocks) == num_states:
        return dfa  # already minimal
    block_ids = np.array(block_of, dtype=np.int64)
    representatives = np.full(len(blocks), -1, dtype=np.int64)
    representatives[block_ids[::-1]] = np.arange(num_states - 1, -1, -1)
    # put the start block first so trim() sees the start state as 0
    start_block = int(block_ids[0])
    order_blocks = [start_block] + [b for b in range(len(blocks)) if b != start_block]
    position_of = np.empty(len(blocks), dtype=np.int64)
    position_of[order_blocks] = np.arange(len(blocks))
    rows = table[representatives[order_blocks]]  # (B, K) old state ids
    quotient = np.where(rows >= 0, position_of[block_ids[np.maximum(rows, 0)]], DEAD)
    quotient_accepting = dfa.is_accepting[representatives[order_blocks]]
    return trim(quotient.astype(np.int32), dfa.byte_to_class, quotient_accepting)


def merge_identical_states(
    dfa: ByteDFA, budget: CompileBudget, position: int | None = None
) -> ByteDFA:
    """Repeatedly merge states with identical rows and acceptance (a sound reduction).

    Merging states whose outgoing transitions and acceptance are equal never changes the
    language; iterating merges whole equivalent acyclic tails (suffix sharing), which is what
    large generated regexes mostly need. Not guaranteed minimal for equivalent cycles.
    """
    table = dfa.transitions
    accepting = dfa.is_accepting
    for _ in range(_MAX_MERGE_ROUNDS):
        budget.check_time("reducing the automaton", position)
        signature = np.concatenate([table, accepting[:, None].astype(table.dtype)], axis=1)
        # keep the start state's group first: unique over rows, then map
        _, first_index, inverse = np.unique(
            signature, axis=0, return_index=True, return_inverse=True
        )
        inverse = inverse.reshape(-1)
        if len(first_index) == len(table):
            break
        start_group = inverse[0]
        order = np.argsort(first_index != first_index[start_group], kind="stable")
        position_of = np.empty(len(first_index), dtype=np.int64)
        position_of[order] = np.arange(len(first_index))
        new_of_old = position_of[inverse]
        rows = table[first_index[order]]
        table = np.where(rows >= 0, new_of_old[np.maximum(rows, 0)], DEAD).astype(np.int32)
        accepting = accepting[first_index[order]]
    return trim(table, dfa.byte_to_class, accepting)
