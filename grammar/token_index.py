"""TokenIndex: for every DFA state, the tokens that keep the DFA alive and where they lead.

All tokens are walked through the DFA together with numpy: the vocabulary is a padded
``(num_tokens, max_len)`` uint8 matrix sorted by bytes, so the tokens that start with a given
byte form one contiguous slice. For a batch of states, the first step keeps only the slices of
bytes the state allows (dead branches are never touched), and each further step advances the
surviving (state, token) pairs by one byte with one gather. A token is allowed iff its walk
never hits a dead transition (the DFA is trimmed, so alive means "some completion exists").

Rows are stored packed (bit ``i % 32`` of int32 word ``i // 32`` = token ``i``) next to a sparse
transition table (allowed token ids and the state each leads to). Small automata are indexed
eagerly at compile time; large ones lazily, one state at a time, memoised.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from formcast.grammar.byte_dfa import ByteDFA
from formcast.grammar.compile_budget import CompileBudget
from formcast.grammar.vocabulary import Vocabulary

_MAX_PAIRS_PER_CHUNK = 1 << 21


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
    """

    token_ids: np.ndarray
    matrix: np.ndarray
    lengths: np.ndarray
    first_byte_bounds: np.ndarray
    eos_token_ids: np.ndarray
    vocab_size: int
    num_words: int
    bytes_by_step: np.ndarray

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
        )


def _bytes_by_step(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(max_len, T)`` uint16 column-major token bytes; 256 marks "past the end"."""
    steps = np.arange(matrix.shape[1])
    padded = np.where(steps[None, :] < lengths[:, None], matrix.astype(np.uint16), np.uint16(256))
    return np.ascontiguousarray(padded.T)


_TABLES: weakref.WeakValueDictionary[str, VocabTable] = weakref.WeakValueDictionary()
_TABLES_LOCK = threading.Lock()


def vocab_table(vocab: Vocabulary) -> VocabTable:
    """The (cached per vocabulary hash) :class:`VocabTable` of ``vocab``."""
    with _TABLES_LOCK:
        table = _TABLES.get(vocab.hash)
        if table is None:
            table = VocabTable.from_vocabulary(vocab)
            _TABLES[vocab.hash] = table
        return table


def estimate_index_pairs(dfa: ByteDFA, table: VocabTable) -> int:
    """(state, token) pairs the first walk step of an eager index build would touch."""
    counts = np.diff(table.first_byte_bounds)  # (256,) tokens per first byte
    is_alive = dfa.transitions[:, dfa.byte_to_class] >= 0  # (N, 256)
    return int((is_alive.astype(np.int64) @ counts).sum())


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
        self.is_eager = is_eager
        num_states, num_words = dfa.num_states, self.table.num_words
        self.packed = np.zeros((num_states, num_words), dtype=np.int32) if is_eager else None
        self.lazy_rows: dict[int, np.ndarray] = {}
        self.sparse: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.eos_row = self._eos_only_row()
        self._lock = threading.Lock()
        self._tokens: GrammarTokens | None = None
        self._init_row_views()

    def _init_row_views(self) -> None:
        # eager: one (num_words,) view per state, so a mask fill is a list lookup + memcpy
        self.row_views: list[np.ndarray] | None = None if self.packed is None else list(self.packed)

    def build_eager(self, budget: CompileBudget) -> None:
        """Index every state now (in chunks of states), checking the time budget."""
        states = np.arange(self.dfa.num_states)
        for chunk in self._chunks(states):
            self._index_states(chunk)
            budget.check_time("indexing the vocabulary", None)

    def row(self, state: int) -> np.ndarray:
        """The packed ``(num_words,)`` int32 mask of ``state`` (computed on first use)."""
        if self.packed is not None:
            return self.packed[state]
        found = self.lazy_rows.get(state)
        if found is None:
            with self._lock:
                self._index_states(np.array([state]))
            found = self.lazy_rows[state]
        return found

    def transitions(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Allowed text token ids of ``state`` (ascending) and the DFA state each leads to."""
        if state not in self.sparse:
            with self._lock:
                self._index_states(np.array([state]))
        ids, ends = self.sparse[state]
        order = np.argsort(ids, kind="stable")
        return ids[order], ends[order]

    def _chunks(self, states: np.ndarray) -> list[np.ndarray]:
        # bound the number of (state, token) pairs alive in one walk
        per_state = max(1, len(self.table.token_ids))
        size = max(1, min(256, _MAX_PAIRS_PER_CHUNK // per_state * 8))
        return [states[i : i + size] for i in range(0, len(states), size)]

    def _index_states(self, states: np.ndarray) -> None:
        if self._tokens is None:
            self._tokens = GrammarTokens(self.dfa, self.table)
        owner, rows, ends = walk_tokens(self.dfa, self.table, states, self._tokens)
        token_ids = self.table.token_ids[rows]
        num_words = self.table.num_words
        bits = np.zeros((len(states), num_words * 32), dtype=bool)
        bits[owner, token_ids] = True
        accepting = self.dfa.is_accepting[states]
        if len(self.table.eos_token_ids):
            bits[np.ix_(np.flatnonzero(accepting), self.table.eos_token_ids)] = True
        packed = np.packbits(bits, axis=1, bitorder="little").view("<i4")  # (S, num_words)
        splits = np.searchsorted(owner, np.arange(len(states) + 1))
        for k, state in enumerate(states.tolist()):
            lo, hi = splits[k], splits[k + 1]
            self.sparse[state] = (token_ids[lo:hi], ends[lo:hi])
            if self.packed is not None:
                self.packed[state] = packed[k]
            else:
                self.lazy_rows[state] = packed[k].copy()

    def _eos_only_row(self) -> np.ndarray:
        bits = np.zeros(self.table.num_words * 32, dtype=bool)
        bits[self.table.eos_token_ids] = True
        return np.packbits(bits, bitorder="little").view("<i4").copy()

    @property
    def num_indexed_states(self) -> int:
        return len(self.sparse)

    def export_state(self) -> dict:
        """Everything computed so far, without the vocabulary (for the disk cache)."""
        return {
            "is_eager": self.is_eager,
            "packed": self.packed,
            "lazy_rows": dict(self.lazy_rows),
            "sparse": dict(self.sparse),
        }

    @classmethod
    def from_state(cls, dfa: ByteDFA, vocab: Vocabulary, state: dict) -> TokenIndex:
        """Rebuild from :meth:`export_state` output and the same vocabulary."""
        index = cls(dfa, vocab, is_eager=False)
        index.is_eager = state["is_eager"]
        index.packed = state["packed"]
        index.lazy_rows = state["lazy_rows"]
        index.sparse = state["sparse"]
        index._init_row_views()
        return index

    def __getstate__(self) -> dict:
        return {"dfa": self.dfa, "vocab": self.vocab, **self.export_state()}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.table = vocab_table(self.vocab)
        self.eos_row = self._eos_only_row()
        self._lock = threading.Lock()
        self._tokens = None
        self._init_row_views()
