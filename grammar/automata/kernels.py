"""Numba kernels for automaton construction: subset construction, trimming, Hopcroft.

The Python side (:mod:`~formcast.grammar.automata.byte_dfa`, :mod:`~formcast.grammar.automata.minimizer`) flattens its structures into arrays
and calls these; the kernels hold the per-state loops. Jitted code cannot read the clock, so
:func:`determinize` stops after a work quantum (``PAUSED``) and the caller, having checked its
budget, runs it again with twice the quantum (at most twice the work in total).
"""

from __future__ import annotations

import numba
import numpy as np

# determinize statuses
DONE = 0
PAUSED = 1  # work quantum spent: check the clock, call again with a larger quantum
TOO_MANY_STATES = 2  # max_states reached
EMPTY = 3  # the language is empty


@numba.njit(cache=True, nogil=True)
def epsilon_closures(eps_start, eps_dst, is_kept, wanted):  # pragma: no cover - jitted
    """Per state of ``wanted``: the states reachable by epsilon edges (itself included) that
    are kept (have byte edges or are final), ascending. CSR ``(starts (W + 1,), states)``."""
    num_states = len(eps_start) - 1
    stamp = np.full(num_states, -1, np.int64)
    stack = np.empty(num_states, np.int64)
    starts = np.zeros(len(wanted) + 1, np.int64)
    out = np.empty(max(16, 2 * len(wanted)), np.int64)
    size = 0
    for w in range(len(wanted)):
        root = wanted[w]
        stamp[root] = w
        stack[0] = root
        depth = 1
        first = size
        while depth:
            depth -= 1
            s = stack[depth]
            if is_kept[s]:
                if size == len(out):
                    bigger = np.empty(2 * len(out), np.int64)
                    bigger[:size] = out[:size]
                    out = bigger
                out[size] = s
                size += 1
            for e in range(eps_start[s], eps_start[s + 1]):
                t = eps_dst[e]
                if stamp[t] != w:
                    stamp[t] = w
                    stack[depth] = t
                    depth += 1
        out[first:size] = np.sort(out[first:size])
        starts[w + 1] = size
    return starts, out[:size]


@numba.njit(cache=True, nogil=True)
def _hash_set(pool, lo, hi):  # pragma: no cover - jitted
    h = np.uint64(1469598103934665603)
    for i in range(lo, hi):
        h = (h ^ np.uint64(pool[i])) * np.uint64(1099511628211)
    return h


@numba.njit(cache=True, nogil=True)
def _find_or_add(pool, pool_len, set_start, num_sets, slots, cand, cand_len):  # pragma: no cover
    """Index of the set ``cand[:cand_len]`` (sorted) in the pool, or ``-1 - slot`` if absent
    (``slot``: the free hash slot where it belongs)."""
    mask = len(slots) - 1
    h = _hash_set(cand, 0, cand_len)
    slot = np.int64(h & np.uint64(mask))
    while True:
        k = slots[slot]
        if k < 0:
            return -1 - slot
        lo, hi = set_start[k], set_start[k + 1]
        if hi - lo == cand_len:
            same = True
            for i in range(cand_len):
                if pool[lo + i] != cand[i]:
                    same = False
                    break
            if same:
                return k
        slot = (slot + 1) & mask


@numba.njit(cache=True, nogil=True, inline="always")
def _sort_small(values, size):  # pragma: no cover - jitted
    """Sort ``values[:size]`` in place: insertion sort for a few values, else numpy's."""
    if size > 16:
        values[:size].sort()
        return
    for i in range(1, size):
        v = values[i]
        j = i - 1
        while j >= 0 and values[j] > v:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = v


@numba.njit(cache=True, nogil=True, inline="always")
def _class_offsets(classes_met, num_met, count, class_start, fill):  # pragma: no cover - jitted
    """Lay out the buckets of the classes met, in the order of ``classes_met[:num_met]``:
    class ``c``'s ``count[c]`` items go to ``class_start[c]`` on (``fill[c]``: the next free
    slot, the start until items are placed)."""
    offset = 0
    for m in range(num_met):
        c = classes_met[m]
        class_start[c] = offset
        fill[c] = offset
        offset += count[c]


@numba.njit(cache=True, nogil=True)
def determinize(
    counts, edges, eps_counts, eps_dst, start, final, max_states, max_work
):  # pragma: no cover - jitted
    """Subset construction of a byte NFA, then trimming (see :func:`trim_order`).

    NFA state ``s`` has ``counts[s]`` byte edges, rows ``(lo, hi, target)`` of ``edges``
    ``(E, 3)`` in state order, and ``eps_counts[s]`` epsilon targets in ``eps_dst``.

    Returns ``(status, transitions (M, K) int32, is_accepting (M,), byte_to_class (256,) uint8,
    subset)``: ``status`` is DONE, PAUSED (more than ``max_work`` steps: the caller checks the
    clock and calls again with a larger quantum), TOO_MANY_STATES or EMPTY (the start state
    cannot reach acceptance); ``subset`` is the NFA-state set being expanded when it stopped.
    """
    num_nfa = len(counts)
    empty_table = np.empty((0, 1), np.int32)
    empty_flags = np.empty(0, np.bool_)
    # byte classes: bytes no edge tells apart
    is_boundary = np.zeros(257, np.bool_)
    is_boundary[0] = True
    for e in range(len(edges)):
        is_boundary[edges[e, 0]] = True
        is_boundary[edges[e, 1] + 1] = True
    classes = np.empty(256, np.uint8)
    num_classes = -1
    for b in range(256):
        if is_boundary[b]:
            num_classes += 1
        classes[b] = num_classes
    num_classes += 1
    # moves per NFA state: one (class, target) per class an edge spans
    move_start = np.zeros(num_nfa + 1, np.int64)
    e = 0
    for s in range(num_nfa):
        for _ in range(counts[s]):
            move_start[s + 1] += classes[edges[e, 1]] - classes[edges[e, 0]] + 1
            e += 1
    for s in range(num_nfa):
        move_start[s + 1] += move_start[s]
    move_cls = np.empty(move_start[num_nfa], np.int64)
    move_dst = np.empty(move_start[num_nfa], np.int64)
    e = 0
    j = 0
    for s in range(num_nfa):
        for _ in range(counts[s]):
            for c in range(classes[edges[e, 0]], classes[edges[e, 1]] + 1):
                move_cls[j] = c
                move_dst[j] = edges[e, 2]
                j += 1
            e += 1
    # epsilon closures (kept states only) of the start and of every move target
    eps_start = np.zeros(num_nfa + 1, np.int64)
    for s in range(num_nfa):
        eps_start[s + 1] = eps_start[s] + eps_counts[s]
    is_kept = counts > 0
    is_kept[final] = True
    is_wanted = np.zeros(num_nfa, np.bool_)
    is_wanted[start] = True
    for j in range(len(move_dst)):
        is_wanted[move_dst[j]] = True
    wanted = np.flatnonzero(is_wanted)
    clos_start, clos_states = epsilon_closures(eps_start, eps_dst, is_kept, wanted)
    clos_of = np.full(num_nfa, -1, np.int64)
    for w in range(len(wanted)):
        clos_of[wanted[w]] = w
    # subset construction: DFA state i is pool[set_start[i]:set_start[i + 1]] (sorted)
    w0 = clos_of[start]
    pool = np.empty(max(1024, 4 * (clos_start[w0 + 1] - clos_start[w0])), np.int64)
    pool_len = clos_start[w0 + 1] - clos_start[w0]
    pool[:pool_len] = clos_states[clos_start[w0] : clos_start[w0 + 1]]
    capacity = 64
    set_start = np.zeros(capacity + 1, np.int64)
    set_start[1] = pool_len
    trans = np.empty(capacity * num_classes, np.int32)
    num_sets = 1
    slots = np.full(64, -1, np.int64)
    slots[-1 - _find_or_add(pool, pool_len, set_start, 0, slots, pool, pool_len)] = 0
    stamp = np.full(num_nfa, -1, np.int64)
    count = np.zeros(num_classes, np.int64)  # zero between sets
    class_start = np.empty(num_classes, np.int64)
    fill = np.empty(num_classes, np.int64)
    classes_met = np.empty(num_classes, np.int64)
    targets = np.empty(64, np.int64)
    cand = np.empty(num_nfa, np.int64)
    work = 0
    k = 0
    while k < num_sets:
        lo, hi = set_start[k], set_start[k + 1]
        if work > max_work:
            return PAUSED, empty_table, empty_flags, classes, pool[lo:hi].copy()
        # bucket the moves of the set's NFA states by class, over the classes they carry
        # (no O(classes) pass per set but the row's fill), taken in ascending class order
        num_met = 0
        num_moves = 0
        for i in range(lo, hi):
            s = pool[i]
            for j in range(move_start[s], move_start[s + 1]):
                c = move_cls[j]
                if count[c] == 0:
                    classes_met[num_met] = c
                    num_met += 1
                count[c] += 1
            num_moves += move_start[s + 1] - move_start[s]
        _sort_small(classes_met, num_met)
        if num_moves > len(targets):
            targets = np.empty(2 * num_moves, np.int64)
        _class_offsets(classes_met, num_met, count, class_start, fill)
        for i in range(lo, hi):
            s = pool[i]
            for j in range(move_start[s], move_start[s + 1]):
                c = move_cls[j]
                targets[fill[c]] = move_dst[j]
                fill[c] += 1
        work += num_moves + (hi - lo)
        row = k * num_classes
        trans[row : row + num_classes] = -1
        prev_lo = prev_num = prev_found = -1
        for m in range(num_met):
            c = classes_met[m]
            num_targets = count[c]
            count[c] = 0
            # the same targets as the class before (in the same order): the same subset (a
            # string state's character class spans most bytes, each class read alike)
            if num_targets == prev_num:
                is_same = True
                for j in range(num_targets):
                    if targets[class_start[c] + j] != targets[prev_lo + j]:
                        is_same = False
                        break
                if is_same:
                    trans[row + c] = prev_found
                    work += 1
                    continue
            prev_lo, prev_num = class_start[c], num_targets
            # union of the targets' closures, deduplicated by a stamp per (state, class)
            tag = row + c
            size = 0
            for j in range(class_start[c], class_start[c] + num_targets):
                w = clos_of[targets[j]]
                for q in range(clos_start[w], clos_start[w + 1]):
                    s = clos_states[q]
                    if stamp[s] != tag:
                        stamp[s] = tag
                        cand[size] = s
                        size += 1
            work += size
            if num_targets > 1:
                cand[:size].sort()
            found = _find_or_add(pool, pool_len, set_start, num_sets, slots, cand, size)
            if found < 0:
                if num_sets >= max_states:
                    return TOO_MANY_STATES, empty_table, empty_flags, classes, pool[lo:hi].copy()
                if num_sets + 2 > len(set_start):
                    capacity *= 2
                    grown = np.zeros(capacity + 1, np.int64)
                    grown[: num_sets + 1] = set_start[: num_sets + 1]
                    set_start = grown
                    grown_trans = np.empty(capacity * num_classes, np.int32)
                    grown_trans[: num_sets * num_classes] = trans[: num_sets * num_classes]
                    trans = grown_trans
                if pool_len + size > len(pool):
                    grown_pool = np.empty(2 * len(pool) + size, np.int64)
                    grown_pool[:pool_len] = pool[:pool_len]
                    pool = grown_pool
                pool[pool_len : pool_len + size] = cand[:size]
                pool_len += size
                slots[-1 - found] = num_sets
                found = num_sets
                num_sets += 1
                set_start[num_sets] = pool_len
                if 2 * num_sets > len(slots):  # keep the load factor below 1/2
                    slots = np.full(2 * len(slots), -1, np.int64)
                    for i in range(num_sets):
                        n_i = set_start[i + 1] - set_start[i]
                        again = _find_or_add(
                            pool, pool_len, set_start, i, slots, pool[set_start[i] :], n_i
                        )
                        slots[-1 - again] = i
            trans[row + c] = found
            prev_found = found
        k += 1
    table = trans[: num_sets * num_classes].reshape(num_sets, num_classes)
    is_accepting = np.zeros(num_sets, np.bool_)
    for i in range(num_sets):
        for q in range(set_start[i], set_start[i + 1]):
            if pool[q] == final:
                is_accepting[i] = True
                break
    new_id, order = trim_order(table, is_accepting)
    if len(order) == 0:
        return EMPTY, empty_table, empty_flags, classes, pool[:0].copy()
    return DONE, renumber(table, new_id, order), is_accepting[order], classes, pool[:0].copy()


@numba.njit(cache=True, nogil=True)
def _in_edges(table):  # pragma: no cover - jitted
    """The reverse edges of a ``(N, K)`` table (``-1`` = none) in CSR form by target:
    ``(in_start (N + 1,), pred_cls, pred_src)``; target ``t``'s edges are
    ``in_start[t]:in_start[t + 1]`` (by source; the table is read row by row)."""
    num_states, num_classes = table.shape
    in_start = np.zeros(num_states + 1, np.int64)
    for s in range(num_states):
        for c in range(num_classes):
            t = table[s, c]
            if t >= 0:
                in_start[t + 1] += 1
    for t in range(num_states):
        in_start[t + 1] += in_start[t]
    num_edges = in_start[num_states]
    pred_cls = np.empty(num_edges, np.int64)
    pred_src = np.empty(num_edges, np.int64)
    fill = in_start[:num_states].copy()
    for s in range(num_states):
        for c in range(num_classes):
            t = table[s, c]
            if t >= 0:
                pred_cls[fill[t]] = c
                pred_src[fill[t]] = s
                fill[t] += 1
    return in_start, pred_cls, pred_src


@numba.njit(cache=True, nogil=True)
def trim_order(transitions, is_accepting):  # pragma: no cover - jitted
    """States that can reach acceptance, in BFS order from state 0 (level by level, ascending
    within a level): ``(new_id (N,) with -1 for dropped states, order (M,))``; ``M = 0`` if
    state 0 cannot reach acceptance. :func:`renumber` builds the trimmed table."""
    num_states, num_classes = transitions.shape
    pred_count, _, preds = _in_edges(transitions)
    is_alive = is_accepting.copy()
    stack = np.empty(num_states, np.int64)
    depth = 0
    for s in range(num_states):
        if is_alive[s]:
            stack[depth] = s
            depth += 1
    while depth:
        depth -= 1
        t = stack[depth]
        for q in range(pred_count[t], pred_count[t + 1]):
            s = preds[q]
            if not is_alive[s]:
                is_alive[s] = True
                stack[depth] = s
                depth += 1
    new_id = np.full(num_states, -1, np.int64)
    if not is_alive[0]:
        return new_id, np.empty(0, np.int64)
    order = np.empty(num_states, np.int64)
    order[0] = 0
    new_id[0] = 0
    level_lo, size = 0, 1
    while level_lo < size:
        level_hi = size
        for i in range(level_lo, level_hi):
            s = order[i]
            for c in range(num_classes):
                t = transitions[s, c]
                if t >= 0 and new_id[t] == -1 and is_alive[t]:
                    new_id[t] = -2  # found on this level
                    order[size] = t
                    size += 1
        order[level_hi:size] = np.sort(order[level_hi:size])
        for i in range(level_hi, size):
            new_id[order[i]] = i
        level_lo = level_hi
    return new_id, order[:size]


@numba.njit(cache=True, nogil=True)
def renumber(transitions, new_id, order):  # pragma: no cover - jitted
    """``(len(order), K)`` int32: the rows of ``order``, targets mapped through ``new_id``
    (``-1`` stays ``-1``; a dropped target becomes ``-1``)."""
    num_classes = transitions.shape[1]
    out = np.empty((len(order), num_classes), np.int32)
    for i in range(len(order)):
        s = order[i]
        for c in range(num_classes):
            t = transitions[s, c]
            out[i, c] = -1 if t < 0 else new_id[t]
    return out


@numba.njit(cache=True, nogil=True)
def hopcroft(table, is_accepting):  # pragma: no cover - jitted
    """Coarsest partition of the states, refining {accepting, rejecting}, stable under every
    class of the partial DFA ``table`` (``-1`` = no move): ``(block id per state, blocks)``.

    Blocks are contiguous slices ``first[b]:end[b]`` of the permutation ``elems``; states of
    ``b`` marked by the current splitter are moved to ``[first[b], mid[b])``. A block on the
    stack is pending for every class (a new block is pushed for all of them, and a popped one
    is done with all of them), so the stack alone says what is pending. A popped splitter's
    in-edges are gathered once (``O(in-edges)``) and bucketed by the classes they carry (only
    those: no ``O(classes)`` pass per splitter), then each class splits the blocks it marks.
    Splitting by a block that has meanwhile been split is sound (a union of blocks) and, with
    the halves pushed as below, complete. A split keeps the larger half under the old id (on
    the stack if the old block was) and the smaller half, the new block, is pushed (Hopcroft's
    rule). The partition is unique, whatever order the classes are taken in.
    """
    num_states, num_classes = table.shape
    in_start, pred_cls, pred_src = _in_edges(table)
    num_edges = len(pred_src)
    elems = np.empty(num_states, np.int64)
    loc = np.empty(num_states, np.int64)
    block_of = np.zeros(num_states, np.int64)
    first = np.empty(num_states + 1, np.int64)
    end = np.empty(num_states + 1, np.int64)
    mid = np.empty(num_states + 1, np.int64)
    num_blocks = 0
    size = 0
    for want in (True, False):
        lo = size
        for s in range(num_states):
            if is_accepting[s] == want:
                elems[size] = s
                loc[s] = size
                block_of[s] = num_blocks
                size += 1
        if size > lo:
            first[num_blocks] = lo
            mid[num_blocks] = lo
            end[num_blocks] = size
            num_blocks += 1
    stack = np.empty(num_states + 1, np.int64)
    depth = 0
    for b in range(num_blocks):
        stack[depth] = b
        depth += 1
    count = np.zeros(num_classes, np.int64)  # zero between splitters
    class_start = np.empty(num_classes, np.int64)
    fill_c = np.empty(num_classes, np.int64)
    classes_met = np.empty(num_classes, np.int64)
    bucket = np.empty(num_edges, np.int64)
    touched = np.empty(num_states + 1, np.int64)
    while depth:
        depth -= 1
        splitter = stack[depth]
        # the splitter's in-edges, bucketed by class (the classes met, in the order met)
        num_met = 0
        for i in range(first[splitter], end[splitter]):
            t = elems[i]
            for e in range(in_start[t], in_start[t + 1]):
                c = pred_cls[e]
                if count[c] == 0:
                    classes_met[num_met] = c
                    num_met += 1
                count[c] += 1
        _class_offsets(classes_met, num_met, count, class_start, fill_c)
        for i in range(first[splitter], end[splitter]):
            t = elems[i]
            for e in range(in_start[t], in_start[t + 1]):
                c = pred_cls[e]
                bucket[fill_c[c]] = pred_src[e]
                fill_c[c] += 1
        for k in range(num_met):
            c = classes_met[k]
            count[c] = 0
            num_touched = 0
            for q in range(class_start[c], fill_c[c]):
                s = bucket[q]
                b = block_of[s]
                m = mid[b]
                p = loc[s]
                if p >= m:  # not marked yet: swap it to the end of the marked prefix
                    if m == first[b]:
                        touched[num_touched] = b
                        num_touched += 1
                    other = elems[m]
                    elems[m] = s
                    loc[s] = m
                    elems[p] = other
                    loc[other] = p
                    mid[b] = m + 1
            for i in range(num_touched):
                b = touched[i]
                lo, m, hi = first[b], mid[b], end[b]
                mid[b] = lo
                if m == hi:
                    continue  # every state of b was marked: no split
                new = num_blocks
                num_blocks += 1
                if m - lo <= hi - m:  # the marked part is the smaller half
                    first[new] = lo
                    end[new] = m
                    first[b] = m
                    mid[b] = m
                else:
                    first[new] = m
                    end[new] = hi
                    end[b] = m
                mid[new] = first[new]
                for j in range(first[new], end[new]):
                    block_of[elems[j]] = new
                stack[depth] = new  # (b stays where it is, on the stack or not)
                depth += 1
    return block_of, num_blocks


@numba.njit(cache=True, nogil=True)
def quotient(table, is_accepting, block_of, num_blocks):  # pragma: no cover - jitted
    """The quotient of a trimmed partial DFA ``table`` (``(N, K)``, ``-1`` = no move) by the
    blocks ``block_of`` of :func:`hopcroft`, its blocks numbered breadth first from the block of
    state 0 in the order they are met (each block's moves by ascending class): ``(transitions
    (M, K) int32, is_accepting (M,), M)``. That numbering is one :func:`trim_order` keeps (it
    meets the blocks in the same order), so the result is trimmed as it is. ``M < num_blocks``
    only where a block is unreachable (an untrimmed input: the caller trims it instead). Every
    block of a trimmed DFA reaches acceptance (its states do), so none is dropped for that."""
    num_states, num_classes = table.shape
    representative = np.full(num_blocks, -1, np.int64)  # the smallest state of each block
    for s in range(num_states - 1, -1, -1):
        representative[block_of[s]] = s
    new_id = np.full(num_blocks, -1, np.int64)
    order = np.empty(num_blocks, np.int64)
    order[0] = block_of[0]
    new_id[block_of[0]] = 0
    size = 1
    i = 0
    while i < size:  # (order grows while read: breadth first)
        s = representative[order[i]]
        for c in range(num_classes):
            t = table[s, c]
            if t >= 0:
                b = block_of[t]
                if new_id[b] < 0:
                    new_id[b] = size
                    order[size] = b
                    size += 1
        i += 1
    out = np.empty((size, num_classes), np.int32)
    accepting = np.empty(size, np.bool_)
    for i in range(size):
        s = representative[order[i]]
        accepting[i] = is_accepting[s]
        for c in range(num_classes):
            t = table[s, c]
            out[i, c] = -1 if t < 0 else new_id[block_of[t]]
    return out, accepting, size


@numba.njit(cache=True, nogil=True)
def is_acyclic(transitions):  # pragma: no cover - jitted
    """True if the ``(N, K)`` table (``-1`` = dead) has no cycle (self-loops included): Kahn's
    algorithm over its edges, a parallel edge counted once per class that carries it (it
    is decremented as many times), O(N K)."""
    num_states, num_classes = transitions.shape
    indegree = np.zeros(num_states, np.int64)
    for s in range(num_states):
        for c in range(num_classes):
            t = transitions[s, c]
            if t >= 0:
                indegree[t] += 1
    ready = np.empty(num_states, np.int64)
    num_ready = 0
    for s in range(num_states):
        if indegree[s] == 0:
            ready[num_ready] = s
            num_ready += 1
    num_done = 0
    while num_ready:
        num_ready -= 1
        s = ready[num_ready]
        num_done += 1
        for c in range(num_classes):
            t = transitions[s, c]
            if t >= 0:
                indegree[t] -= 1
                if indegree[t] == 0:
                    ready[num_ready] = t
                    num_ready += 1
    return num_done == num_states


@numba.njit(cache=True, nogil=True)
def product_rows(tables, offsets, max_states):  # pragma: no cover - jitted
    """Breadth-first product of ``k`` complete DFAs over the same classes, from the tuple of
    start states ``(0, ..., 0)``.

    DFA ``i``'s table is rows ``offsets[i]:offsets[i + 1]`` of ``tables`` ``(sum n_i, C)``
    (local state ids). Returns ``(status, rows (M, C) int32, tuples (M, k) int32)``: tuple
    ``m``'s successor under class ``c`` is tuple ``rows[m, c]``, tuples numbered in order of
    discovery; ``status`` 1 (and nothing built) when more than ``max_states`` tuples are
    reachable. Tuples are found through an open-addressing table of their FNV-1a hashes
    (load <= 1/2).
    """
    k = len(offsets) - 1
    num_classes = tables.shape[1]
    size = 1
    while size < 2 * max_states + 2:
        size *= 2
    slots = np.full(size, -1, np.int64)
    tuples = np.empty((max_states, k), np.int32)
    rows = np.empty((max_states, num_classes), np.int32)
    cand = np.empty(k, np.int32)
    prime = np.uint64(1099511628211)
    for j in range(k):
        tuples[0, j] = 0
    h = np.uint64(14695981039346656037)
    for _ in range(k):
        h = (h ^ np.uint64(0)) * prime
    slots[np.int64(h & np.uint64(size - 1))] = 0
    num = 1
    m = 0
    while m < num:
        for c in range(num_classes):
            h = np.uint64(14695981039346656037)
            for j in range(k):
                cand[j] = tables[offsets[j] + tuples[m, j], c]
                h = (h ^ np.uint64(cand[j])) * prime
            slot = np.int64(h & np.uint64(size - 1))
            found = -1
            while True:
                t = slots[slot]
                if t < 0:
                    break
                same = True
                for j in range(k):
                    if tuples[t, j] != cand[j]:
                        same = False
                        break
                if same:
                    found = t
                    break
                slot = (slot + 1) & (size - 1)
            if found < 0:
                if num == max_states:
                    return 1, rows[:0], tuples[:0]
                found = num
                tuples[num, :] = cand
                slots[slot] = num
                num += 1
            rows[m, c] = found
        m += 1
    return 0, rows[:num], tuples[:num]


@numba.njit(cache=True, nogil=True)
def pair_product(table_a, table_b, max_pairs):  # pragma: no cover - jitted
    """Breadth-first product of two DFAs over the same classes (``(S_a, C)``, ``(S_b, C)``
    int32, ``-1`` = no move), from the pair of start states ``(0, 0)``, over live pairs only:
    a pair moves on class ``c`` iff both sides do. Returns ``(status, rows (M, C) int32,
    left (M,) int32, right (M,) int32)``: pair ``m`` is ``(left[m], right[m])``, its
    successor under ``c`` is pair ``rows[m, c]`` (``-1``: a side has no move), pairs numbered
    in order of discovery; ``status`` 1 (nothing built) when more than ``max_pairs`` pairs are
    reachable. Pairs are found by key ``p * S_b + q`` in an open-addressing table (load <=
    1/2)."""
    num_b = np.int64(table_b.shape[0])
    num_classes = table_a.shape[1]
    size = 1
    while size < 2 * max_pairs + 2:
        size *= 2
    mask = size - 1
    slot_key = np.full(size, -1, np.int64)
    slot_pair = np.empty(size, np.int32)
    rows = np.empty((max_pairs, num_classes), np.int32)
    left = np.empty(max_pairs, np.int32)
    right = np.empty(max_pairs, np.int32)
    left[0], right[0] = 0, 0
    slot_key[0] = 0  # key 0 * S_b + 0 hashes to slot 0
    slot_pair[0] = 0
    num = 1
    m = 0
    while m < num:
        p, q = left[m], right[m]
        for c in range(num_classes):
            p2, q2 = table_a[p, c], table_b[q, c]
            if p2 < 0 or q2 < 0:
                rows[m, c] = -1
                continue
            key = np.int64(p2) * num_b + q2
            j = (key * np.int64(0x9E3779B1)) & mask  # multiplicative hash: keys are dense
            while slot_key[j] >= 0 and slot_key[j] != key:
                j = (j + 1) & mask
            if slot_key[j] < 0:
                if num == max_pairs:
                    return 1, rows[:0], left[:0], right[:0]
                slot_key[j] = key
                slot_pair[j] = num
                left[num], right[num] = p2, q2
                num += 1
            rows[m, c] = slot_pair[j]
        m += 1
    return 0, rows[:num], left[:num], right[:num]
