"""Vocabulary walks of a byte transition table over the token trie and over token suffixes.

Numba kernels shared by both lexer paths (:mod:`formcast.grammar.cfg.walks.dfa_walk`, one terminal's
DFA; :mod:`formcast.grammar.cfg.lexer`, interned lexer states). Both walk an int32 table
(``-1`` = dead) over byte classes (the successor of ``s`` on byte ``b`` is
``table[s, classes[b]]``: a terminal DFA's own ``(S, K)`` table, or a lexer's ``(S, 256)``
rows with the identity classes) and record a *split* where the state read so far is marked
``is_split`` (a terminal completes) and the next byte ``b`` has ``follow[b]`` (a following
lexeme may start with it). A walk returns

- ``within_row``: ``(num_words,)`` int32 packed mask of the tokens whose every byte stays alive;
- split records ``(row, offset, state)`` (int64 arrays): the token of table row ``row`` splits
  before byte ``offset`` in state ``state`` (at least one byte read). Records of within tokens
  are dropped (such a token is allowed anyway).

:func:`walk_trie` reads every token (of the chosen first bytes) from one state: a DFS over the
vocabulary trie (:func:`trie_nodes`), one step per alive token *prefix*. A subtree whose bytes
all stay on the state's uniform chain for its whole height (a string's inside) is settled as
one row range (a precomputed packed row for large subtrees), and so is one whose bytes are
all printable ASCII text read from a state where every such string stays alive (a string that
searches for an unanchored pattern: ``index.kernels.closed_bytes``); one whose bytes stay on it for
its first ``L`` levels only (a ``{0,n}`` counter with fewer steps left than the subtree is
high) is settled down to ``L`` levels from the token lengths, and the walk jumps to the nodes
``L`` levels down (:func:`chain_coverage`). :func:`walk_suffixes` reads given token suffixes
(a split group's records), byte by byte. :func:`sort_records` puts records in the canonical
order of :class:`~formcast.grammar.cfg.lexer.SplitGroup` (first suffix byte, row, offset).
"""

from __future__ import annotations

import weakref

import numba
import numpy as np

from formcast.grammar import caches
from formcast.grammar.automata import kernels as automata_kernels
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.index import kernels as index_kernels
from formcast.grammar.index.token_index import VocabTable

# columns of the packed trie node table (:func:`trie_nodes`)
_CHILD_LO, _CHILD_HI, _ROW_LO, _ROW_HI, _TOKEN_LO, _TOKEN_HI, _HEIGHT_BYTE, _DENSE = range(8)


@numba.njit(cache=True, nogil=True, inline="always")
def _set_bit(words, token_id):  # pragma: no cover - jitted
    words[token_id >> 5] |= np.uint32(1) << np.uint32(token_id & 31)


@numba.njit(cache=True, nogil=True, inline="always")
def _has_bit(words, token_id):  # pragma: no cover - jitted
    return (words[token_id >> 5] >> np.uint32(token_id & 31)) & np.uint32(1)


@numba.njit(cache=True, nogil=True)
def _grow(buffer, used):  # pragma: no cover - jitted
    bigger = np.empty((2 * buffer.shape[0], buffer.shape[1]), buffer.dtype)
    bigger[:used] = buffer[:used]
    return bigger


@numba.njit(cache=True, nogil=True, inline="always")
def _push_split(splits, num_splits, where, offset, tag):  # pragma: no cover - jitted
    """Append the split record ``(where, offset, tag)``; returns ``(splits, num_splits)``
    (the array may have grown)."""
    if num_splits == splits.shape[0]:
        splits = _grow(splits, num_splits)
    splits[num_splits, 0], splits[num_splits, 1], splits[num_splits, 2] = where, offset, tag
    return splits, num_splits + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _is_subset(below, c, covered, level, q):  # pragma: no cover - jitted
    return (
        below[c, 0] & ~covered[level, q, 0]
        | below[c, 1] & ~covered[level, q, 1]
        | below[c, 2] & ~covered[level, q, 2]
        | below[c, 3] & ~covered[level, q, 3]
    ) == 0


@numba.njit(cache=True, nogil=True)
def _chain_jump(below, c, covered, top, q, uniform, is_split, follow_bits):  # pragma: no cover
    """The levels (``>= 2``, else 0) below trie node ``c`` (reached in state ``q``) that every
    prefix reads along ``q``'s uniform chain, through states that do not split: the largest
    ``L < top`` with ``below[c]`` inside ``covered[L, q]``, cut at the first splitting state.
    No cut if no byte below ``c`` is in ``follow_bits`` (``(4,)`` uint64): a split there
    would record nothing (a string's inside: every position completes the chain, but only a
    closing ``"`` may follow, and no token below ``c`` holds one)."""
    lo, hi, best = 1, top - 1, 0
    while lo <= hi:  # covered[L, q] shrinks as L grows
        mid = (lo + hi) // 2
        if _is_subset(below, c, covered, mid, q):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if not _meets_below(below, c, follow_bits):
        return best if best >= 2 else 0
    steps, s = 0, q
    while steps < best and not is_split[s]:
        s = uniform[s]
        steps += 1
    return steps if steps >= 2 else 0


@numba.njit(cache=True, nogil=True)
def _is_settled(below, c, live, target, is_split, follow_bits):  # pragma: no cover - jitted
    """True if no byte below trie node ``c`` can be read from ``target`` and none could be
    recorded as a split there (``target`` does not split, or no follow byte lies below
    ``c``): the tokens below ``c`` that are longer than the jump end there, dead, recording
    nothing (a bounded string's last position: nothing is read after its last character)."""
    if _meets_below(below, c, live[target]):
        return False
    return not is_split[target] or not _meets_below(below, c, follow_bits)


@numba.njit(cache=True, nogil=True)
def _meets_below(below, c, bits):  # pragma: no cover - jitted
    """True if some byte below trie node ``c`` is in bit set ``bits`` (``(4,)`` uint64)."""
    return (
        below[c, 0] & bits[0]
        | below[c, 1] & bits[1]
        | below[c, 2] & bits[2]
        | below[c, 3] & bits[3]
    ) != 0


@numba.njit(cache=True, nogil=True)
def _byte_bits(marked):  # pragma: no cover - jitted
    """``(4,)`` uint64 bit set of the bytes ``b < 256`` with ``marked[b]``."""
    bits = np.zeros(4, np.uint64)
    for b in range(256):
        if marked[b]:
            bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return bits


@numba.njit(cache=True, nogil=True)
def _first_at_least(values, lo, hi, target):  # pragma: no cover - jitted
    """The first index in ``[lo, hi)`` with ``values[i] >= target`` (ascending), or ``hi``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _walk_output(words, splits, num_splits, nodes, token_ids, by_node):  # pragma: no cover
    """A walk's result ``(within_row, split_rows, split_steps, split_tags)``: ``words`` as an
    int32 row, and from ``splits[:num_splits]`` rows ``(trie node or row, offset, tag)`` the
    int64 records whose token is not within (``words``); with
    ``by_node`` each split stands for every token row below its trie node (trie walks), else
    for its own row (record walks). The tag is a state or a terminal."""
    count = 0
    for k in range(num_splits):
        lo, hi = splits[k, 0], splits[k, 0] + 1
        if by_node:
            lo, hi = nodes[splits[k, 0], _ROW_LO], nodes[splits[k, 0], _ROW_HI]
        for r in range(lo, hi):
            count += not _has_bit(words, token_ids[r])
    out_rows = np.empty(count, np.int64)
    out_steps = np.empty(count, np.int64)
    out_tags = np.empty(count, np.int64)
    count = 0
    for k in range(num_splits):
        lo, hi = splits[k, 0], splits[k, 0] + 1
        if by_node:
            lo, hi = nodes[splits[k, 0], _ROW_LO], nodes[splits[k, 0], _ROW_HI]
        for r in range(lo, hi):
            if not _has_bit(words, token_ids[r]):
                out_rows[count], out_steps[count], out_tags[count] = r, splits[k, 1], splits[k, 2]
                count += 1
    return words.view(np.int32), out_rows, out_steps, out_tags


@numba.njit(cache=True, nogil=True)
def _trie_walk(
    table,
    classes,
    start,
    first_bytes,
    is_split,
    follow,
    covered,
    uniform,
    closed,
    nodes,
    below,
    dense,
    level_start,
    row_lo,
    lengths,
    token_rows,
    token_ids,
    num_words,
):  # pragma: no cover - jitted
    """Every token whose first byte is marked in ``first_bytes`` (``(256,)`` bool), read from
    ``start``; ``covered``, ``uniform``, ``closed``: :func:`chain_coverage`; ``nodes``, ``below``,
    ``dense``, ``level_start``: :func:`trie_nodes`. Returns ``(within_row, split_rows,
    split_steps, split_states)`` (module docstring).

    A subtree whose bytes are all on ``q``'s uniform chain for its whole height is settled as
    a row range. If they are for its first ``L < height`` levels only (a ``{0,n}`` counter
    with fewer than ``height`` steps left), every prefix in those levels reaches the chain's
    state at its depth, whatever its bytes: the tokens of at most ``L`` more bytes are within
    (read off the token lengths), and the walk jumps to the nodes ``L`` levels down, in state
    ``u^L(q)`` (if no state on the way splits), instead of visiting every node in between."""
    top = covered.shape[0] - 1
    has_coverage = covered.shape[1] > 0
    live = covered[0]  # (S, 4) the bytes each state can read
    follow_bits = _byte_bits(follow)
    words = np.zeros(num_words, np.uint32)
    stack = np.empty((1024, 3), np.int64)  # (trie node, state after its prefix, depth)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, start, 0
    size = 1
    splits = np.empty((64, 3), np.int64)  # (trie node, depth, state): the node's subtree splits
    num_splits = 0
    while size:
        size -= 1
        node, s, depth = stack[size, 0], stack[size, 1], stack[size, 2]
        splits_here = depth > 0 and is_split[s]
        if size + 256 > stack.shape[0]:  # room for every child
            stack = _grow(stack, size)
        for c in range(nodes[node, _CHILD_LO], nodes[node, _CHILD_HI]):
            height_byte = nodes[c, _HEIGHT_BYTE]
            b = height_byte >> 32
            if depth == 0 and not first_bytes[b]:
                continue
            if splits_here and follow[b]:
                splits, num_splits = _push_split(splits, num_splits, c, depth, s)
            q = table[s, classes[b]]
            if q < 0:
                continue
            h = height_byte & 0xFFFFFFFF
            if h and has_coverage:
                lv = min(h, top)
                if _is_subset(below, c, covered, lv, q) or _is_subset(below, c, closed, 0, q):
                    # the whole subtree stays alive (on q's chain, or over its closed bytes)
                    d = nodes[c, _DENSE]
                    if d >= 0:  # a large subtree: OR its packed row
                        for w in range(num_words):
                            words[w] |= dense[d, w]
                    else:
                        for r in range(nodes[c, _ROW_LO], nodes[c, _ROW_HI]):
                            _set_bit(words, token_ids[r])
                    continue
                jump = _chain_jump(below, c, covered, lv, q, uniform, is_split, follow_bits)
                if jump:  # every prefix of 1..jump more bytes follows the chain
                    level = depth + 1 + jump
                    target = q
                    for _ in range(jump):
                        target = uniform[target]
                    lo, hi = nodes[c, _ROW_LO], nodes[c, _ROW_HI]
                    for r in range(lo, hi):
                        if lengths[r] <= level:
                            _set_bit(words, token_ids[r])
                    if _is_settled(below, c, live, target, is_split, follow_bits):
                        continue  # the longer tokens die at ``target`` without a record
                    first = _first_at_least(row_lo, level_start[level], level_start[level + 1], lo)
                    last = _first_at_least(row_lo, first, level_start[level + 1], hi)
                    if size + (last - first) + 256 > stack.shape[0]:
                        stack = _grow(stack, size)
                        while size + (last - first) + 256 > stack.shape[0]:
                            stack = _grow(stack, size)
                    for n in range(first, last):
                        stack[size, 0], stack[size, 1], stack[size, 2] = n, target, level
                        size += 1
                    continue
            for k in range(nodes[c, _TOKEN_LO], nodes[c, _TOKEN_HI]):
                r = token_rows[k]
                _set_bit(words, token_ids[r])
            if h and (
                is_split[q] or not has_coverage or _meets_below(below, c, live[q])
            ):  # (no byte below the node is live in q and q does not split: all die there)
                stack[size, 0], stack[size, 1], stack[size, 2] = c, q, depth + 1
                size += 1
    return _walk_output(words, splits, num_splits, nodes, token_ids, True)


@numba.njit(cache=True, nogil=True)
def _record_walk(
    table,
    classes,
    start,
    rows,
    steps,
    first_byte_bounds,
    is_split,
    follow,
    matrix,
    lengths,
    token_ids,
    num_words,
    nodes,
):  # pragma: no cover - jitted
    """Read records ``(rows[k], steps[k])`` (the bytes of table row ``rows[k]`` from offset
    ``steps[k]`` on, never empty; records sorted by their first byte, ``first_byte_bounds``
    ``(257,)``) from ``start``. Returns ``(within_row, split_rows, split_steps,
    split_states)`` (module docstring)."""
    words = np.zeros(num_words, np.uint32)
    splits = np.empty((64, 3), np.int64)  # (row, offset, state)
    num_splits = 0
    for b in range(256):
        lo, hi = first_byte_bounds[b], first_byte_bounds[b + 1]
        if lo == hi:
            continue
        first = table[start, classes[b]]
        if first < 0:
            continue
        for k in range(lo, hi):
            row = rows[k]
            end = lengths[row]
            s = first
            pos = steps[k] + 1
            while pos < end:
                byte = matrix[row, pos]
                if is_split[s] and follow[byte]:
                    splits, num_splits = _push_split(splits, num_splits, row, pos, s)
                s = table[s, classes[byte]]
                if s < 0:
                    break
                pos += 1
            if s >= 0:
                _set_bit(words, token_ids[row])
    return _walk_output(words, splits, num_splits, nodes, token_ids, False)


@numba.njit(cache=True, nogil=True, inline="always")
def _advance_set(
    cells, row_start, classes, term_of, states, lo, n, b, out, used
):  # pragma: no cover
    """Write the distinct live successors on byte ``b`` of ``states[lo:lo + n]`` (global
    states of a stacked table, see :func:`_trie_set_walk`) to ``out[used:]``; return how
    many."""
    m = 0
    for i in range(lo, lo + n):
        g = states[i]
        q = cells[row_start[g] + classes[term_of[g], b]]
        if q < 0:
            continue
        is_new = True
        for j in range(used, used + m):
            if out[j] == q:
                is_new = False
                break
        if is_new:
            out[used + m] = q
            m += 1
    return m


@numba.njit(cache=True, nogil=True, inline="always")
def _add_set_splits(
    states, lo, n, is_accepting, term_of, follow, b, where, offset, splits, num_splits
):  # pragma: no cover - jitted
    """Append ``(where, offset, t)`` to ``splits`` for every terminal ``t`` whose state in
    ``states[lo:lo + n]`` accepts and may be followed by byte ``b``; returns ``(splits,
    num_splits)`` (the array may have grown)."""
    for i in range(lo, lo + n):
        g = states[i]
        if is_accepting[g] and follow[term_of[g], b]:
            splits, num_splits = _push_split(splits, num_splits, where, offset, term_of[g])
    return splits, num_splits


@numba.njit(cache=True, nogil=True)
def _trie_set_walk(
    cells,
    row_start,
    classes,
    term_of,
    is_accepting,
    follow,
    starts,
    nodes,
    token_rows,
    token_ids,
    num_words,
):  # pragma: no cover - jitted
    """Every token read from a *set* of states of a stacked table (the DFAs of several
    terminals side by side, each in its byte-class space: the successor of global state ``g``
    on byte ``b`` is ``cells[row_start[g] + classes[term_of[g], b]]``; ``term_of`` ``(S,)``:
    the terminal of a state; ``follow`` ``(T, 257)`` bool per terminal) at once: one DFS over
    the vocabulary trie with the set of live states per node. A token is within if some state
    is alive after it; a split is recorded per terminal that accepts before a byte it may be
    followed by. Returns ``(within_row, split_rows, split_steps, split_terminals)``."""
    words = np.zeros(num_words, np.uint32)
    states = np.empty(max(1024, 4 * len(starts)), np.int64)  # the live sets, back to back
    states[: len(starts)] = starts
    used = len(starts)
    stack = np.empty((1024, 4), np.int64)  # (trie node, depth, set offset, set size)
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, 0, 0, len(starts)
    size = 1
    splits = np.empty((64, 3), np.int64)  # (trie node, depth, terminal)
    num_splits = 0
    while size:
        size -= 1
        node, depth, lo, n = stack[size, 0], stack[size, 1], stack[size, 2], stack[size, 3]
        if size + 256 > stack.shape[0]:
            stack = _grow(stack, size)
        for c in range(nodes[node, _CHILD_LO], nodes[node, _CHILD_HI]):
            height_byte = nodes[c, _HEIGHT_BYTE]
            b = height_byte >> 32
            if depth > 0:
                splits, num_splits = _add_set_splits(
                    states, lo, n, is_accepting, term_of, follow, b, c, depth, splits, num_splits
                )
            if used + n > states.shape[0]:
                bigger = np.empty(2 * (used + n), np.int64)
                bigger[:used] = states[:used]
                states = bigger
            m = _advance_set(cells, row_start, classes, term_of, states, lo, n, b, states, used)
            if m == 0:
                continue
            for k in range(nodes[c, _TOKEN_LO], nodes[c, _TOKEN_HI]):
                _set_bit(words, token_ids[token_rows[k]])
            if height_byte & 0xFFFFFFFF:
                stack[size, 0], stack[size, 1], stack[size, 2], stack[size, 3] = (
                    c,
                    depth + 1,
                    used,
                    m,
                )
                size += 1
                used += m
    return _walk_output(words, splits, num_splits, nodes, token_ids, True)


@numba.njit(cache=True, nogil=True)
def _record_set_walk(
    cells,
    row_start,
    classes,
    term_of,
    is_accepting,
    follow,
    starts,
    rows,
    steps,
    first_byte_bounds,
    matrix,
    lengths,
    token_ids,
    num_words,
    nodes,
):  # pragma: no cover - jitted
    """:func:`_record_walk` from a set of states of a stacked table (as :func:`_trie_set_walk`):
    returns ``(within_row, split_rows, split_steps, split_terminals)``."""
    words = np.zeros(num_words, np.uint32)
    splits = np.empty((64, 3), np.int64)  # (row, offset, terminal)
    num_splits = 0
    k_starts = len(starts)
    first = np.empty(k_starts, np.int64)
    live = np.empty(2 * k_starts, np.int64)
    for b in range(256):
        lo, hi = first_byte_bounds[b], first_byte_bounds[b + 1]
        if lo == hi:
            continue
        num_first = _advance_set(
            cells, row_start, classes, term_of, starts, 0, k_starts, b, first, 0
        )
        if num_first == 0:
            continue
        for k in range(lo, hi):
            row = rows[k]
            end = lengths[row]
            live[:num_first] = first[:num_first]
            cur, n = 0, num_first  # live[cur:cur + n]; the next set goes to the other half
            pos = steps[k] + 1
            while pos < end:
                byte = matrix[row, pos]
                splits, num_splits = _add_set_splits(
                    live, cur, n, is_accepting, term_of, follow, byte, row, pos, splits, num_splits
                )
                other = k_starts if cur == 0 else 0
                n = _advance_set(
                    cells, row_start, classes, term_of, live, cur, n, byte, live, other
                )
                cur = other
                if n == 0:
                    break
                pos += 1
            if n > 0:
                _set_bit(words, token_ids[row])
    return _walk_output(words, splits, num_splits, nodes, token_ids, False)


@numba.njit(cache=True, nogil=True)
def _sorted_records(rows, steps, matrix):  # pragma: no cover - jitted
    """Records ``(rows[k], steps[k])`` sorted by the key ``first suffix byte << 48 | row << 16
    | offset``, duplicates dropped: ``(rows, steps, first_byte_bounds (257,), first_words
    (4,) uint64)``; bit ``b & 63`` of ``first_words[b >> 6]`` = some suffix starts with ``b``."""
    keys = np.empty(len(rows), np.int64)
    for k in range(len(rows)):
        byte = np.int64(matrix[rows[k], steps[k]])
        keys[k] = (byte << 48) | (np.int64(rows[k]) << 16) | np.int64(steps[k])
    keys = np.sort(keys)
    out_rows = np.empty(len(keys), np.int32)
    out_steps = np.empty(len(keys), np.int32)
    bounds = np.zeros(257, np.int64)
    first_words = np.zeros(4, np.uint64)
    count = 0
    for k in range(len(keys)):
        key = keys[k]
        if k and key == keys[k - 1]:
            continue
        byte = key >> 48
        out_rows[count] = (key >> 16) & 0xFFFFFFFF
        out_steps[count] = key & 0xFFFF
        bounds[byte + 1] += 1
        first_words[byte >> 6] |= np.uint64(1) << np.uint64(byte & 63)
        count += 1
    for b in range(256):
        bounds[b + 1] += bounds[b]
    return out_rows[:count], out_steps[:count], bounds, first_words


# -- Python entry points ------------------------------------------------------------------------

_ALL_BYTES = np.ones(256, dtype=bool)
# the identity byte -> class map: walks of a table with one column per byte
BYTE_CLASSES = np.arange(256, dtype=np.uint8)
# a coverage that covers nothing
NO_COVERAGE = (
    np.zeros((1, 0, 4), dtype=np.uint64),
    np.zeros(0, dtype=np.int64),
    np.zeros((1, 0, 4), dtype=np.uint64),
)
_TRIE_NODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def chain_coverage(dfa: ByteDFA, vt: VocabTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chain coverage (:func:`~formcast.grammar.index.kernels.chain_coverage`) of
    ``dfa``, up to the longest token of ``vt``, and its closed text bytes
    (:func:`~formcast.grammar.index.kernels.closed_bytes`, as one ``(1, S, 4)`` level):
    ``(covered, uniform successors, closed)``."""
    height = max(int(vt.trie.height[0]), 1)
    covered, uniform = index_kernels.chain_coverage(dfa.transitions, dfa.byte_to_class, height)
    # the kernel's levels are a view of a buffer of every possible level (~80); a lexer keeps
    # one coverage per terminal DFA (hundreds in a large schema), and holding those buffers
    # (~0.4 MB each for ~160 states) made every later walk of the grammar slower (flat_1000's
    # first walk 84 -> 50 ms with the copy): keep only the levels that differ, where they are
    # under half the buffer (a large DFA whose levels do not settle, e.g. a long counted
    # pattern, fills most of it, and copying 25 MB cost a first visit 4 ms)
    if 2 * covered.shape[0] < height + 2:  # the buffer holds height + 2 levels
        covered = covered.copy()
    closed = index_kernels.closed_bytes(
        dfa.transitions, dfa.byte_to_class, index_kernels.STRING_TEXT_BYTES
    )
    return covered, uniform, closed[None]


def trie_nodes(vt: VocabTable) -> tuple[np.ndarray, ...]:
    """The vocabulary trie of ``vt`` packed for :func:`walk_trie` (built once per table):

    - ``(N, 8)`` int64 rows ``child_start, child_end, row_lo, row_hi, token_lo, token_hi,
      height | byte << 32, dense`` (one cache line per node; ``dense``: the node's row in the
      packed subtree rows of :meth:`~formcast.grammar.index.token_index.VocabTable.dense_subtrees`,
      or -1);
    - the ``(N, 4)`` uint64 bytes below each node;
    - those dense rows;
    - ``level_start``: nodes are numbered level by level, level ``d`` (prefixes of ``d``
      bytes) is ``level_start[d]:level_start[d + 1]``, in ascending ``row_lo``.
    """
    found = _TRIE_NODES.get(vt)
    if found is None:
        trie = vt.trie
        dense_of, dense = vt.dense_subtrees()
        height_byte = trie.height.astype(np.int64) | trie.node_byte.astype(np.int64) << 32
        columns = (
            trie.child_start, trie.child_end, trie.row_lo, trie.row_hi, trie.token_start[:-1],
            trie.token_start[1:], height_byte, dense_of,
        )  # fmt: skip
        nodes = np.ascontiguousarray(np.stack(columns, axis=1).astype(np.int64))
        level_start = [0, 1]  # the children of one level are the next level, contiguous
        while level_start[-1] > level_start[-2]:
            last = level_start[-1] - 1  # the last node of the newest level
            level_start.append(max(int(trie.child_end[last]), last + 1))
        level_start += [level_start[-1]] * 2  # empty levels past the longest token
        found = _TRIE_NODES[vt] = (
            nodes,
            np.ascontiguousarray(trie.bytes_below),
            np.ascontiguousarray(dense, dtype=np.uint32),
            np.asarray(level_start, dtype=np.int64),
            np.ascontiguousarray(trie.row_lo, dtype=np.int64),
        )
    return found


def walk_trie(
    table: np.ndarray,
    start: int,
    is_split: np.ndarray,
    follow: np.ndarray,
    coverage: tuple[np.ndarray, np.ndarray, np.ndarray],
    vt: VocabTable,
    first_bytes: np.ndarray = _ALL_BYTES,
    classes: np.ndarray = BYTE_CLASSES,
) -> tuple[np.ndarray, ...]:
    """Every token of ``vt`` (whose first byte ``first_bytes`` marks) read from ``start`` of
    ``table`` (int32, ``(S, K)`` over ``classes``: the successor of ``s`` on byte ``b`` is
    ``table[s, classes[b]]``; by default ``(S, 256)`` over the bytes themselves);
    ``is_split`` ``(S,)`` bool, ``follow`` ``(257,)`` bool, ``coverage`` from
    :func:`chain_coverage` (or :data:`NO_COVERAGE`). Returns ``(within_row, split_rows,
    split_steps, split_states)`` (module docstring)."""
    nodes, below, dense, level_start, row_lo = trie_nodes(vt)
    covered, uniform, closed = coverage
    return _trie_walk(
        table, classes, start, first_bytes, is_split, follow, covered, uniform, closed, nodes,
        below, dense, level_start, row_lo, vt.lengths, vt.trie.token_rows, vt.token_ids,
        vt.num_words,
    )  # fmt: skip


def walk_suffixes(
    table: np.ndarray,
    start: int,
    rows: np.ndarray,
    steps: np.ndarray,
    first_byte_bounds: np.ndarray,
    is_split: np.ndarray,
    follow: np.ndarray,
    vt: VocabTable,
    classes: np.ndarray = BYTE_CLASSES,
) -> tuple[np.ndarray, ...]:
    """Records ``(rows[k], steps[k])`` (int32, sorted by first byte: ``first_byte_bounds``)
    read from ``start`` of ``table``; arguments and result as for :func:`walk_trie`."""
    return _record_walk(
        table, classes, start, rows, steps, first_byte_bounds, is_split, follow, vt.matrix,
        vt.lengths, vt.token_ids, vt.num_words, trie_nodes(vt)[0],
    )  # fmt: skip


def walk_trie_set(
    stacked: tuple[np.ndarray, ...], starts: np.ndarray, vt: VocabTable
) -> tuple[np.ndarray, ...]:
    """Every token of ``vt`` read from the set ``starts`` of a stacked table (``stacked``:
    ``(cells, row_start, classes, term_of, is_accepting, follow)``, see
    :func:`_trie_set_walk`); returns ``(within_row, split_rows, split_steps,
    split_terminals)``: a split's terminal completes before the offset."""
    nodes = trie_nodes(vt)[0]
    return _trie_set_walk(*stacked, starts, nodes, vt.trie.token_rows, vt.token_ids, vt.num_words)


def walk_suffixes_set(
    stacked: tuple[np.ndarray, ...],
    starts: np.ndarray,
    rows: np.ndarray,
    steps: np.ndarray,
    first_byte_bounds: np.ndarray,
    vt: VocabTable,
) -> tuple[np.ndarray, ...]:
    """Records read from the set ``starts`` of a stacked table; arguments and result as for
    :func:`walk_trie_set` and :func:`walk_suffixes`."""
    return _record_set_walk(
        *stacked, starts, rows, steps, first_byte_bounds, vt.matrix, vt.lengths, vt.token_ids,
        vt.num_words, trie_nodes(vt)[0],
    )  # fmt: skip


@numba.njit(cache=True, nogil=True)
def is_set_walkable(
    transitions, byte_to_class, max_states, max_loop_bytes
):  # pragma: no cover - jitted
    """True if a terminal DFA (``(S, K)`` class table, ``(256,)`` byte -> class) may join set
    walks: at most ``max_states`` states, and every state reads at most ``max_loop_bytes``
    bytes or the table has no cycle (one pass; the test that a first set walk runs per key)."""
    num_states, num_classes = transitions.shape
    if num_states > max_states:
        return False
    class_size = np.zeros(num_classes, np.int64)
    for b in range(256):
        class_size[byte_to_class[b]] += 1
    for s in range(num_states):
        num_live = 0
        for c in range(num_classes):
            if transitions[s, c] >= 0:
                num_live += class_size[c]
        if num_live > max_loop_bytes:
            return automata_kernels.is_acyclic(transitions)
    return True


@numba.njit(cache=True, nogil=True)
def stack_terminals(
    cells, class_rows, terminal_ids, state_lo, cell_lo, max_states, max_loop_bytes,
    row_start, classes, term_of, is_walkable, first_words,
):  # pragma: no cover - jitted  # fmt: skip
    """Stack terminal DFAs side by side for set walks, in one pass.

    Input: terminal ``terminal_ids[i]``'s ``(S_i, K_i)`` class table is
    ``cells[cell_lo[i]:cell_lo[i + 1]]`` (row-major, local successors, ``-1`` dead) with byte
    classes ``class_rows[i]``; its states become the global states
    ``state_lo[i] .. state_lo[i + 1] - 1``. In place, ``cells`` becomes the stacked table
    (successors shifted to global ids). Output per global state ``g``: ``row_start[g]`` (its
    first cell), ``term_of[g]`` (its terminal id) and ``first_words[g]`` (``(4,)`` uint64 bit set
    of the bytes it reads, as :func:`first_byte_words`); per terminal id: ``classes[t]`` (its
    byte classes) and ``is_walkable[t]`` (:func:`is_set_walkable`)."""
    for i in range(terminal_ids.shape[0]):
        terminal = terminal_ids[i]
        lo = state_lo[i]
        num_states = state_lo[i + 1] - lo
        width = (cell_lo[i + 1] - cell_lo[i]) // num_states
        table = cells[cell_lo[i] : cell_lo[i + 1]].reshape((num_states, width))
        row_classes = class_rows[i]
        is_walkable[terminal] = is_set_walkable(table, row_classes, max_states, max_loop_bytes)
        class_words = np.zeros((width, 4), np.uint64)  # the bytes of each class
        for b in range(256):
            classes[terminal, b] = row_classes[b]
            class_words[row_classes[b], b >> 6] |= np.uint64(1) << np.uint64(b & 63)
        for s in range(num_states):
            g = lo + s
            row_start[g] = cell_lo[i] + s * width
            term_of[g] = terminal
            for c in range(width):
                if table[s, c] >= 0:
                    for k in range(4):
                        first_words[g, k] |= class_words[c, k]
        for k in range(cell_lo[i], cell_lo[i + 1]):
            if cells[k] >= 0:
                cells[k] += lo


@numba.njit(cache=True, nogil=True)
def first_byte_words(transitions, byte_to_class, state):  # pragma: no cover - jitted
    """``(4,)`` uint64 bit set (bit ``b & 63`` of word ``b >> 6`` = byte ``b``) of the bytes
    ``state`` of a class table can read."""
    words = np.zeros(4, np.uint64)
    for b in range(256):
        if transitions[state, byte_to_class[b]] >= 0:
            words[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return words


def sort_records(rows: np.ndarray, steps: np.ndarray, vt: VocabTable) -> tuple:
    """Split records in canonical order (first suffix byte, row, offset), without duplicates:
    ``(rows, steps, first_byte_bounds, first_bytes)`` (int32, int32, ``(257,)`` int64, and
    an int bit set of the first suffix bytes)."""
    rows, steps, bounds, first_words = _sorted_records(rows, steps, vt.matrix)
    return rows, steps, bounds, int.from_bytes(first_words.tobytes(), "little")


caches.register("cfg.walks.trie_nodes", "weak by vocabulary table", _TRIE_NODES.clear)
