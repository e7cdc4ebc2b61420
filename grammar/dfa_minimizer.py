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
    num_states = table.shape[0]
    if num_states <= 1:
        return dfa
    if int((table >= 0).sum()) > MAX_HOPCROFT_TRANSITIONS:
        return merge_identical_states(dfa, budget, position)
    # byte classes with identical columns cannot tell states apart: refine over one of each
    columns = np.unique(table, axis=1) if table.shape[1] > 1 else table
    block_of, num_blocks = _hopcroft(columns, dfa.is_accepting, budget, position)
    if num_blocks == num_states:
        return dfa  # already minimal
    block_ids = np.array(block_of, dtype=np.int64)
    representatives = np.full(num_blocks, -1, dtype=np.int64)
    representatives[block_ids[::-1]] = np.arange(num_states - 1, -1, -1)
    # put the start block first so trim() sees the start state as 0
    start_block = int(block_ids[0])
    order_blocks = [start_block] + [b for b in range(num_blocks) if b != start_block]
    position_of = np.empty(num_blocks, dtype=np.int64)
    position_of[order_blocks] = np.arange(num_blocks)
    rows = table[representatives[order_blocks]]  # (B, K) old state ids
    quotient = np.where(rows >= 0, position_of[block_ids[np.maximum(rows, 0)]], DEAD)
    quotient_accepting = dfa.is_accepting[representatives[order_blocks]]
    return trim(quotient.astype(np.int32), dfa.byte_to_class, quotient_accepting)


def _hopcroft(
    table: np.ndarray, is_accepting: np.ndarray, budget: CompileBudget, position: int | None
) -> tuple[list[int], int]:
    """Coarsest partition of the states, refining {accepting, rejecting}, that is stable under
    every class: ``(block id per state, number of blocks)``.

    Hopcroft's algorithm on a partial DFA (a missing transition is its own behaviour, so every
    initial block is a splitter for every class entering it). Blocks are contiguous slices of
    one permutation ``elems`` (``first``/``end``; ``[first, mid)`` are the states marked by the
    current splitter), so marking and splitting cost O(1) per state. A split keeps the larger
    half under the old id and the smaller half, the new block, becomes a splitter for every
    class entering it: whether or not the old block was pending, that is Hopcroft's rule.
    """
    num_states, num_classes = table.shape
    # predecessors over defined transitions, CSR keyed by c * (N + 1) + t:
    # preds[bounds[k] : bounds[k + 1]] = {s : table[s, c] == t}
    src = np.repeat(np.arange(num_states), num_classes)
    cls = np.tile(np.arange(num_classes), num_states)
    dst = table.reshape(-1)
    defined = dst >= 0
    src, cls, dst = src[defined], cls[defined], dst[defined]
    key = cls.astype(np.int64) * (num_states + 1) + dst
    order = np.argsort(key, kind="stable")
    preds = src[order].tolist()
    bounds = np.searchsorted(key[order], np.arange(num_classes * (num_states + 1) + 1)).tolist()
    # classes entering each state, as bit sets
    in_mask = [0] * num_states
    pairs = np.unique(dst.astype(np.int64) * num_classes + cls)
    for t, c in zip((pairs // num_classes).tolist(), (pairs % num_classes).tolist(), strict=True):
        in_mask[t] |= 1 << c

    accepting = np.flatnonzero(is_accepting).tolist()
    rejecting = np.flatnonzero(~is_accepting).tolist()
    elems = accepting + rejecting
    loc = [0] * num_states
    for k, s in enumerate(elems):
        loc[s] = k
    first: list[int] = []
    end: list[int] = []
    block_of = [0] * num_states
    pending: list[int] = []
    for part in (accepting, rejecting):
        if part:
            b = len(first)
            first.append(len(first) and len(accepting))
            end.append(first[-1] + len(part))
            mask = 0
            for s in part:
                block_of[s] = b
                mask |= in_mask[s]
            pending.append(mask)
    mid = list(first)
    stack = list(range(len(first)))
    rounds = 0
    while stack:
        splitter = stack[-1]
        mask = pending[splitter]
        if not mask:
            stack.pop()
            continue
        low = mask & -mask
        pending[splitter] = mask ^ low
        base = (low.bit_length() - 1) * (num_states + 1)
        rounds += 1
        if rounds % 4096 == 0:
            budget.check_time("minimising the automaton", position)
        touched: list[int] = []
        for t in elems[first[splitter] : end[splitter]]:
            for s in preds[bounds[base + t] : bounds[base + t + 1]]:
                b = block_of[s]
                m = mid[b]
                p = loc[s]
                if p >= m:  # not marked yet: swap it to the end of the marked prefix
                    if m == first[b]:
                        touched.append(b)
                    other = elems[m]
                    elems[m] = s
                    loc[s] = m
                    elems[p] = other
                    loc[other] = p
                    mid[b] = m + 1
        for b in touched:
            lo, m, hi = first[b], mid[b], end[b]
            mid[b] = lo
            if m == hi:
                continue  # every state of b was marked: no split
            new = len(first)
            if m - lo <= hi - m:  # the marked part is the smaller half
                first.append(lo)
                end.append(m)
                first[b] = mid[b] = m
            else:
                first.append(m)
                end.append(hi)
                end[b] = m
            mid.append(first[new])
            mask = 0
            for s in elems[first[new] : end[new]]:
                block_of[s] = new
                mask |= in_mask[s]
            pending.append(mask)
            stack.append(new)
    return block_of, len(first)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_index=True, return_inverse=True)[1:]``, faster.

    Rows are grouped by a 64-bit hash (a sort of integers instead of row-wise lexicographic
    sorting of ``axis=0``); a hash collision is detected (some row differs from its group's
    first row) and answered by the exact ``axis=0`` form. Group order: by hash, not by row.
    """
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=rows.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        hashes = (rows.astype(np.uint64) * (weights | np.uint64(1))).sum(axis=1, dtype=np.uint64)
    _, first_index, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(rows, rows[first_index[inverse]]):
        _, first_index, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first_index, inverse


def merge_identical_states(
    dfa: ByteDFA,
    budget: CompileBudget,
    position: int | None = None,
    max_rounds: int = _MAX_MERGE_ROUNDS,
) -> ByteDFA:
    """Repeatedly merge states with identical rows and acceptance (a sound reduction).

    Merging states whose outgoing transitions and acceptance are equal never changes the
    language; iterating merges whole equivalent acyclic tails (suffix sharing), which is what
    large generated regexes mostly need. Not guaranteed minimal for equivalent cycles.
    """
    table = dfa.transitions
    accepting = dfa.is_accepting
    for _ in range(max_rounds):
        budget.check_time("reducing the automaton", position)
        signature = np.concatenate([table, accepting[:, None].astype(table.dtype)], axis=1)
        # keep the start state's group first: unique over rows, then map
        first_index, inverse = _unique_rows(signature)
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
