"""Numba kernels for :class:`~formcast.grammar.index.token_index.TokenIndex`: DFA states -> packed masks.

:func:`index_rows` walks the vocabulary trie depth first from each DFA state and sets the
allowed token bits straight into packed ``uint32`` rows (bit ``i % 32`` of word ``i // 32`` =
token ``i``): a (state, node) pair whose subtree stays on the state's uniform chain
(:func:`chain_coverage`, shared with the CFG lexer walks) is finished at once as its row range,
OR-ing a precomputed dense row when the subtree is large. A state that moves like its
uniform successor on all but a few first bytes takes that state's row and walks only the
subtrees of those bytes; one that agrees with it on every token up to some length (a bounded
string's position and the next) copies it and walks the longer tokens again
(:func:`difference_refs`, :func:`shift_distances`). The plain per-token walk
(:func:`~formcast.grammar.index.token_index.walk_tokens`) is the reference it is tested against.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _is_within(bits, of):  # pragma: no cover - jitted
    """Is the 256-bit set ``bits`` (4 uint64 words) a subset of ``of``?"""
    return ((bits[0] & ~of[0]) | (bits[1] & ~of[1]) | (bits[2] & ~of[2]) | (bits[3] & ~of[3])) == 0


@numba.njit(cache=True, nogil=True, inline="always")
def _finish_subtree(row, child, dense_of, dense, row_lo, row_hi, token_ids):  # pragma: no cover
    """OR every token of trie node ``child``'s subtree into ``row``."""
    d = dense_of[child]
    if d >= 0:
        dense_row = dense[d]
        for w in range(len(row)):
            row[w] |= dense_row[w]
    else:
        for r in range(row_lo[child], row_hi[child]):
            t = token_ids[r]
            row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


# trailing-zero count of a one-bit uint64 by de Bruijn multiplication: (b * DEBRUIJN) >> 58
# is distinct for each of the 64 one-bit words
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _k in range(64):
    _DEBRUIJN_INDEX[(((1 << _k) * int(_DEBRUIJN)) % (1 << 64)) >> 58] = _k
# a node's children are looked up by byte (binary search over their sorted labels) instead
# of scanned when the state reads fewer than one byte per this many children
SPARSE_CHILDREN_PER_BYTE = 8

# ``fix_depth`` of a state whose row is its twin's with the tokens holding a twin byte walked
# again (:func:`index_rows`, :func:`difference_refs`)
TWIN_DEPTH = -2


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(word):  # pragma: no cover - jitted
    """Number of set bits of a uint64 (SWAR)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + (
        (word >> np.uint64(2)) & np.uint64(0x3333333333333333)
    )
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _live_children(node_byte, lo, hi, bits, debruijn_index, out):  # pragma: no cover - jitted
    """Write to ``out`` the children ``lo..hi - 1`` (labels ascending) whose label is in the
    256-bit set ``bits``, by a binary search per byte of ``bits``; returns how many."""
    count = 0
    for w in range(4):
        word = bits[w]
        start = lo
        while word:
            low = word & (~word + np.uint64(1))  # the lowest set bit
            word ^= low
            b = np.uint8(w * 64 + debruijn_index[(low * _DEBRUIJN) >> np.uint64(58)])
            a, z = start, hi  # first child with label >= b
            while a < z:
                mid = (a + z) >> 1
                if node_byte[mid] < b:
                    a = mid + 1
                else:
                    z = mid
            if a == hi:
                return count  # every later byte is larger still
            if node_byte[a] == b:
                out[count] = a
                count += 1
                a += 1
            start = a
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def _chain_reach(bits, covered, uniform, state, most):  # pragma: no cover - jitted
    """``L`` if every byte string over ``bits`` of at most ``L`` bytes stays alive from
    ``state`` (``bits`` within ``covered[L, state]``, the largest such ``L < most``, ``L >= 1``)
    and none of those bytes is alive in ``u^L(state)``, where such strings lead; else ``-1``.
    Levels ``1..most`` of ``covered`` shrink as they rise, so ``L`` is found by bisection."""
    if not _is_within(bits, covered[1, state]):
        return -1
    lo, hi = 1, most  # bits within level lo, not within level hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _is_within(bits, covered[mid, state]):
            lo = mid
        else:
            hi = mid
    q = state
    for _ in range(lo):
        q = uniform[q]
        if q < 0:
            return -1
    live = covered[0, q]
    if (bits[0] & live[0]) | (bits[1] & live[1]) | (bits[2] & live[2]) | (bits[3] & live[3]):
        return -1
    return lo


@numba.njit(cache=True, nogil=True)
def index_rows(
    transitions,
    byte_to_class,
    node_byte,
    states,
    child_start,
    child_end,
    token_start,
    token_rows,
    token_ids,
    row_lo,
    row_hi,
    height,
    below,
    covered,
    uniform,
    closed,
    row_lengths,
    dense_of,
    dense,
    children_cost,
    text_row,
    out,
    ref_rows,
    ref_of,
    diff_bits,
    fix_depth,
    token_bytes,
    long_rows,
    twin_rows,
    is_same,
):  # pragma: no cover - jitted
    """Set ``out[i]`` (``(W,)`` uint32) to the tokens allowed from DFA state ``states[i]``.

    ``transitions``: ``(S, K)`` DFA table (``-1`` dead) over ``byte_to_class``; ``node_byte``:
    each trie node's label; trie arrays as in :class:`~formcast.grammar.index.token_index.VocabTrie`;
    ``covered``: ``(H + 1, S, 4)`` uniform-chain byte sets of
    :class:`~formcast.grammar.index.token_index.TrieTokens`; ``dense[dense_of[n]]``: the packed row
    of node ``n``'s whole subtree (``dense_of[n] = -1``: none); ``text_row``: the packed row of
    every text token. Rows of ``out`` must be zero.

    ``uniform``: ``(S,)`` the uniform successors of :func:`chain_coverage`; ``closed``: ``(S,
    4)`` the byte sets of :func:`closed_bytes` (a subtree whose bytes all lie in
    ``closed[q]`` is alive throughout from ``q``, at any length: the strings inside a JSON
    string that searches for an unanchored pattern, where no byte loops on one state);
    ``row_lengths``: ``(R,)`` the byte length of each trie row's token.

    The walk splits the trie into finished pieces: subtrees that die at their first byte,
    subtrees that stay alive throughout (on the state's uniform chain), subtrees cut by length
    (below), and tokens ending at a node walked through alive. A subtree is cut by length at
    the end of a counted chain (a bounded string's remaining characters): if every byte below
    node ``n`` (reached in state ``q`` at depth ``d``) lies in ``covered[L, q]`` for the largest
    such ``L``, every token of the subtree of at most ``d + L`` bytes is alive (those bytes
    follow the chain), and if none of those bytes can be read in ``u^L(q)``, where the chain
    has led after ``L`` of them, every longer token dies at its byte ``d + L + 1``. Without
    the cut, such a state walked every trie node on the way to a token longer than the
    chain (about half the trie: 52k nodes, ~3 ms for a string of at most 8 characters). The
    CFG lexer's trie walk makes the same cut (``cfg.walks.kernels._chain_jump``), where it
    must also stop at states that complete a terminal. The allowed set is the union of the alive pieces, and also
    ``text - (union of the dead subtrees)``: each piece is recorded with its finishing cost
    (``W`` words for a subtree with a dense row, else one bit per token), and the cheaper side
    is written. A state inside a JSON string allows nearly every token (tens of thousands of
    bits, as alive pieces) and kills a few hundred: it is written as the complement.

    Rows derived from another state's (:func:`difference_refs`), where ``ref_of[i] >= 0``: row
    ``i`` starts as the text tokens of ``ref_rows[ref_of[i]]``, the row of a state ``r``.

    - By difference: ``r`` moves like ``states[i]`` on every first byte outside
      ``diff_bits[i]`` (``(4,)`` uint64 byte set): a token's fate from a state depends only on
      where its first byte leads, so the tokens starting with any other byte are allowed from
      both or from neither. The subtrees of the root children on ``diff_bits[i]`` are cleared
      and walked from ``states[i]`` alone (alive pieces only).
    - By shift: ``fix_depth[i] >= 0``: ``r`` agrees with ``states[i]`` on every token of at
      most that many bytes; the longer ones (the first rows of ``long_rows``, trie rows by
      decreasing length; ``token_bytes``: ``(R, max_len)`` the rows' bytes) are walked byte by
      byte. ``-1``: on every token.
    - As a twin: ``fix_depth[i] == TWIN_DEPTH``: ``r`` and ``states[i]`` lie in one block of
      the coarsest partition stable under every byte outside a set ``B`` (the quote:
      :func:`difference_refs`), so a token without a ``B`` byte keeps both walks in one block
      (alive together, dead together); the tokens holding one (``twin_rows``) are walked
      byte by byte.

    ``is_same`` (``(N,)`` bool, False on entry): set for a row derived by shift or as a twin
    whose tokens walked again changed no bit of its reference's text tokens (the row's text
    part equals the reference's; most twins: grouping equal rows need not hash them).
    """
    n = len(child_start)
    stack_node = np.empty(n, np.int64)
    stack_state = np.empty(n, np.int64)
    stack_depth = np.empty(n, np.int64)  # bytes of the node's prefix
    # a piece per child reached plus one per node walked sparsely: at most 2n
    piece_node = np.empty(2 * n, np.int64)
    # 0 alive subtree, 1 ending tokens, 2 dead subtree, 3 subtree cut by length at piece_cut,
    # 4 the dead children of node piece_node in state piece_cut
    piece_kind = np.empty(2 * n, np.int8)
    piece_cut = np.empty(2 * n, np.int64)
    found = np.empty(256, np.int64)  # a sparse node's alive children
    every_byte = np.full(4, ~np.uint64(0), np.uint64)
    num_words = out.shape[1]
    for i in range(len(states)):
        row = out[i]
        if ref_of[i] < 0:
            root_bits = every_byte
        else:
            ref = ref_rows[ref_of[i]]
            for w in range(num_words):
                row[w] = ref[w] & text_row[w]
            root_bits = diff_bits[i]
            depth = fix_depth[i]
            is_changed = False
            if depth >= 0 or depth == TWIN_DEPTH:
                state = states[i]
                walk_rows = long_rows if depth >= 0 else twin_rows
                for k in range(len(walk_rows)):
                    r = walk_rows[k]
                    if row_lengths[r] <= depth:
                        break  # (long rows come by decreasing length; a twin walks them all)
                    t = token_ids[r]
                    q = state
                    for j in range(row_lengths[r]):
                        q = transitions[q, byte_to_class[token_bytes[r, j]]]
                        if q < 0:
                            break
                    bit = np.uint32(1) << np.uint32(t & 31)
                    was_set = (row[t >> 5] & bit) != 0
                    if q >= 0:
                        row[t >> 5] |= bit
                    else:
                        row[t >> 5] &= ~bit
                    if was_set != (q >= 0):
                        is_changed = True
            if not (root_bits[0] | root_bits[1] | root_bits[2] | root_bits[3]):
                is_same[i] = not is_changed
                continue  # nothing to walk again
            for child in range(child_start[0], child_end[0]):
                b = node_byte[child]
                if root_bits[b >> 6] & (np.uint64(1) << np.uint64(b & 63)):
                    _clear_subtree(row, child, dense_of, dense, row_lo, row_hi, token_ids)
        _walk_state(
            row, states[i], root_bits, ref_of[i] < 0, transitions, byte_to_class, node_byte,
            child_start, child_end, token_start, token_rows, token_ids, row_lo, row_hi, height,
            below, covered, uniform, closed, row_lengths, dense_of, dense, children_cost,
            text_row, stack_node, stack_state, stack_depth, piece_node, piece_kind, piece_cut, found,
        )  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _clear_subtree(row, child, dense_of, dense, row_lo, row_hi, token_ids):  # pragma: no cover
    """Clear every token of trie node ``child``'s subtree from ``row``."""
    d = dense_of[child]
    if d >= 0:
        dense_row = dense[d]
        for w in range(len(row)):
            row[w] &= ~dense_row[w]
    else:
        for r in range(row_lo[child], row_hi[child]):
            t = token_ids[r]
            row[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))


@numba.njit(cache=True, nogil=True)
def _walk_state(
    row,
    state,
    root_bits,
    may_complement,
    transitions,
    byte_to_class,
    node_byte,
    child_start,
    child_end,
    token_start,
    token_rows,
    token_ids,
    row_lo,
    row_hi,
    height,
    below,
    covered,
    uniform,
    closed,
    row_lengths,
    dense_of,
    dense,
    children_cost,
    text_row,
    stack_node,
    stack_state,
    stack_depth,
    piece_node,
    piece_kind,
    piece_cut,
    found,
):  # pragma: no cover - jitted
    """OR into ``row`` the tokens allowed from ``state`` whose first byte is in ``root_bits``
    (one state of :func:`index_rows`; with ``may_complement`` and every byte, ``row`` must be
    zero: it may be written as the complement of the dead pieces)."""
    max_height = covered.shape[0] - 1
    num_words = len(row)
    num_pieces = 0
    cost_alive = 0
    cost_dead = num_words  # the final complement
    stack_node[0] = 0
    stack_state[0] = state
    stack_depth[0] = 0
    depth = 1
    read = np.empty(4, np.uint64)
    while depth:
        depth -= 1
        node = stack_node[depth]
        cur = stack_state[depth]
        child_depth = stack_depth[depth] + 1
        lo, hi = child_start[node], child_end[node]
        live = covered[0, cur]
        num_read = 0
        for w in range(4):
            read[w] = live[w] & root_bits[w] if node == 0 else live[w]
            num_read += _popcount(read[w])
        # few bytes alive: find those children by byte; the dead ones are one piece (kind 4,
        # the node in state `cur`), costed as the node's children less the alive ones
        is_sparse = num_read * SPARSE_CHILDREN_PER_BYTE < hi - lo
        if is_sparse:
            hi = _live_children(node_byte, lo, hi, read, _DEBRUIJN_INDEX, found)
            lo = 0
            piece_node[num_pieces] = node
            piece_kind[num_pieces] = 4
            piece_cut[num_pieces] = cur
            num_pieces += 1
            cost_dead += children_cost[node]
        for k in range(lo, hi):
            child = found[k] if is_sparse else k
            if is_sparse:
                cost_dead -= num_words if dense_of[child] >= 0 else row_hi[child] - row_lo[child]
            elif node == 0:
                b = node_byte[child]
                if not root_bits[b >> 6] & (np.uint64(1) << np.uint64(b & 63)):
                    continue
            nxt = transitions[cur, byte_to_class[node_byte[child]]]
            if nxt < 0:
                piece_node[num_pieces] = child
                piece_kind[num_pieces] = 2
                num_pieces += 1
                cost_dead += num_words if dense_of[child] >= 0 else row_hi[child] - row_lo[child]
                continue
            h = height[child]
            if h > 0:
                bits = below[child]
                if _is_within(bits, covered[min(h, max_height), nxt]) or _is_within(
                    bits, closed[nxt]
                ):
                    piece_node[num_pieces] = child
                    piece_kind[num_pieces] = 0
                    num_pieces += 1
                    cost_alive += (
                        num_words if dense_of[child] >= 0 else row_hi[child] - row_lo[child]
                    )
                    continue
                reach = _chain_reach(below[child], covered, uniform, nxt, min(h, max_height))
                if reach >= 0:  # cut by length: rows of at most `cut` bytes are alive
                    cut = child_depth + reach
                    num_alive = 0
                    for r in range(row_lo[child], row_hi[child]):
                        num_alive += row_lengths[r] <= cut
                    piece_node[num_pieces] = child
                    piece_kind[num_pieces] = 3
                    piece_cut[num_pieces] = cut
                    num_pieces += 1
                    cost_alive += num_alive
                    cost_dead += row_hi[child] - row_lo[child] - num_alive
                    continue
            num_ending = token_start[child + 1] - token_start[child]
            if num_ending:
                piece_node[num_pieces] = child
                piece_kind[num_pieces] = 1
                num_pieces += 1
                cost_alive += num_ending
            if h > 0:
                stack_node[depth] = child
                stack_state[depth] = nxt
                stack_depth[depth] = child_depth
                depth += 1
    is_complement = may_complement and cost_dead < cost_alive
    for k in range(num_pieces):
        child = piece_node[k]
        kind = piece_kind[k]
        if kind == 3:  # the alive rows, or in the complement the dead ones
            cut = piece_cut[k]
            for r in range(row_lo[child], row_hi[child]):
                if (row_lengths[r] > cut) == is_complement:
                    t = token_ids[r]
                    row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            continue
        if kind == 4:  # a node's dead children: written in the complement only
            if is_complement:
                cur = piece_cut[k]
                for c in range(child_start[child], child_end[child]):
                    if transitions[cur, byte_to_class[node_byte[c]]] < 0:
                        _finish_subtree(row, c, dense_of, dense, row_lo, row_hi, token_ids)
            continue
        if is_complement != (kind == 2):
            continue
        if kind == 1:
            for q in range(token_start[child], token_start[child + 1]):
                t = token_ids[token_rows[q]]
                row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        else:
            _finish_subtree(row, child, dense_of, dense, row_lo, row_hi, token_ids)
    if is_complement:  # row holds the dead tokens
        for w in range(num_words):
            row[w] = text_row[w] & ~row[w]


_NO_CONFLICT = np.int64(1) << np.int64(40)  # a pair of states no string tells apart


@numba.njit(cache=True, nogil=True)
def shift_distances(transitions, uniform, is_candidate, max_pairs):  # pragma: no cover - jitted
    """``(S,)`` int64: for each candidate state ``s`` (``is_candidate``), the length of the
    shortest byte string after which ``s`` and ``u = uniform[s]`` disagree on whether the next
    byte is alive (``_NO_CONFLICT`` if none does; ``-1`` for the other states). Every string
    of at most that many bytes is alive from both or from neither, so their rows agree on
    every token of at most that length.

    The pairs reachable from the candidates' ``(s, u)`` pairs are enumerated (at most
    ``max_pairs``; a pair whose successors do not fit counts as disagreeing at once, which
    only shortens distances) and the distances come from a breadth-first search backwards
    from the disagreeing pairs. A pair of equal states agrees forever and is not followed.
    """
    num_states, num_classes = transitions.shape
    size = 2
    while size < 2 * max_pairs:
        size *= 2
    slot_key = np.full(size, -1, np.int64)  # open addressing: pair key p * S + q -> its id
    slot_pair = np.empty(size, np.int64)
    pair_p = np.empty(max_pairs, np.int64)
    pair_q = np.empty(max_pairs, np.int64)
    is_conflict = np.zeros(max_pairs, np.bool_)
    edge_src = np.empty(4 * max_pairs, np.int64)
    edge_dst = np.empty(4 * max_pairs, np.int64)
    num_edges = 0
    num_pairs = 0
    start_pair = np.full(num_states, -1, np.int64)
    for s in range(num_states):
        if is_candidate[s]:
            j, is_new = _pair_slot(slot_key, s * num_states + uniform[s])
            if is_new:
                if num_pairs == max_pairs:
                    slot_key[j] = -1
                    continue
                slot_pair[j] = num_pairs
                pair_p[num_pairs], pair_q[num_pairs] = s, uniform[s]
                num_pairs += 1
            start_pair[s] = slot_pair[j]
    i = 0
    while i < num_pairs:  # the closure, breadth first
        p, q = pair_p[i], pair_q[i]
        first_edge = num_edges
        for k in range(num_classes):
            a, b = transitions[p, k], transitions[q, k]
            if (a < 0) != (b < 0):
                is_conflict[i] = True
                break
            if a < 0 or a == b:
                continue
            j, is_new = _pair_slot(slot_key, a * num_states + b)
            if is_new:
                if num_pairs == max_pairs:  # no room: count the pair as disagreeing now
                    slot_key[j] = -1
                    is_conflict[i] = True
                    break
                slot_pair[j] = num_pairs
                pair_p[num_pairs], pair_q[num_pairs] = a, b
                num_pairs += 1
            target = slot_pair[j]
            is_seen = False
            for e in range(first_edge, num_edges):
                if edge_dst[e] == target:
                    is_seen = True
                    break
            if not is_seen:
                if num_edges == edge_src.shape[0]:
                    grown_src = np.empty(2 * num_edges, np.int64)
                    grown_dst = np.empty(2 * num_edges, np.int64)
                    grown_src[:num_edges] = edge_src
                    grown_dst[:num_edges] = edge_dst
                    edge_src, edge_dst = grown_src, grown_dst
                edge_src[num_edges] = i
                edge_dst[num_edges] = target
                num_edges += 1
        i += 1
    # backwards breadth-first search from the disagreeing pairs
    in_start = np.zeros(num_pairs + 1, np.int64)
    for e in range(num_edges):
        in_start[edge_dst[e] + 1] += 1
    for i in range(num_pairs):
        in_start[i + 1] += in_start[i]
    fill = in_start[:num_pairs].copy()
    in_src = np.empty(num_edges, np.int64)
    for e in range(num_edges):
        in_src[fill[edge_dst[e]]] = edge_src[e]
        fill[edge_dst[e]] += 1
    pair_dist = np.full(num_pairs, _NO_CONFLICT, np.int64)
    queue = np.empty(num_pairs, np.int64)
    head = tail = 0
    for i in range(num_pairs):
        if is_conflict[i]:
            pair_dist[i] = 0
            queue[tail] = i
            tail += 1
    while head < tail:
        x = queue[head]
        head += 1
        for e in range(in_start[x], in_start[x + 1]):
            src = in_src[e]
            if pair_dist[src] == _NO_CONFLICT:
                pair_dist[src] = pair_dist[x] + 1
                queue[tail] = src
                tail += 1
    dist = np.full(num_states, -1, np.int64)
    for s in range(num_states):
        if start_pair[s] >= 0:
            dist[s] = pair_dist[start_pair[s]]
    return dist


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_slot(slot_key, key):  # pragma: no cover - jitted
    """The slot of ``key`` in the open-addressing table ``slot_key`` (size a power of two) and
    whether it was empty (then it now holds ``key``)."""
    mask = slot_key.shape[0] - 1
    j = key & mask
    while slot_key[j] >= 0 and slot_key[j] != key:
        j = (j + 1) & mask
    if slot_key[j] < 0:
        slot_key[j] = key
        return j, True
    return j, False


@numba.njit(cache=True, nogil=True)
def difference_refs(
    transitions, byte_to_class, uniform, first_bits, min_ratio, longest_token, num_longer,
    max_fix_tokens, max_pairs, twin_block,
):  # pragma: no cover - jitted  # fmt: skip
    """For each state ``s`` of a DFA (``(S, K)`` class table, ``(256,)`` byte -> class), the
    state its row is derived from by :func:`index_rows`: ``(ref (S,) int64, diff (S, 4)
    uint64, fix_depth (S,) int64, level (S,) int64)``.

    By difference: ``ref[s]`` is ``s``'s uniform successor ``u = uniform[s]`` when the first
    bytes of tokens (``first_bits``, a ``(4,)`` uint64 byte set) on which ``s`` and ``u`` move
    differently (``diff[s]``) are at most ``1 / min_ratio`` of those ``s`` can read: then the
    row of ``s`` is ``u``'s with those bytes' subtrees walked again, instead of a walk of every
    subtree (states inside a JSON string that differ from the string loop on one or two bytes:
    a key complement's prefixes).

    By shift: a state that reads at least ``1 / min_ratio`` of the first bytes, not derived by
    difference, whose pair with ``u`` agrees on every string of ``d`` bytes
    (:func:`shift_distances`): ``s``'s row is ``u``'s on every token of at most ``d`` bytes,
    so ``ref[s] = u`` and the tokens longer than ``fix_depth[s] = d`` are walked again (none
    if ``d`` reaches ``longest_token``: ``fix_depth = -1``); taken when at most
    ``max_fix_tokens`` tokens are that long (``num_longer[d]``). A bounded string's positions
    that still have more characters left than the longest token has: copies of the next one.
    A chain of such references is followed to its end while the combined depth (the least
    on the way) keeps that bound.

    As a twin: a state that is not the first of its block of ``twin_block`` (``(S,)`` int64,
    ``-1``: none; the blocks of a partition stable under every byte outside the twin bytes)
    refers to that first state (its first walked state if any), ``fix_depth[s] =
    TWIN_DEPTH``: the strings inside different JSON strings of a schema, which differ only
    after the closing quote, walk one of them in full and the ~160 tokens holding a quote for
    each of the others (the prefixes of different objects' other-key strings likewise).

    Else ``ref[s] = -1`` (walked in full). Chains of references end in a walked state:
    ``level[s]`` is 0 for those and ``1 + level[ref[s]]`` otherwise; a cycle of references is
    cut at its smallest state, which is walked.
    """
    num_states, num_classes = transitions.shape
    ref = np.full(num_states, -1, np.int64)
    diff = np.zeros((num_states, 4), np.uint64)
    fix_depth = np.full(num_states, -1, np.int64)
    is_candidate = np.zeros(num_states, np.bool_)
    num_first = 0
    for b in range(256):
        if first_bits[b >> 6] & (np.uint64(1) << np.uint64(b & 63)):
            num_first += 1
    for s in range(num_states):
        u = uniform[s]
        if u < 0 or u == s:
            continue
        num_alive = 0
        num_diff = 0
        for b in range(256):
            bit = np.uint64(1) << np.uint64(b & 63)
            if not first_bits[b >> 6] & bit:
                continue
            k = byte_to_class[b]
            if transitions[s, k] >= 0:
                num_alive += 1
            if transitions[s, k] != transitions[u, k]:
                num_diff += 1
                diff[s, b >> 6] |= bit
        if num_diff * min_ratio <= num_alive:
            ref[s] = u
        elif num_alive * min_ratio >= num_first:
            is_candidate[s] = True
    dist = shift_distances(transitions, uniform, is_candidate, max_pairs)
    is_shift = np.zeros(num_states, np.bool_)
    for s in range(num_states):
        d = dist[s]
        if d < 0:
            continue
        if d >= longest_token:
            ref[s], fix_depth[s], is_shift[s] = uniform[s], -1, True
        elif num_longer[d] <= max_fix_tokens:
            ref[s], fix_depth[s], is_shift[s] = uniform[s], d, True
    # follow chains of shift references while the least depth keeps within the bound: each
    # state after the one it refers to (a path down the chain, resolved from its end)
    is_done = np.zeros(num_states, np.bool_)
    is_on_path = np.zeros(num_states, np.bool_)
    path = np.empty(num_states, np.int64)
    for s in range(num_states):
        num_path = 0
        x = s
        while is_shift[x] and not is_done[x] and not is_on_path[x]:
            is_on_path[x] = True
            path[num_path] = x
            num_path += 1
            x = ref[x]
        for k in range(num_path - 1, -1, -1):
            y = path[k]
            r = ref[y]
            is_on_path[y] = False
            is_done[y] = True
            if not (is_shift[r] and is_done[r]) or ref[r] == y:
                continue  # r is walked, derived by difference, or on a cycle
            depth = fix_depth[y]
            if fix_depth[r] >= 0 and (depth < 0 or fix_depth[r] < depth):
                depth = fix_depth[r]
            if depth < 0 or num_longer[depth] <= max_fix_tokens:
                ref[y], fix_depth[y] = ref[r], depth
    # twins: each block's first walked state (else its first state, derived as above) keeps
    # its row's way, the others refer to it (a copy and the quote's tokens: cheaper than a
    # walk, and than a difference that walks a letter's subtree again). A cycle this closes
    # (a first state derived from a twin of its own) is cut below like any other
    first_of_block = np.full(num_states, -1, np.int64)
    is_twin = np.zeros(num_states, np.bool_)
    for s in range(num_states):
        block = twin_block[s]
        if ref[s] < 0 and block >= 0 and first_of_block[block] < 0:
            first_of_block[block] = s
    for s in range(num_states):
        block = twin_block[s]
        if block < 0 or first_of_block[block] == s:
            continue
        if first_of_block[block] < 0:
            first_of_block[block] = s
        else:
            ref[s], fix_depth[s], is_twin[s] = first_of_block[block], TWIN_DEPTH, True
    # levels along the reference chains; 0: walked. level -1 unknown, -2 on the current path
    level = np.full(num_states, -1, np.int64)
    for s in range(num_states):
        while level[s] < 0:
            num_path = 0
            q = s
            while q >= 0 and level[q] == -1:
                level[q] = -2
                path[num_path] = q
                num_path += 1
                q = ref[q]
            if q >= 0 and level[q] == -2:  # a cycle through q: walk its smallest state
                smallest = q
                r = ref[q]
                while r != q:
                    smallest = min(smallest, r)
                    r = ref[r]
                ref[smallest] = -1
                fix_depth[smallest] = -1
                for k in range(num_path):
                    level[path[k]] = -1
                continue
            # path ends at a walked state (q < 0) or refers to a resolved one (q)
            base = 0 if q < 0 else level[q] + 1
            for k in range(num_path - 1, -1, -1):
                level[path[k]] = base
                base += 1
    for s in range(num_states):
        if ref[s] < 0 or is_shift[s] or is_twin[s]:
            diff[s, :] = 0
    return ref, diff, fix_depth, level


# the bytes :func:`closed_bytes` tries: printable ASCII but the quote and the backslash (what
# a JSON string's contents are mostly made of; a UTF-8 lead byte leads where only
# continuation bytes are read, so no state stays alive on every non-ASCII byte)
STRING_TEXT_BYTES = np.array([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], np.int64)


@numba.njit(cache=True, nogil=True)
def closed_bytes(transitions, byte_to_class, byte_set):  # pragma: no cover - jitted
    """``(S, 4)`` uint64: the bit set of ``byte_set`` for the states from which every string
    over ``byte_set`` stays alive (of any length), zero for the others.

    Those states are the largest set ``R`` with ``δ(s, b)`` defined and in ``R`` for every
    ``s`` in ``R`` and ``b`` in ``byte_set`` (a state inside a JSON string, in every pattern
    that does not bound it: the loop of ``.*``, and the states of a search for an unanchored
    pattern, where no byte loops on one state and the uniform chains of
    :func:`chain_coverage` do not reach). Found by removal: a state with a dead move on one
    of the bytes is out, then every state that moves into a removed one on one of them
    (predecessors through a reverse table, each state removed once)."""
    num_states = transitions.shape[0]
    classes = np.unique(byte_to_class[byte_set])  # the classes the bytes fall in
    bits = np.zeros(4, np.uint64)
    for b in byte_set:
        bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    # reverse moves on those classes: pred[pred_start[q]:pred_start[q + 1]] move into q
    counts = np.zeros(num_states + 1, np.int64)
    for s in range(num_states):
        for k in classes:
            q = transitions[s, k]
            if q >= 0:
                counts[q + 1] += 1
    pred_start = np.cumsum(counts)
    fill = pred_start[:-1].copy()
    pred = np.empty(pred_start[-1], np.int64)
    is_in = np.ones(num_states, np.bool_)
    queue = np.empty(num_states, np.int64)
    num_queued = 0
    for s in range(num_states):
        for k in classes:
            q = transitions[s, k]
            if q >= 0:
                pred[fill[q]] = s
                fill[q] += 1
            elif is_in[s]:
                is_in[s] = False
                queue[num_queued] = s
                num_queued += 1
    head = 0
    while head < num_queued:
        q = queue[head]
        head += 1
        for j in range(pred_start[q], pred_start[q + 1]):
            p = pred[j]
            if is_in[p]:
                is_in[p] = False
                queue[num_queued] = p
                num_queued += 1
    out = np.zeros((num_states, 4), np.uint64)
    for s in range(num_states):
        if is_in[s]:
            for w in range(4):
                out[s, w] = bits[w]
    return out


@numba.njit(cache=True, nogil=True)
def chain_coverage(
    transitions, byte_to_class, max_height, max_cells=1 << 62
):  # pragma: no cover - jitted
    """Chain coverage of a byte DFA (``(S, K)`` class table, ``(256,)`` byte -> class):
    ``(covered (H + 1, S, 4) uint64, u (S,))``.

    Every state ``s`` has a uniform successor ``u(s)`` (the state most bytes lead to) and
    ``U(s)``, the bytes leading there (a bit set of 4 words). ``covered[h, s] = U(s) &
    U(u(s)) & ... & U(u^(h-1)(s))`` for ``h >= 1``: every byte string of length at most ``h``
    over those bytes stays alive from ``s``. ``covered[0, s]`` is the set of bytes ``s`` can
    read at all. Levels stop at ``max_height`` or where they stop changing (``covered[h] ==
    covered[h - 1]`` for every state, hence for every later ``h``), so ``covered[min(h, H),
    s]`` is exact for every ``h >= 1``.

    At most ``max_cells`` ``(level, state)`` cells are kept: a DFA of 70k states with a counted
    chain changed at every one of 82 levels (188 MB). Cut short at level ``L`` before the
    levels stop changing, a last level ``L + 1`` is empty: no byte set lies within it, so a
    subtree taller than ``L`` is walked into instead of finished at once, and the bisections
    over levels (``_chain_reach``) stop below it; every level kept is exact."""
    num_states, num_classes = transitions.shape
    class_bits = np.zeros((num_classes, 4), np.uint64)
    class_size = np.zeros(num_classes, np.int64)
    for b in range(256):
        k = byte_to_class[b]
        class_bits[k, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
        class_size[k] += 1
    uniform = np.full(num_states, -1, np.int64)
    first = np.zeros((num_states, 4), np.uint64)
    live = np.zeros((num_states, 4), np.uint64)
    counts = np.zeros(num_states + 1, np.int64)
    for s in range(num_states):
        best, best_count = -1, 0
        for k in range(num_classes):
            q = transitions[s, k]
            if q >= 0:
                counts[q] += class_size[k]
                if counts[q] > best_count or (counts[q] == best_count and q < best):
                    best, best_count = q, counts[q]
        for k in range(num_classes):
            q = transitions[s, k]
            if q >= 0:
                counts[q] = 0
                for w in range(4):
                    live[s, w] |= class_bits[k, w]
                    if q == best:
                        first[s, w] |= class_bits[k, w]
        uniform[s] = best
    most = min(max_height, max(2, max_cells // max(num_states, 1) - 2))
    out = np.empty((most + 2, num_states, 4), np.uint64)  # levels 0..most and a last empty one
    out[0] = live
    out[1] = first
    # covered[h, s] = first[s] & covered[h - 1, u(s)] changes at level h >= 3 only where
    # covered[h - 1, u(s)] changed at h - 1: a level is the one before (one copy) with the
    # states whose uniform successor just changed recomputed (their predecessors by u, CSR)
    pred_start = np.zeros(num_states + 1, np.int64)
    for s in range(num_states):
        if uniform[s] >= 0:
            pred_start[uniform[s] + 1] += 1
    for s in range(num_states):
        pred_start[s + 1] += pred_start[s]
    preds = np.empty(pred_start[num_states], np.int64)
    fill = pred_start[:-1].copy()
    for s in range(num_states):
        u = uniform[s]
        if u >= 0:
            preds[fill[u]] = s
            fill[u] += 1
    changed = np.empty(num_states, np.int64)  # the states that changed at the last level
    candidates = np.empty(num_states, np.int64)
    is_candidate = np.zeros(num_states, np.bool_)
    num_changed = 0
    num_levels = 2
    is_settled = False
    for h in range(2, most + 1):
        prev = out[h - 1]
        cur = out[h]
        num_candidates = 0
        if h == 2:  # level 1 is first, not first & level 0: every state
            for s in range(num_states):
                candidates[s] = s
            num_candidates = num_states
        else:
            cur[:] = prev
            for k in range(num_changed):
                q = changed[k]
                for j in range(pred_start[q], pred_start[q + 1]):
                    p = preds[j]
                    if not is_candidate[p]:
                        is_candidate[p] = True
                        candidates[num_candidates] = p
                        num_candidates += 1
        num_changed = 0
        for k in range(num_candidates):
            s = candidates[k]
            is_candidate[s] = False
            u = uniform[s]
            is_changed = False
            for w in range(4):
                cur[s, w] = first[s, w] & prev[u, w] if u >= 0 else np.uint64(0)
                if cur[s, w] != prev[s, w]:
                    is_changed = True
            if is_changed:
                changed[num_changed] = s
                num_changed += 1
        if num_changed == 0:
            is_settled = True
            break
        num_levels = h + 1
    if not is_settled and most < max_height:  # cut short: an empty last level
        out[num_levels] = 0
        num_levels += 1
    return out[:num_levels], uniform


@numba.njit(cache=True, nogil=True, inline="always")
def _row_hash(rows, i):  # pragma: no cover - jitted
    """Hash of row ``i`` of ``rows`` (``(N, W)`` unsigned integers): four FNV-1a lanes over
    words ``w = k (mod 4)``, so the multiplies overlap, folded into one uint64."""
    num_words = rows.shape[1]
    prime = np.uint64(1099511628211)
    h0 = h1 = h2 = h3 = np.uint64(14695981039346656037)
    w = 0
    while w + 4 <= num_words:
        h0 = (h0 ^ np.uint64(rows[i, w])) * prime
        h1 = (h1 ^ np.uint64(rows[i, w + 1])) * prime
        h2 = (h2 ^ np.uint64(rows[i, w + 2])) * prime
        h3 = (h3 ^ np.uint64(rows[i, w + 3])) * prime
        w += 4
    while w < num_words:
        h0 = (h0 ^ np.uint64(rows[i, w])) * prime
        w += 1
    return (((h0 * prime) ^ h1) * prime ^ h2) * prime ^ h3


@numba.njit(cache=True, nogil=True)
def group_rows(rows, row_of, store, num_stored, slot_group, slot_hash):  # pragma: no cover
    """Group the rows of ``rows`` (``(N, W)`` unsigned integers) with the distinct rows kept so
    far: write ``row_of[i]`` (``(N,)`` int32) = the index in ``store`` of the row equal to row
    ``i``, appending rows met for the first time at ``store[num_stored]``, ... (copies, in
    order of first occurrence); return the new ``num_stored``.

    ``store`` (``(C, W)``, same dtype, ``C >= num_stored + N``) holds the distinct rows;
    ``slot_group`` (int64, -1 free) and ``slot_hash`` (uint64), both of a power-of-two size at
    least ``2 C``, are an open-addressing table of their hashes (load <= 1/2), updated in place.
    Rows are compared word by word on a hash match, so equal rows and only they share an index.
    """
    mask = np.uint64(len(slot_group) - 1)
    num_words = rows.shape[1]
    for i in range(rows.shape[0]):
        h = _row_hash(rows, i)
        j = np.int64(h & mask)
        while True:
            g = slot_group[j]
            if g < 0:
                slot_group[j] = num_stored
                slot_hash[j] = h
                store[num_stored] = rows[i]
                row_of[i] = num_stored
                num_stored += 1
                break
            if slot_hash[j] == h:
                is_equal = True
                for w in range(num_words):
                    if store[g, w] != rows[i, w]:
                        is_equal = False
                        break
                if is_equal:
                    row_of[i] = g
                    break
            j = (j + 1) & np.int64(mask)
    return num_stored


def hash_slots(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty :func:`group_rows` table for up to ``capacity`` distinct rows: ``(slot_group
    (S,) int64 all -1, slot_hash (S,) uint64)``, ``S`` the least power of two >= ``2 capacity``."""
    size = 2
    while size < 2 * capacity:
        size *= 2
    return np.full(size, -1, np.int64), np.zeros(size, np.uint64)


def unique_rows_inplace(rows: np.ndarray, row_of: np.ndarray) -> int:
    """Group the rows of ``rows`` (``(N, W)`` unsigned integers, C-contiguous) in place: on
    return ``rows[:U]`` are the distinct rows in order of first occurrence (``U`` returned) and
    ``row_of[i]`` (``(N,)`` int32) is the index of row ``i``'s among them. :func:`group_rows`
    with ``rows`` as its own store (row ``i`` moves to index ``U <= i``: only rows already
    grouped are overwritten)."""
    return group_rows(rows, row_of, rows, 0, *hash_slots(len(rows)))


@numba.njit(cache=True, nogil=True)
def dense_rows(nodes, row_lo, row_hi, token_ids, num_words):  # pragma: no cover - jitted
    """``(len(nodes), num_words)`` uint32: the packed token set of each node's subtree."""
    out = np.zeros((len(nodes), num_words), np.uint32)
    for i in range(len(nodes)):
        for r in range(row_lo[nodes[i]], row_hi[nodes[i]]):
            t = token_ids[r]
            out[i, t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return out


@numba.njit(cache=True, nogil=True)
def trie_ends(
    transitions,
    byte_to_class,
    node_byte,
    state,
    child_start,
    child_end,
    token_start,
    token_rows,
    token_ids,
    row_lo,
    row_hi,
    height,
    below,
    uniform,
    first,
    out,
):  # pragma: no cover - jitted
    """Set ``out[t]`` (``(V,)`` int32, ``-1`` filled) to the DFA state after token ``t`` from
    ``state`` for every text token that stays alive: the trie walked depth first, one step per
    alive token prefix (the sparse transitions of one state). A subtree entered in a state
    ``q`` that loops on itself (``uniform[q] == q``) over every byte below (``below`` within
    ``first[q]``, the looping bytes) ends every token in ``q``: its row range at once."""
    stack_node = np.empty(len(child_start), np.int64)
    stack_state = np.empty(len(child_start), np.int64)
    stack_node[0] = 0
    stack_state[0] = state
    depth = 1
    while depth:
        depth -= 1
        node = stack_node[depth]
        cur = stack_state[depth]
        for child in range(child_start[node], child_end[node]):
            nxt = transitions[cur, byte_to_class[node_byte[child]]]
            if nxt < 0:
                continue
            if height[child] > 0 and uniform[nxt] == nxt and _is_within(below[child], first[nxt]):
                for r in range(row_lo[child], row_hi[child]):
                    out[token_ids[r]] = nxt
                continue
            for q in range(token_start[child], token_start[child + 1]):
                out[token_ids[token_rows[q]]] = nxt
            if height[child] > 0:
                stack_node[depth] = child
                stack_state[depth] = nxt
                depth += 1


@numba.njit(cache=True, nogil=True)
def set_ids_among(words, ids):  # pragma: no cover - jitted
    """The ``ids`` (int64, any order kept) whose bits are set in packed ``words`` (bit
    ``i % 32`` of word ``i // 32`` = id ``i``; an id past the row is unset): a few
    candidates' bits read alone, O(len(ids)) instead of a pass over the row."""
    out = np.empty(ids.shape[0], np.int64)
    num_words = words.shape[0]
    k = 0
    for i in range(ids.shape[0]):
        token_id = ids[i]
        word = token_id >> 5
        if word < num_words and (np.int64(np.uint32(words[word])) >> (token_id & 31)) & 1:
            out[k] = token_id
            k += 1
    return out[:k]


@numba.njit(cache=True, nogil=True)
def set_bit_ids(words):  # pragma: no cover - jitted
    """Ascending int64 ids of the set bits of packed ``uint32`` ``words`` (bit ``i % 32`` of
    word ``i // 32`` = id ``i``): a popcount pass, then the bits of each nonzero word (no
    ``(32 W,)`` unpacked byte array as ``np.unpackbits`` + ``np.nonzero`` need)."""
    count = 0
    for w in range(words.shape[0]):
        x = np.uint32(words[w])  # (int32 rows too: their sign bit is bit 31)
        while x:
            x &= x - np.uint32(1)
            count += 1
    out = np.empty(count, np.int64)
    k = 0
    for w in range(words.shape[0]):
        x = np.int64(np.uint32(words[w]))
        if x == 0:
            continue
        base = w * 32
        for bit in range(32):
            if (x >> bit) & 1:
                out[k] = base + bit
                k += 1
    return out
