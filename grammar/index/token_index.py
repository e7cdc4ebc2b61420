"""TokenIndex: for every DFA state, the tokens that keep the DFA alive and where they lead.

All tokens are walked through the DFA together with numpy: the vocabulary is a padded
``(num_tokens, max_len)`` uint8 matrix sorted by bytes, so the tokens that start with a given
byte form one contiguous slice. For a batch of states, the first step keeps only the slices of
bytes the state allows (dead branches are never touched), and each further step advances the
surviving (state, token) pairs by one byte with one gather. A token is allowed iff its walk
never hits a dead transition (the DFA is trimmed, so alive means "some completion exists").

Masks are built by :func:`index_packed_rows` instead: a numba kernel
(:mod:`formcast.grammar.index.kernels`) walks the vocabulary as a byte trie (children of
a node contiguous, a node's subtree = one contiguous range of sorted token rows) depth first
from each state, one step per alive token *prefix*, and sets the allowed bits straight into
the packed rows. A (state, node) pair whose remaining subtree stays on its state's uniform
chain (bytes that loop on the state inside a JSON string, or advance a ``maxLength`` counter;
see :class:`TrieTokens`) is finished at once as a row range (large subtrees as one OR of a
precomputed packed row): every token below is allowed. So the cost is the number of distinct
alive prefixes off such chains, not the number of allowed (state, token) pairs (millions for
a JSON-schema DFA).

Rows are stored packed (bit ``i % 32`` of int32 word ``i // 32`` = token ``i``); the sparse
transition table (allowed token ids and the state each leads to) is computed per state on
demand. Small automata are indexed ahead of use (at compile time, and what the compile's share
of time did not reach by a background thread); large ones lazily, one state at a time,
memoised. A state's walk records its finished pieces (dead subtrees, subtrees alive throughout,
tokens ending on the way) and writes the cheaper side: the alive pieces, or every text token
minus the dead ones (a state inside a JSON string allows nearly every token).

An eager build walks only some states in full and derives the others' rows from another
state's (:class:`Derivations`): by difference (a key complement's prefix moves like the string
loop but on one letter: that letter's subtree is walked again) or by shift (a bounded string's
position agrees with the next one on every token up to a proven length: a copy, with the
longer tokens walked again) or as a twin (states inside two JSON strings of a schema move
alike until the closing quote: a copy, with the ~160 tokens holding a quote walked again).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.automata.kernels import hopcroft
from formcast.grammar.index.background_indexer import BACKGROUND_INDEXER
from formcast.grammar.index.kernels import (
    STRING_TEXT_BYTES,
    TWIN_DEPTH,
    chain_coverage,
    closed_bytes,
    dense_rows,
    difference_refs,
    group_rows,
    hash_slots,
    index_rows,
    trie_ends,
    unique_rows_inplace,
)
from formcast.grammar.index.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_EAGER_CHUNK = 256  # states indexed between two clock checks
# CPU seconds of the background thread one index may take before it turns lazy (rows built so
# far are kept); the numba trie walk indexes JSON-schema DFA states at ~20 us each (7k states
# in 0.14 s)
AHEAD_MAX_S = 1.0
# trie subtrees with at least this many tokens get a precomputed packed row: finishing one as
# a row range is then one OR of num_words words instead of one bit write per token
DENSE_MIN_TOKENS = 256
# an eager build derives a state's row from its uniform successor's when the first bytes they
# move differently on are at most this fraction of those the state reads (kernels.difference_refs)
DIFF_MIN_RATIO = 8
# a state's row is derived by shift when the tokens to walk again are at most one per this
# many words of a row (a row copy costs num_words words; a token walk about its length)
FIX_WORDS_PER_TOKEN = 8
# states that move alike on every byte but this one derive their rows from one another (the
# quote: the insides of a schema's JSON strings differ only after it; TrieTokens.twins)
TWIN_BYTE = 0x22
# (level, state) cells of one DFA's chain coverage (32 bytes each: 64 MB); a larger DFA keeps
# fewer levels, and walks into the subtrees taller than those (kernels.chain_coverage)
COVERAGE_MAX_CELLS = 1 << 21


@dataclass(frozen=True, eq=False)
class VocabTrie:
    """The sorted vocabulary as a byte trie (node 0 is the root, the empty prefix).

    Nodes are numbered level by level and lexicographically within a level, so the children of
    a node are the contiguous ids ``child_start[n]:child_end[n]``; the tokens with the node's
    prefix are the contiguous sorted rows ``row_lo[n]:row_hi[n]`` of :class:`VocabTable`.

    Attributes
    ----------
    node_byte:
        ``(N,)`` uint8 label of the edge into each node (0 for the root).
    child_start, child_end:
        ``(N,)`` int64 children ranges.
    row_lo, row_hi:
        ``(N,)`` int64 rows of the tokens in each node's subtree (the node's own included).
    token_start, token_rows:
        Tokens whose bytes are exactly the node's prefix:
        ``token_rows[token_start[n]:token_start[n + 1]]`` (several ids may share bytes).
    has_token:
        ``(N,)`` bool, some token ends at the node.
    bytes_below:
        ``(N, 4)`` uint64 bitset of the bytes labelling the node's strict descendants
        (bit ``b % 64`` of word ``b // 64``).
    height:
        ``(N,)`` int64: the most bytes any token of the subtree has beyond the node's prefix.
    """

    node_byte: np.ndarray
    child_start: np.ndarray
    child_end: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    token_start: np.ndarray
    token_rows: np.ndarray
    has_token: np.ndarray
    bytes_below: np.ndarray
    height: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.node_byte)

    @classmethod
    def from_rows(cls, matrix: np.ndarray, lengths: np.ndarray) -> VocabTrie:
        """Build from the byte-sorted ``(T, max_len)`` token matrix and its lengths."""
        num_rows = len(lengths)
        # node of each row's prefix at the current depth (all rows start at the root)
        node_of_row = np.zeros(num_rows, dtype=np.int64)
        labels, parents = [np.zeros(1, np.uint8)], [np.full(1, -1, np.int64)]
        row_lo, row_hi = [np.zeros(1, np.int64)], [np.full(1, num_rows, np.int64)]
        end_nodes, end_rows = [], []
        count = 1
        level_starts = [0, 1]
        for depth in range(1, matrix.shape[1] + 1):
            rows = np.flatnonzero(lengths >= depth)
            if not len(rows):
                break
            parent = node_of_row[rows]
            label = matrix[rows, depth - 1]
            # sorted rows: equal (parent, label) runs are contiguous and form one node
            is_new = np.ones(len(rows), dtype=bool)
            is_new[1:] = (parent[1:] != parent[:-1]) | (label[1:] != label[:-1])
            ids = count + np.cumsum(is_new) - 1
            firsts = np.flatnonzero(is_new)
            lasts = np.append(firsts[1:], len(rows)) - 1
            labels.append(label[firsts])
            parents.append(parent[firsts])
            row_lo.append(rows[firsts])
            row_hi.append(rows[lasts] + 1)
            is_end = lengths[rows] == depth
            end_nodes.append(ids[is_end])
            end_rows.append(rows[is_end])
            node_of_row[rows] = ids
            count += len(firsts)
            level_starts.append(count)
        node_byte = np.concatenate(labels)
        parent_of = np.concatenate(parents)
        nodes = np.arange(count)
        child_start = np.searchsorted(parent_of[1:], nodes, side="left") + 1
        child_end = np.searchsorted(parent_of[1:], nodes, side="right") + 1
        ends = np.concatenate(end_nodes) if end_nodes else np.zeros(0, np.int64)
        end_row = np.concatenate(end_rows) if end_rows else np.zeros(0, np.int64)
        order = np.argsort(ends, kind="stable")
        ends, end_row = ends[order], end_row[order]
        has_token = np.zeros(count, dtype=bool)
        has_token[ends] = True
        # bytes below: children's labels OR their own bytes below, deepest level first
        below = np.zeros((count, 4), dtype=np.uint64)
        label_bits = np.zeros((count, 4), dtype=np.uint64)
        word, bit = node_byte[1:] // 64, (node_byte[1:] % 64).astype(np.uint64)
        label_bits[np.arange(1, count), word] = np.left_shift(np.uint64(1), bit)
        height = np.zeros(count, dtype=np.int64)
        for lo, hi in zip(level_starts[-2:0:-1], level_starts[-1:1:-1], strict=True):
            # one level (ids lo..hi, parents non-decreasing), deepest first
            parent = parent_of[lo:hi]
            firsts = np.flatnonzero(np.diff(parent, prepend=-1) != 0)
            combined = below[lo:hi] | label_bits[lo:hi]
            below[parent[firsts]] = np.bitwise_or.reduceat(combined, firsts, axis=0)
            height[parent[firsts]] = np.maximum.reduceat(height[lo:hi] + 1, firsts)
        return cls(
            node_byte=node_byte,
            child_start=child_start.astype(np.int64),
            child_end=child_end.astype(np.int64),
            row_lo=np.concatenate(row_lo),
            row_hi=np.concatenate(row_hi),
            token_start=np.searchsorted(ends, np.arange(count + 1)).astype(np.int64),
            token_rows=end_row.astype(np.int64),
            has_token=has_token,
            bytes_below=below,
            height=height,
        )


@dataclass(frozen=True, eq=False)
class VocabTable:
    """Vocabulary bytes laid out for vectorised DFA walks (shared by every grammar).

    Attributes
    ----------
    token_ids:
        ``(T,)`` int32 ids of the text tokens (non-empty bytes, not special), sorted by bytes.
    matrix:
        ``(T, max_len)`` uint8 token bytes, zero padded.
    lengths:
        ``(T,)`` int32 byte lengths.
    first_byte_bounds:
        ``(257,)`` int64: tokens starting with byte ``b`` are rows ``bounds[b]:bounds[b+1]``.
    eos_token_ids:
        ``(E,)`` int32.
    num_words:
        ``ceil(vocab_size / 32)``: int32 words in one bitmask row.
    bytes_by_step:
        ``(max_len, T)`` uint16: byte ``j`` of every token (column-major), 256 past the end.
    trie:
        The :class:`VocabTrie` of the same rows.
    """

    token_ids: np.ndarray
    matrix: np.ndarray
    lengths: np.ndarray
    first_byte_bounds: np.ndarray
    eos_token_ids: np.ndarray
    vocab_size: int
    num_words: int
    bytes_by_step: np.ndarray
    trie: VocabTrie
    _dense: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _held: np.ndarray | None = field(default=None, repr=False, compare=False)
    _text: np.ndarray | None = field(default=None, repr=False, compare=False)
    _eos: np.ndarray | None = field(default=None, repr=False, compare=False)
    _by_length: np.ndarray | None = field(default=None, repr=False, compare=False)
    _num_longer: np.ndarray | None = field(default=None, repr=False, compare=False)
    _after_quote: np.ndarray | None = field(default=None, repr=False, compare=False)
    _commas: np.ndarray | None = field(default=None, repr=False, compare=False)
    _children_cost: np.ndarray | None = field(default=None, repr=False, compare=False)
    _holding: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def _computed_once(self, name: str, build: Callable[[], np.ndarray]) -> np.ndarray:
        """The read-only array cached in field ``name``, built by ``build`` on first use."""
        found = getattr(self, name)
        if found is None:
            found = build()
            found.flags.writeable = False
            object.__setattr__(self, name, found)
        return found

    def max_chars_after_quote(self) -> int:
        """The most characters (bytes that start a UTF-8 character) a text token holds after
        one of its ``"`` bytes and before the next: the most a token that opens a JSON string
        can put into it (computed once)."""

        def build() -> np.ndarray:
            most = 0
            for row in np.flatnonzero((self.matrix == 0x22).any(axis=1)).tolist():
                data = self.matrix[row, : self.lengths[row]].tobytes()
                for part in data.split(b'"')[1:]:
                    most = max(most, sum(1 for b in part if not 0x80 <= b < 0xC0))
            return np.asarray(most, dtype=np.int64)

        return int(self._computed_once("_after_quote", build))

    def max_commas(self) -> int:
        """The most ``,`` bytes one text token holds (computed once): a JSON array opened by
        a token gains at most this many separators within it."""
        return int(
            self._computed_once(
                "_commas",
                lambda: np.asarray((self.matrix == 0x2C).sum(axis=1).max(initial=0), np.int64),
            )
        )

    def rows_by_length(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows (T,) int64, num_longer (L + 1,) int64)``: the trie rows by decreasing byte
        length, and for each ``d <= L`` (the longest token) how many tokens are longer than
        ``d`` (the first ``num_longer[d]`` of ``rows``); computed once."""
        rows = self._computed_once(
            "_by_length", lambda: np.argsort(-self.lengths, kind="stable").astype(np.int64)
        )
        num_longer = self._computed_once(
            "_num_longer",
            lambda: (
                len(self.lengths)
                - np.searchsorted(
                    np.sort(self.lengths), np.arange(int(self.lengths.max(initial=0)) + 1), "right"
                )
            ).astype(np.int64),
        )
        return rows, num_longer

    def rows_holding(self, byte: int) -> np.ndarray:
        """``(R,)`` int64: the rows whose token holds ``byte`` (computed once per byte;
        read-only)."""
        found = self._holding.get(byte)
        if found is None:
            found = np.flatnonzero((self.bytes_by_step == byte).any(axis=0)).astype(np.int64)
            found.flags.writeable = False
            self._holding[byte] = found
        return found

    def held_bytes(self) -> np.ndarray:
        """``(256,)`` bool: the bytes some text token holds (computed once; read-only)."""
        return self._computed_once(
            "_held", lambda: np.bincount(self.bytes_by_step.ravel(), minlength=257)[:256] > 0
        )

    def text_row(self) -> np.ndarray:
        """``(num_words,)`` uint32: the packed set of every text token (computed once)."""
        trie = self.trie
        return self._computed_once(
            "_text",
            lambda: dense_rows(
                np.zeros(1, dtype=np.int64),
                trie.row_lo,
                trie.row_hi,
                self.token_ids,
                self.num_words,
            )[0],
        )

    def eos_words(self) -> np.ndarray:
        """``(num_words,)`` uint32: the packed set of the EOS ids (computed once)."""

        def build() -> np.ndarray:
            bits = np.zeros(self.num_words * 32, dtype=bool)
            bits[self.eos_token_ids] = True
            return np.packbits(bits, bitorder="little").view("<u4").copy()

        return self._computed_once("_eos", build)

    def dense_subtrees(self) -> tuple[np.ndarray, np.ndarray]:
        """Packed token sets of the large trie subtrees (computed once): ``(dense_of, dense)``,
        ``dense[dense_of[n]]`` the ``(num_words,)`` uint32 row of node ``n``'s subtree for
        subtrees of at least ``DENSE_MIN_TOKENS`` tokens (``dense_of[n] = -1`` otherwise)."""
        if self._dense is None:
            trie = self.trie
            sizes = trie.row_hi - trie.row_lo
            nodes = np.flatnonzero(sizes >= DENSE_MIN_TOKENS)
            nodes = nodes[nodes > 0]  # the root is never a child
            dense_of = np.full(trie.num_nodes, -1, dtype=np.int64)
            dense_of[nodes] = np.arange(len(nodes))
            dense = dense_rows(nodes, trie.row_lo, trie.row_hi, self.token_ids, self.num_words)
            object.__setattr__(self, "_dense", (dense_of, dense))
        return self._dense

    def children_cost(self) -> np.ndarray:
        """``(N,)`` int64 per trie node: the cost of finishing each of its children's subtrees
        (``num_words`` for one with a dense row, else its token count), summed (computed
        once; :func:`~formcast.grammar.index.kernels.index_rows` costs a sparse node's dead
        children as this less its alive ones)."""

        def build() -> np.ndarray:
            trie = self.trie
            dense_of, _ = self.dense_subtrees()
            costs = np.where(dense_of >= 0, self.num_words, trie.row_hi - trie.row_lo)
            before = np.concatenate(([0], np.cumsum(costs)))  # children ranges are contiguous
            return before[trie.child_end] - before[trie.child_start]

        return self._computed_once("_children_cost", build)

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary) -> VocabTable:
        ids = [
            i
            for i, piece in enumerate(vocab.token_bytes)
            if piece and i not in vocab.special_token_ids
        ]
        ids.sort(key=vocab.token_bytes.__getitem__)
        pieces = [vocab.token_bytes[i] for i in ids]
        lengths = np.fromiter(map(len, pieces), dtype=np.int32, count=len(pieces))
        max_len = int(lengths.max()) if len(pieces) else 1
        flat = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        matrix = np.zeros((len(pieces), max_len), dtype=np.uint8)
        rows = np.repeat(np.arange(len(pieces)), lengths)
        cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        matrix[rows, cols] = flat
        first = matrix[:, 0] if len(pieces) else np.zeros(0, dtype=np.uint8)
        bounds = np.searchsorted(first, np.arange(257), side="left").astype(np.int64)
        return cls(
            token_ids=np.asarray(ids, dtype=np.int32),
            matrix=matrix,
            lengths=lengths,
            first_byte_bounds=bounds,
            eos_token_ids=np.asarray(sorted(vocab.eos_token_ids), dtype=np.int32),
            vocab_size=vocab.vocab_size,
            num_words=(vocab.vocab_size + 31) // 32,
            bytes_by_step=_bytes_by_step(matrix, lengths),
            trie=VocabTrie.from_rows(matrix, lengths),
        )


def _bytes_by_step(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(max_len, T)`` uint16 column-major token bytes; 256 marks "past the end"."""
    steps = np.arange(matrix.shape[1])
    padded = np.where(steps[None, :] < lengths[:, None], matrix.astype(np.uint16), np.uint16(256))
    return np.ascontiguousarray(padded.T)


_TABLES: weakref.WeakValueDictionary[str, VocabTable] = weakref.WeakValueDictionary()
_TABLES_LOCK = threading.Lock()
# the last few tables stay alive even when no grammar holds them (a table costs ~0.1 s to build)
_RECENT: collections.OrderedDict[str, VocabTable] = collections.OrderedDict()
_NUM_RECENT = 4


def vocab_table(vocab: Vocabulary) -> VocabTable:
    """The (cached per vocabulary hash) :class:`VocabTable` of ``vocab``."""
    with _TABLES_LOCK:
        table = _TABLES.get(vocab.hash)
        if table is None:
            table = VocabTable.from_vocabulary(vocab)
            _TABLES[vocab.hash] = table
        _RECENT[vocab.hash] = table
        _RECENT.move_to_end(vocab.hash)
        while len(_RECENT) > _NUM_RECENT:
            _RECENT.popitem(last=False)
        return table


class GrammarTokens:
    """The DFA table extended with an end-of-token column, for one-gather-per-step walks.

    Column ``num_classes`` of ``extended`` holds ``-2 - s`` for state ``s`` ("finished in s");
    byte value 256 (the padding past a token's end in ``VocabTable.bytes_by_step``) maps to it.
    """

    def __init__(self, dfa: ByteDFA, table: VocabTable) -> None:
        num_states, num_classes = dfa.transitions.shape
        finished = (-2 - np.arange(num_states, dtype=np.int32))[:, None]
        extended = np.concatenate([dfa.transitions, finished], axis=1)  # (N, K + 1)
        self.flat = np.ascontiguousarray(extended).reshape(-1)
        self.width = num_classes + 1
        self.class_of = np.append(dfa.byte_to_class, num_classes).astype(np.int32)  # (257,)


def walk_tokens(
    dfa: ByteDFA, table: VocabTable, states: np.ndarray, tokens: GrammarTokens | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk every text token from each of ``states``.

    Returns
    -------
    (owner, token_rows, end_states):
        For every (state, token) pair that stays alive: the index into ``states``, the row in
        ``table`` and the DFA state after the token. Grouped by ``owner`` (ascending).
    """
    if tokens is None:
        tokens = GrammarTokens(dfa, table)
    transitions, classes = dfa.transitions, dfa.byte_to_class
    bounds = table.first_byte_bounds
    first_next = transitions[states][:, classes]  # (S, 256)
    owner_idx, first_bytes = np.nonzero(first_next >= 0)
    counts = bounds[first_bytes.astype(np.int64) + 1] - bounds[first_bytes]
    nonempty = counts > 0
    owner_idx, first_bytes, counts = owner_idx[nonempty], first_bytes[nonempty], counts[nonempty]
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    rows = np.arange(total, dtype=np.int64) - np.repeat(offsets - bounds[first_bytes], counts)
    rows = rows.astype(np.int32)
    owner = np.repeat(owner_idx.astype(np.int32), counts)
    cur = np.repeat(first_next[owner_idx, first_bytes], counts).astype(np.int32)

    out_owner, out_rows, out_states = [], [], []
    flat, width, class_of = tokens.flat, tokens.width, tokens.class_of
    by_step = table.bytes_by_step
    for step in range(1, by_step.shape[0] + 1):
        if not len(rows):
            break
        if step < by_step.shape[0]:
            nxt = flat[cur * width + class_of[by_step[step][rows]]]
        else:
            nxt = -2 - cur  # every token has ended
        is_finished = nxt <= -2
        if is_finished.any():
            out_owner.append(owner[is_finished])
            out_rows.append(rows[is_finished])
            out_states.append(-2 - nxt[is_finished])
        alive = nxt >= 0
        owner, rows, cur = owner[alive], rows[alive], nxt[alive]
    if not out_owner:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty, empty
    owner = np.concatenate(out_owner)
    rows = np.concatenate(out_rows)
    ends = np.concatenate(out_states)
    order = np.argsort(owner, kind="stable")
    return owner[order], rows[order], ends[order]


class TrieTokens:
    """Per-DFA uniform chains for the trie walk of :func:`index_packed_rows`.

    Every state ``s`` has a *uniform successor* ``u(s)``: the state most bytes lead to (``-1``
    if none; ties to the smaller id), and ``U(s)``, the bytes leading there. ``covered[h, s]``
    (``(4,)`` uint64 bitset) is ``U(s) & U(u(s)) & ... & U(u^(h-1)(s))``: any byte string of
    length <= ``h`` over those bytes stays alive from ``s`` (each step lands on the next state
    of the chain, and every state of a trimmed DFA is alive). A self-loop (inside a JSON
    string) is the chain ``u(s) = s``; a counted repetition is a chain of distinct states.
    Levels stop where they stop changing, so ``covered[min(h, max_height), s]`` is exact for
    every ``h`` (computed by :func:`~formcast.grammar.index.kernels.chain_coverage`), or
    where ``COVERAGE_MAX_CELLS`` cuts them short: then the last level is empty.
    """

    def __init__(self, dfa: ByteDFA, table: VocabTable) -> None:
        longest = int(table.trie.height.max(initial=0))
        self.covered, self.uniform = chain_coverage(
            dfa.transitions, dfa.byte_to_class, max(longest, 1), COVERAGE_MAX_CELLS
        )
        self.max_height = len(self.covered) - 1
        # (S, 4): bytes over which every string stays alive, at any length (kernels.closed_bytes)
        self.closed = closed_bytes(dfa.transitions, dfa.byte_to_class, STRING_TEXT_BYTES)
        self._dfa, self._table = dfa, table
        self._derivations: Derivations | None = None
        self._twins: tuple[np.ndarray, np.ndarray] | None = None
        self._twin_class: int | None = None
        self._arguments: tuple[tuple[np.ndarray, ...], ...] | None = None  # head, middle

    def kernel_arguments(self) -> tuple[tuple[np.ndarray, ...], ...]:
        """The arguments of :func:`~formcast.grammar.index.kernels.index_rows` around
        ``states`` and ``out, *refs`` (computed once: a first visit's row is one kernel call).

        The twin rows are those of :meth:`twins` once computed (by :meth:`derivations`, or
        in the background for a lazy index: only a twin's row reads them), else none: a
        compile never waits for the partition of a large DFA (~10 ms on 12k states)."""
        if self._arguments is None:
            dfa, table = self._dfa, self._table
            trie = table.trie
            dense_of, dense = table.dense_subtrees()
            self._arguments = (
                (dfa.transitions, dfa.byte_to_class, trie.node_byte),
                (
                    trie.child_start, trie.child_end, trie.token_start, trie.token_rows,
                    table.token_ids, trie.row_lo, trie.row_hi, trie.height, trie.bytes_below,
                    self.covered, self.uniform, self.closed, table.lengths, dense_of, dense,
                    table.children_cost(), table.text_row(),
                ),
            )  # fmt: skip
        long_rows, _ = self._table.rows_by_length()
        twin_rows = _NO_TWIN_ROWS if self._twins is None else self._twins[1]
        return (*self._arguments, (self._table.matrix, long_rows, twin_rows))

    def known_twins(self) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`twins` if computed already (by an eager build's derivations, or in the
        background), else None."""
        return self._twins

    def twin_class(self) -> int:
        """The byte class of ``TWIN_BYTE`` where it is a class of its own and few enough
        tokens hold it for a derivation to walk them again (as :meth:`twins` needs), else -1
        (computed once)."""
        if self._twin_class is None:
            dfa, table = self._dfa, self._table
            twin_class = int(dfa.byte_to_class[TWIN_BYTE])
            is_own_class = int((dfa.byte_to_class == twin_class).sum()) == 1
            num_rows = len(table.rows_holding(TWIN_BYTE))
            is_cheap = num_rows <= table.num_words // FIX_WORDS_PER_TOKEN
            is_usable = is_own_class and dfa.transitions.shape[1] > 1 and is_cheap
            self._twin_class = twin_class if is_usable else -1
        return self._twin_class

    def twins(self) -> tuple[np.ndarray, np.ndarray]:
        """``(block (S,) int64, rows (R,) int64)``: each state's block of the coarsest
        partition stable under every byte class but ``TWIN_BYTE``'s (``-1`` everywhere when
        that byte shares its class with others, or when more tokens than a derivation may walk
        again hold it) and the trie rows whose token holds ``TWIN_BYTE`` (computed once).

        Two states of one block move alike on every string without the byte: a token without
        it is alive from both or from neither (:func:`~formcast.grammar.index.kernels.index_rows`).
        Computed by :func:`~formcast.grammar.automata.kernels.hopcroft` over the other
        classes, every state accepting (aliveness is all a row reads).
        """
        if self._twins is None:
            dfa, table = self._dfa, self._table
            num_states = dfa.num_states
            block = np.full(num_states, -1, dtype=np.int64)
            rows = table.rows_holding(TWIN_BYTE)
            twin_class = self.twin_class()
            if twin_class >= 0:
                others = np.delete(dfa.transitions, twin_class, axis=1)  # (S, K - 1)
                found, _ = hopcroft(
                    np.ascontiguousarray(others), np.ones(num_states, dtype=np.bool_)
                )
                block = found.astype(np.int64)
            else:
                rows = rows[:0]
            self._twins = (block, rows)
        return self._twins

    def derivations(self) -> Derivations:
        """Which states an eager build derives from another state's row, and in which order
        (:func:`~formcast.grammar.index.kernels.difference_refs`, computed once)."""
        if self._derivations is None:
            table = self._table
            trie = table.trie
            first = trie.node_byte[trie.child_start[0] : trie.child_end[0]].astype(np.int64)
            first_bits = np.zeros(4, dtype=np.uint64)
            np.bitwise_or.at(
                first_bits, first >> 6, np.left_shift(np.uint64(1), (first & 63).astype(np.uint64))
            )
            _, num_longer = table.rows_by_length()
            num_states = self._dfa.num_states
            self._derivations = Derivations(
                *difference_refs(
                    self._dfa.transitions, self._dfa.byte_to_class, self.uniform, first_bits,
                    DIFF_MIN_RATIO, len(num_longer) - 1, num_longer,
                    table.num_words // FIX_WORDS_PER_TOKEN, 4 * num_states + 64,
                    self.twins()[0],
                )
            )  # fmt: skip
        return self._derivations


@dataclass(frozen=True, eq=False)
class Derivations:
    """Per DFA state, how an eager build gets its row (see
    :func:`~formcast.grammar.index.kernels.difference_refs`): walked in full (``ref = -1``) or
    from state ``ref``'s row, by difference (its first bytes ``diff``, ``(S, 4)`` uint64) or by
    shift (tokens longer than ``fix_depth`` walked again; ``-1``: none) or as a twin
    (``fix_depth = TWIN_DEPTH``: the tokens holding the twin byte walked again); ``level``: 0 walked,
    else one more than the reference's."""

    ref: np.ndarray  # (S,) int64
    diff: np.ndarray  # (S, 4) uint64
    fix_depth: np.ndarray  # (S,) int64
    level: np.ndarray  # (S,) int64

    def chunk(
        self, states: np.ndarray, ref_rows: np.ndarray, ref_of: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The ``refs`` argument of :func:`index_packed_rows` for ``states``, their references'
        rows ``ref_rows[ref_of]`` (``-1``: walked)."""
        return ref_rows, ref_of, self.diff[states], self.fix_depth[states]


_NO_REF_ROWS = np.zeros((0, 1), dtype=np.uint32)
_FIRST_REF = np.zeros(1, dtype=np.int64)  # one state derived from the one row given
_TWIN_FIX = np.full(1, TWIN_DEPTH, dtype=np.int64)
_NO_TWIN_ROWS = np.zeros(0, dtype=np.int64)
_NO_TWIN_ROWS.flags.writeable = False  # as VocabTable.rows_holding's (one kernel signature)


def _walked(num_states: int) -> tuple[np.ndarray, ...]:
    """The ``refs`` argument of :func:`index_packed_rows` for states all walked in full."""
    none = np.full(num_states, -1, dtype=np.int64)
    return _NO_REF_ROWS, none, np.zeros((num_states, 4), dtype=np.uint64), none


# the refs of one state walked in full (a first visit's row), built once (the kernel only
# reads them; writeable, as every other call's, so that the kernel has one signature)
_WALKED_ONE = (
    _NO_REF_ROWS,
    np.full(1, -1, dtype=np.int64),
    np.zeros((1, 4), dtype=np.uint64),
    np.full(1, -1, dtype=np.int64),
)


def _equal_refs(
    dfa: ByteDFA,
    states: np.ndarray,
    ref: np.ndarray,
    is_same: np.ndarray,
    position: np.ndarray | None,
) -> np.ndarray:
    """``(len(states),)`` int64: for each derived row whose text tokens are its reference's
    (``is_same``) and whose state accepts exactly when the reference does (the EOS ids), the
    reference (its ``position``, if given), else -1: the rows are equal."""
    refs = np.maximum(ref, 0)
    is_equal = is_same & (ref >= 0) & (dfa.is_accepting[states] == dfa.is_accepting[refs])
    target = refs if position is None else position[refs]
    return np.where(is_equal, target, -1)


def _unique_rows_inplace(rows: np.ndarray, row_of: np.ndarray) -> int:
    """:func:`~formcast.grammar.index.kernels.unique_rows_inplace` of ``(N, W)`` uint32 rows,
    hashed and compared as ``W / 2`` uint64 words when ``W`` is even (half the multiplies)."""
    return unique_rows_inplace(rows.view(np.uint64) if rows.shape[1] % 2 == 0 else rows, row_of)


def index_packed_rows(
    dfa: ByteDFA,
    table: VocabTable,
    states: np.ndarray,
    tokens: TrieTokens | None = None,
    out: np.ndarray | None = None,
    refs: tuple[np.ndarray, ...] | None = None,
    is_same: np.ndarray | None = None,
) -> np.ndarray:
    """``(len(states), num_words)`` int32 packed masks of ``states``: the text tokens that keep
    the DFA alive (walked through the vocabulary trie by
    :func:`~formcast.grammar.index.kernels.index_rows`), plus the EOS ids in accepting
    states. Exact, like :func:`walk_tokens`. ``tokens``: the :class:`TrieTokens` of ``dfa``
    over ``table`` (built here if None; its kernel arguments are ``dfa``'s and ``table``'s).
    ``out``: a zeroed ``(len(states), num_words)`` uint32 array to fill in place (returned as
    an int32 view). ``refs``: ``(ref_rows (R, num_words) uint32, ref_of (len(states),), diff
    (len(states), 4), fix_depth (len(states),))``: the rows derived from others
    (:meth:`Derivations.chunk`; ``ref_of[i] = -1``: walked in full). ``is_same``: a zeroed
    ``(len(states),)`` bool array, set where a derived row's text tokens are its reference's
    (:func:`~formcast.grammar.index.kernels.index_rows`; the EOS ids follow acceptance)."""
    if tokens is None:
        tokens = TrieTokens(dfa, table)
    if not isinstance(states, np.ndarray) or states.dtype != np.int64:
        states = np.asarray(states, dtype=np.int64)
    if out is None:
        out = np.zeros((len(states), table.num_words), dtype=np.uint32)
    if refs is None:
        refs = _WALKED_ONE if len(states) == 1 else _walked(len(states))
    if is_same is None:
        is_same = np.zeros(len(states), dtype=np.bool_)
    head, middle, tail = tokens.kernel_arguments()
    index_rows(*head, states, *middle, out, *refs, *tail, is_same)
    if len(table.eos_token_ids):
        accepting = dfa.is_accepting[states]
        if len(states) == 1:  # a first visit's row: no fancy indexing
            if accepting[0]:
                out[0] |= table.eos_words()
        elif accepting.any():
            out[accepting] |= table.eos_words()
    return out.view(np.int32)


def state_token_ends(
    dfa: ByteDFA, table: VocabTable, state: int, tokens: TrieTokens | None = None
) -> np.ndarray:
    """``(V,)`` int32: the DFA state after each text token from ``state``, ``-1`` where the
    token dies (or is no text token): the trie walked by
    :func:`~formcast.grammar.index.kernels.trie_ends` (cost: the alive token prefixes off
    self-loops; the same pairs as :func:`walk_tokens`)."""
    if tokens is None:
        tokens = TrieTokens(dfa, table)
    trie = table.trie
    ends = np.full(table.vocab_size, -1, dtype=np.int32)  # (V,)
    trie_ends(
        dfa.transitions, dfa.byte_to_class, trie.node_byte, state, trie.child_start,
        trie.child_end, trie.token_start, trie.token_rows, table.token_ids, trie.row_lo,
        trie.row_hi, trie.height, trie.bytes_below, tokens.uniform, tokens.covered[1], ends,
    )  # fmt: skip
    return ends


def state_transitions(
    dfa: ByteDFA, table: VocabTable, state: int, tokens: TrieTokens | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The text tokens alive from ``state`` (ascending ids) and the state each ends in
    (:func:`state_token_ends`, sparse)."""
    ends = state_token_ends(dfa, table, state, tokens)
    ids = np.flatnonzero(ends >= 0).astype(table.token_ids.dtype)
    return ids, ends[ids]


class _EagerProgress:
    """An eager build's rows so far: the states ``order[:num_done]`` are indexed (``order``:
    every state, a derived one after the state it is derived from), ``state_rows[s]`` is the
    index of state ``s``'s row among the distinct rows ``store[:num_distinct]`` (each kept
    once, found again through the hash table of
    :func:`~formcast.grammar.index.kernels.group_rows`).

    Grouping a chunk's rows with those of earlier chunks is one kernel call (no Python step
    per distinct row).
    """

    def __init__(self, num_words: int, order: np.ndarray, level_starts: list[int]) -> None:
        num_states = len(order)
        self.state_rows = np.empty(num_states, dtype=np.int32)  # (N,)
        self.order = order  # (N,) int64
        # positions in ``order`` where a chunk must start: each level of derived states begins one
        self.level_starts = level_starts
        self.num_done = 0
        # the distinct rows (at most one per state): room for all of them reserved at once
        # (np.empty touches no page; only the rows written are ever paged in)
        self.store = np.empty((num_states, num_words), dtype=np.uint32)
        self.num_distinct = 0
        self.slot_group, self.slot_hash = hash_slots(num_states)
        self._is_wide = num_words % 2 == 0  # hashed and compared as num_words / 2 uint64

    def add_chunk(self, states: np.ndarray, rows: np.ndarray, equal_to: np.ndarray) -> None:
        """Record ``states`` (the next ``len(states)`` of ``order``) and their ``rows``
        (``(len(states), num_words)`` uint32, C-contiguous); ``equal_to[i] >= 0``: row ``i``
        equals that (recorded) state's, and is not hashed."""
        is_known = equal_to >= 0
        if is_known.any():
            self.state_rows[states[is_known]] = self.state_rows[equal_to[is_known]]
            states, rows = states[~is_known], rows[~is_known]
        row_of = np.empty(len(states), dtype=np.int32)
        store = self.store
        if self._is_wide:
            rows, store = rows.view(np.uint64), store.view(np.uint64)
        self.num_distinct = group_rows(
            rows, row_of, store, self.num_distinct, self.slot_group, self.slot_hash
        )
        self.state_rows[states] = row_of
        self.num_done += len(is_known)

    def distinct_rows(self) -> np.ndarray:
        """``(U, num_words)`` uint32: the distinct rows so far (a view, or a copy when the store
        is under half used, so an index does not hold twice its rows)."""
        rows = self.store[: self.num_distinct]
        return rows.copy() if 2 * self.num_distinct < len(self.store) else rows

    def chunks(self, size: int) -> list[tuple[int, int]]:
        """``(lo, hi)`` positions in ``order`` of the chunks still to index: at most ``size``
        states each, none across a level start."""
        bounds = sorted({*self.level_starts, len(self.order)})
        out, lo = [], self.num_done
        for end in bounds:
            while lo < end:
                hi = min(lo + size, end)
                out.append((lo, hi))
                lo = hi
        return out

    def ref_rows(
        self, derivations: Derivations, states: np.ndarray
    ) -> tuple[np.ndarray, ...] | None:
        """The ``refs`` argument of :func:`index_packed_rows` for ``states`` (their references
        all indexed), ``None`` when every one of them is walked in full."""
        ref = derivations.ref[states]
        if (ref < 0).all():
            return None
        row_ids = np.where(ref >= 0, self.state_rows[np.maximum(ref, 0)], -1)
        needed, ref_of = np.unique(row_ids, return_inverse=True)
        offset = int(needed[0] < 0)  # -1 (walked) sorts first: keep it -1
        rows = self.store[needed[offset:]]  # (R, num_words)
        return derivations.chunk(states, rows, ref_of.reshape(-1).astype(np.int64) - offset)


class _TwinJob:
    """A background job: the twin blocks of one DFA (:meth:`TrieTokens.twins`)."""

    def __init__(self, tokens: TrieTokens) -> None:
        self.tokens = tokens

    def fill_ahead(self) -> None:
        try:
            self.tokens.twins()
        except Exception:  # noqa: BLE001 - first visits walk in full without them
            logger.exception("twin blocks failed; first visits walk in full")


class TokenIndex:
    """Per-state packed masks and sparse token transitions of one DFA over one vocabulary.

    ``row(state)`` is a ``(num_words,)`` int32 array: bit ``i % 32`` of word ``i // 32`` is set
    iff token ``i`` is allowed (EOS ids in accepting states; special and padding ids never).
    ``transitions(state)`` gives the allowed text tokens (ascending) and their end states.
    """

    def __init__(self, dfa: ByteDFA, vocab: Vocabulary, *, is_eager: bool) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.table = vocab_table(vocab)
        # every state is (or is being) indexed ahead of use; False for a lazy index, or once
        # an eager build passed its time cap
        self.is_eager = is_eager
        # eager: the distinct rows (U, num_words) int32 and each state's one among them (N,)
        self.packed: np.ndarray | None = None
        self.state_rows: np.ndarray | None = None
        self.lazy_rows: dict[int, np.ndarray] = {}
        self.sparse: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # twin blocks (TrieTokens.twins) as last read, and an indexed state of each block
        self._twin_blocks: np.ndarray | None = None
        self._twin_first: dict[int, int] = {}
        self._twin_job: _TwinJob | None = None  # (the background indexer holds jobs weakly)
        self.eos_row = self._eos_only_row()
        self._lock = threading.Lock()
        self._trie_tokens: TrieTokens | None = None
        self._ahead_done: threading.Event | None = None  # set when a queued fill has ended
        self._progress: _EagerProgress | None = None  # an eager build stopped at its cap
        self._ahead_max_s = AHEAD_MAX_S
        self._init_row_views()

    def _init_row_views(self) -> None:
        # eager: one (num_words,) view per state, so a mask fill is a list lookup + memcpy;
        # assigned last and at once, so a reader on another thread sees None or every view
        views = None
        if self.packed is not None and self.state_rows is not None:
            unique = list(self.packed)
            views = [unique[k] for k in self.state_rows.tolist()]
        self.row_views: list[np.ndarray] | None = views

    def build_eager(self, budget: CompileBudget | None, max_s: float | None = None) -> bool:
        """Index every state not indexed by an earlier call, in chunks of states, keeping each
        distinct row once.

        JSON-schema DFAs have thousands of states but a few hundred distinct rows (every
        state inside a key literal allows the same few tokens as its twins), so the store is
        ``U x num_words`` words, not ``N x num_words``. Checks ``budget`` (if any) after every
        chunk. With ``max_s``: past that much thread CPU time the index turns lazy (returns
        False; at least one chunk is indexed) and keeps the rows built so far, where
        :meth:`row` finds them; a later call (:meth:`index_ahead`) resumes after them. The trie
        walk and the grouping of equal rows are GIL-free kernels; the Python steps per chunk
        are a few, plus one per distinct row when there is more than one chunk.
        """
        if self._trie_tokens is None:
            self._trie_tokens = TrieTokens(self.dfa, self.table)
        start = time.thread_time()
        num_states, num_words = self.dfa.num_states, self.table.num_words
        derivations = self._trie_tokens.derivations()
        level = derivations.level
        progress = self._progress
        if progress is None and num_states <= _EAGER_CHUNK:
            self._build_one_chunk(derivations)
            return True
        if progress is None:
            order = np.argsort(level, kind="stable")  # (N,) walked states first
            sorted_level = level[order]
            starts = np.flatnonzero(sorted_level[1:] != sorted_level[:-1]) + 1
            progress = self._progress = _EagerProgress(num_words, order, starts.tolist())
        chunks = progress.chunks(_EAGER_CHUNK)
        # one buffer for every chunk (grouping copies each new row out): a fresh calloc'd
        # chunk would fault in its pages again
        buffer = np.zeros((min(_EAGER_CHUNK, num_states), num_words), dtype=np.uint32)
        for k, (lo, hi) in enumerate(chunks):
            states = progress.order[lo:hi]
            out = buffer[: hi - lo]
            if k:
                out.fill(0)
            chunk_refs = progress.ref_rows(derivations, states)
            is_same = np.zeros(hi - lo, dtype=np.bool_)
            index_packed_rows(
                self.dfa, self.table, states, self._trie_tokens, out, chunk_refs, is_same
            )
            ref = derivations.ref[states]
            progress.add_chunk(states, out, _equal_refs(self.dfa, states, ref, is_same, None))
            if budget is not None:
                budget.check_time("indexing the vocabulary", None)
            if max_s is not None and hi < num_states and time.thread_time() - start > max_s:
                self.is_eager = False
                rows = progress.distinct_rows()
                for state in progress.order[:hi].tolist():
                    self.lazy_rows.setdefault(
                        state, rows[progress.state_rows[state]].view(np.int32)
                    )
                return False
        self._publish(progress.state_rows, progress.distinct_rows())
        return True

    def _build_one_chunk(self, derivations: Derivations) -> None:
        """:meth:`build_eager` of a DFA of at most one chunk of states: every row at once, a
        level of derived states after the rows it reads; their groups are the distinct rows."""
        num_states = self.dfa.num_states
        level, refs = derivations.level, derivations.ref
        order = np.argsort(level, kind="stable")  # (N,) walked states first
        position = np.empty(num_states, dtype=np.int64)
        position[order] = np.arange(num_states)
        sorted_level = level[order]
        bounds = [0, *(np.flatnonzero(np.diff(sorted_level)) + 1).tolist(), num_states]
        out = np.zeros((num_states, self.table.num_words), dtype=np.uint32)  # rows by position
        # the position of an earlier row equal to each row (-1: none known), by level
        same_as = np.full(num_states, -1, dtype=np.int64)
        levels = list(itertools.pairwise(bounds))
        for lo, hi in levels:
            states = order[lo:hi]
            ref = refs[states]
            chunk_refs, is_same = None, None
            if lo > 0:  # derived states: their references are rows of earlier levels
                chunk_refs = derivations.chunk(states, out, np.where(ref >= 0, position[ref], -1))
                is_same = np.zeros(hi - lo, dtype=np.bool_)
            index_packed_rows(
                self.dfa, self.table, states, self._trie_tokens, out[lo:hi], chunk_refs, is_same
            )
            if is_same is not None:
                same_as[lo:hi] = _equal_refs(self.dfa, states, ref, is_same, position)
        row_of = np.empty(num_states, dtype=np.int32)
        hashed = np.flatnonzero(same_as < 0)
        if len(hashed) == num_states:
            num_distinct = _unique_rows_inplace(out, row_of)
            rows = out
        else:  # only the rows not known equal to an earlier one are hashed and compared
            rows = out[hashed]
            hashed_row_of = np.empty(len(hashed), dtype=np.int32)
            num_distinct = _unique_rows_inplace(rows, hashed_row_of)
            row_of[hashed] = hashed_row_of
            for lo, hi in levels:  # each level's references lie in earlier ones
                known = np.flatnonzero(same_as[lo:hi] >= 0) + lo
                row_of[known] = row_of[same_as[known]]
        # (U, num_words): a copy when under half of the rows, so the index holds no more
        distinct = (
            rows[:num_distinct].copy() if 2 * num_distinct < len(rows) else rows[:num_distinct]
        )
        state_rows = np.empty(num_states, dtype=np.int32)
        state_rows[order] = row_of
        self._publish(state_rows, distinct)

    def _publish(self, state_rows: np.ndarray, distinct: np.ndarray) -> None:
        packed = distinct.view(np.int32)
        packed.setflags(write=False)  # rows are shared by states
        self.state_rows = state_rows
        self.packed = packed
        self._init_row_views()
        self._progress = None

    def index_ahead(self, max_s: float = AHEAD_MAX_S) -> None:
        """Have the background thread build every row not built yet (at most ``max_s`` of its
        CPU time; past that the index turns lazy); returns at once. Rows asked for before the
        fill ends are built on the spot (:meth:`row`)."""
        self.is_eager = True
        self._ahead_done = threading.Event()
        self._ahead_max_s = max_s
        BACKGROUND_INDEXER.submit(self)

    def fill_ahead(self) -> None:
        """The background thread's job (:class:`~formcast.grammar.index.background_indexer.AheadJob`)."""
        try:
            if self.row_views is None and self.is_eager:
                self.build_eager(None, self._ahead_max_s)
        except Exception:  # noqa: BLE001 - the index stays lazy: every row on first use
            logger.exception("background indexing failed; masks are built on first use")
            self.is_eager = False
        finally:
            if self._ahead_done is not None:
                self._ahead_done.set()

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Block until a queued background fill (:meth:`index_ahead`) has ended; True at once
        if none was queued, False if ``timeout`` seconds passed first."""
        done = self._ahead_done
        return True if done is None else done.wait(timeout)

    def row(self, state: int) -> np.ndarray:
        """The packed ``(num_words,)`` int32 mask of ``state`` (computed on first use)."""
        views = self.row_views
        if views is not None:
            return views[state]
        found = self.lazy_rows.get(state)
        if found is None:
            with self._lock:
                self._index_states(np.full(1, state, dtype=np.int64))
            found = self.lazy_rows[state]
        return found

    def transitions(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Allowed text token ids of ``state`` (ascending) and the DFA state each leads to."""
        found = self.sparse.get(state)
        if found is None:
            if self._trie_tokens is None:
                self._trie_tokens = TrieTokens(self.dfa, self.table)
            found = state_transitions(self.dfa, self.table, state, self._trie_tokens)
            self.sparse[state] = found
        return found

    def _index_states(self, states: np.ndarray) -> None:
        tokens = self._trie_tokens
        if tokens is None:
            tokens = self._trie_tokens = TrieTokens(self.dfa, self.table)
        refs = None
        if len(states) == 1:
            twin = self._twin_of(int(states[0]), tokens)
            if twin is not None:  # its row, with the tokens holding a quote walked again
                ref_rows = self.lazy_rows[twin].view(np.uint32)[None, :]
                refs = (ref_rows, _FIRST_REF, np.zeros((1, 4), dtype=np.uint64), _TWIN_FIX)
        packed = index_packed_rows(self.dfa, self.table, states, tokens, refs=refs)
        for k, state in enumerate(states.tolist()):
            self.lazy_rows[state] = packed[k]

    def _twin_of(self, state: int, tokens: TrieTokens) -> int | None:
        """An indexed state of ``state``'s twin block (:meth:`TrieTokens.twins`), once the
        blocks are known (an eager build computes them; :meth:`find_twins_ahead` in the
        background for a lazy index): a first visit inside a large DFA's JSON string then
        copies the row of a string visited before instead of walking the vocabulary."""
        twins = tokens.known_twins()
        if twins is None:
            return None
        block = twins[0]
        if self._twin_blocks is not block:  # first use of the blocks: the states so far
            self._twin_blocks = block
            self._twin_first = {}
            for other in list(self.lazy_rows):  # (a capped fill may add rows meanwhile)
                if block[other] >= 0:
                    self._twin_first.setdefault(int(block[other]), other)
        b = int(block[state])
        if b < 0:
            return None
        found = self._twin_first.setdefault(b, state)
        return None if found == state else found

    def find_twins_ahead(self) -> None:
        """Have the background thread compute the twin blocks of a lazy index's DFA
        (:meth:`TrieTokens.twins`: a GIL-free partition, ~10 ms on 12k states); returns at
        once. First visits use them once they are there."""
        if self._trie_tokens is None:
            self._trie_tokens = TrieTokens(self.dfa, self.table)
        self._twin_job = _TwinJob(self._trie_tokens)
        BACKGROUND_INDEXER.submit(self._twin_job)

    def _eos_only_row(self) -> np.ndarray:
        return self.table.eos_words().view(np.int32).copy()

    @property
    def num_indexed_states(self) -> int:
        return self.dfa.num_states if self.row_views is not None else len(self.lazy_rows)

    def export_state(self) -> dict:
        """Everything computed so far, without the vocabulary (for the disk cache); safe while
        a background fill runs (its rows are exported once it has published them all)."""
        is_complete = self.row_views is not None
        return {
            "is_eager": self.is_eager,
            "packed": self.packed if is_complete else None,
            "state_rows": self.state_rows if is_complete else None,
            "lazy_rows": dict(self.lazy_rows),
            "sparse": dict(self.sparse),
        }

    @classmethod
    def from_state(cls, dfa: ByteDFA, vocab: Vocabulary, state: dict) -> TokenIndex:
        """Rebuild from :meth:`export_state` output and the same vocabulary; an eager index
        exported before its fill ended resumes it in the background."""
        index = cls(dfa, vocab, is_eager=False)
        index.is_eager = state["is_eager"]
        index.packed = state["packed"]
        index.state_rows = state["state_rows"]
        index.lazy_rows = state["lazy_rows"]
        index.sparse = state["sparse"]
        index._init_row_views()
        if index.is_eager and index.row_views is None:
            index.index_ahead()
        return index

    def __getstate__(self) -> dict:
        return {"dfa": self.dfa, "vocab": self.vocab, **self.export_state()}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.table = vocab_table(self.vocab)
        self.eos_row = self._eos_only_row()
        self._lock = threading.Lock()
        self._trie_tokens = None
        self._ahead_done = None
        self._ahead_max_s = AHEAD_MAX_S
        self._progress = None
        self._init_row_views()
        if self.is_eager and self.row_views is None:
            self.index_ahead()


def _clear_tables() -> None:
    with _TABLES_LOCK:
        _TABLES.clear()
        _RECENT.clear()


caches.register(
    "index.vocab_tables", f"weak by vocabulary, the last {_NUM_RECENT} kept alive", _clear_tables
)


class LazyTransitions:
    """Where every token leads from each state of one DFA, per vocabulary, computed state by
    state on first use and memoised: what a matcher-side automaton asks."""

    def __init__(self, dfa: ByteDFA) -> None:
        self.dfa = dfa
        self._ends: dict[tuple[int, int], np.ndarray] = {}  # (vocab id, state) -> (V,)
        self._tokens: TrieTokens | None = None

    def __call__(self, state: int, vocab: Vocabulary) -> np.ndarray:
        """``(V,)`` int32: the state after each text token from ``state`` (``-1``: the token
        does not stay inside the DFA)."""
        key = (id(vocab), state)
        found = self._ends.get(key)
        if found is None:
            table = vocab_table(vocab)
            if self._tokens is None:
                self._tokens = TrieTokens(self.dfa, table)
            found = state_token_ends(self.dfa, table, state, self._tokens)
            found.setflags(write=False)
            self._ends[key] = found
        return found
