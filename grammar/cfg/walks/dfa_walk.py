"""Vocabulary walks of single-terminal lexer parts, read off the terminal's own byte DFA.

Most lexer parts (:meth:`formcast.grammar.cfg.lexer.CfgLexer.parts`) are one live pair
``(terminal t, DFA state q)``: reading bytes from it is reading ``t``'s DFA from ``q``, and a
*split* (``t`` completes strictly inside a token) happens where that DFA accepts. So such a
part's walk needs neither interned lexer states nor their 256-entry rows: this module walks the
terminal DFA directly.

- Whole-vocabulary walks use the vocabulary byte trie (:func:`~formcast.grammar.
  cfg_walk_kernels.walk_trie`): one step per alive token *prefix*, and a subtree that stays on
  its state's uniform chain (a string's inside, a ``{0,255}`` counter, a run of bounded
  whitespace) is finished at once as a row range, every token in it "within". Splits inside
  such a subtree need not be recorded: a split only matters for tokens that do not stay within
  the lexeme (a within token is allowed anyway, and split records of within tokens are
  dropped).
- Record walks (a split group's suffixes, :meth:`DfaWalker.walk_records`) read each record
  byte by byte in the DFA's own table (:func:`~formcast.grammar.
  cfg_walk_kernels.walk_suffixes`).
- Both read the DFA in its byte-class space (``transitions[s, byte_to_class[b]]``): a first
  walk of a terminal never materialises a ``(S, 256)`` table (a 571-state string terminal's
  was 0.6 MB, written on first touch).
- *Follow filter*: a split at offset ``j`` matters only if byte ``j`` of the token can start a
  lexeme that may follow ``t`` in some sentence (the first bytes of the terminals in
  ``FOLLOW(t)``, and of the ignored terminals): otherwise the suffix dies on its first byte in
  every parse context. Such records are not produced, which keeps split groups small (inside a
  string every offset completes a ``{0,255}`` chunk, but only a ``"`` can follow it).

All walks are exact: they produce the same within tokens and the same split records as the
generic lexer walk, minus records whose suffix no parse context can read.

*Shared walks*: a walk depends on the terminal's DFA, the state, the vocabulary and the follow
bytes, never on the grammar around the terminal. Terminal DFAs come from the
:func:`~formcast.grammar.index.compile.regex_to_dfa` memo, so grammars with the same terminal (a
JSON string chunk ``C{256}``, a number, a key) hold the same DFA object; their walks are kept in
one process-wide LRU (:class:`SharedWalks`, bounded by the bytes of the stored arrays), so a
new grammar's first visits inside such terminals are lookups. Record walks are keyed by a
128-bit BLAKE2 digest of the records (:attr:`~formcast.grammar.cfg.lexer.SplitGroup.
records_key`). A counted chain ``X{m,n}`` (a bounded JSON string) is keyed finer, by its
state's distance to the bounds up to the longest token (:mod:`~formcast.grammar.automata.chain_keys`),
and walked on a small canonical chain: every chain of the same code ``X`` shares those walks,
whatever its bounds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from formcast.grammar import caches
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.automata.chain_keys import canonical_chain, chain_acceptance
from formcast.grammar.cfg.first_follow import bit_set, first_follow
from formcast.grammar.cfg.rules import PreparedGrammar
from formcast.grammar.cfg.walks.kernels import (
    chain_coverage,
    first_byte_words,
    stack_terminals,
    walk_suffixes,
    walk_suffixes_set,
    walk_trie,
    walk_trie_set,
)
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.index.token_index import VocabTable


def follow_terminals(grammar: PreparedGrammar) -> list[set[int]]:
    """``FOLLOW(t)`` for every terminal: the terminals that can come right after ``t`` in some
    sentential form derived from the start symbol (rule 0 is ``S' -> start``)."""
    return [bit_set(bits) for bits in follow_terminal_bits(grammar)]


def follow_terminal_bits(grammar: PreparedGrammar) -> list[int]:
    """:func:`follow_terminals` as int bit sets (bit ``u`` = terminal ``u``; no end bit)."""
    terminals = (1 << grammar.num_terminals) - 1
    return [bits & terminals for bits in first_follow(grammar).terminal_follow]


def follow_first_bytes(grammar: PreparedGrammar) -> list[np.ndarray]:
    """Per terminal, ``(257,)`` bool: byte ``b`` can be the first byte of the lexeme after it
    (a terminal of ``FOLLOW(t)`` or an ignored terminal starts with it); index 256 is False."""

    def starts(dfa: ByteDFA) -> np.ndarray:
        return dfa.transitions[dfa.start_state][dfa.byte_to_class] >= 0

    firsts = [starts(dfa) for dfa in grammar.terminal_dfas]
    ignored = np.zeros(256, dtype=bool)
    for dfa in grammar.ignore_dfas:
        ignored |= starts(dfa)
    num_terminals = len(firsts)
    starts_with = np.array(firsts, dtype=bool).reshape(num_terminals, 256)  # (T, 256)
    num_bytes = (num_terminals + 7) // 8
    # terminals share FOLLOW sets (kb_151: 95 distinct among 494 terminals): one row per set,
    # the same array for every terminal that has it (writable: the walk kernels' signature)
    rows: dict[int, np.ndarray] = {}
    out = []
    for bits in follow_terminal_bits(grammar):
        row = rows.get(bits)
        if row is None:
            row = np.zeros(257, dtype=bool)
            row[:256] = ignored
            if bits:
                packed = np.frombuffer(bits.to_bytes(num_bytes, "little"), dtype=np.uint8)
                is_follower = np.unpackbits(packed, bitorder="little")[:num_terminals]
                row[:256] |= starts_with[is_follower.astype(bool)].any(axis=0)
            rows[bits] = row
        out.append(row)
    return out


_SHARED_MAX_BYTES = 256 * 2**20
# terminals walked in sets: DFAs of at most SET_MAX_STATES states that are acyclic (keys,
# punctuation) or whose every state reads at most SET_MAX_LOOP_BYTES bytes (a key with its
# number value); a wide loop (an identifier, a string's inside) would make the set walk read
# whole subtries that a single-part walk settles as row ranges
SET_MAX_STATES = 256
SET_MAX_LOOP_BYTES = 16


def class_table(dfa: ByteDFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``dfa``'s ``(S, K)`` int32 table, ``(256,)`` uint8 byte classes and ``(S,)`` bool
    acceptance, C-contiguous: the one signature the walk kernels are compiled for (no copy
    when the DFA already has it, as every automaton builder makes it)."""
    return (
        np.ascontiguousarray(dfa.transitions, dtype=np.int32),
        np.ascontiguousarray(dfa.byte_to_class, dtype=np.uint8),
        np.ascontiguousarray(dfa.is_accepting, dtype=np.bool_),
    )


class SharedWalks:
    """Process-wide LRU of walk results of terminal DFAs (see module docstring).

    Keys hold the DFA and vocabulary table objects themselves (both compare by identity), so an
    entry can never be confused with one of another automaton or vocabulary.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.num_bytes = 0
        self._items: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, value: tuple) -> tuple:
        """Store ``value`` (a tuple of numpy arrays, made read-only) and return it."""
        size = 0
        for array in value:
            array.setflags(write=False)
            size += array.nbytes
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self.num_bytes += size
            while self.num_bytes > self.max_bytes and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self.num_bytes -= sum(array.nbytes for array in dropped)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.num_bytes = 0


SHARED_WALKS = SharedWalks(_SHARED_MAX_BYTES)
# canonical chains (chain_keys.canonical_chain) by pattern, with their acceptance arrays by
# first accepting copy: the walks of every counted chain of the same code are computed on one
_CANONICAL: dict[str, tuple[ByteDFA, dict[int, np.ndarray]]] = {}
_MAX_CANONICAL = 64


class DfaWalker:
    """Walks of single-terminal parts over one vocabulary (see module docstring).

    Every walk returns ``(within_row, split_rows, split_steps)``: the packed mask of the tokens
    that stay inside the lexeme, and the records ``(row, offset)`` of the other tokens that
    complete the terminal strictly inside their bytes at ``offset`` with a byte after it that
    a following lexeme may start with. Results are shared across grammars (:data:`SHARED_WALKS`).
    """

    def __init__(
        self, grammar: PreparedGrammar, table: VocabTable, *, is_set_walking: bool = False
    ) -> None:
        self.table = table
        self.dfas = grammar.terminal_dfas
        self.follow = follow_first_bytes(grammar)
        self._follow_keys = [follow.tobytes() for follow in self.follow]
        self.horizon = table.matrix.shape[1] + 1  # longest token + 1 (chain_keys)
        # with set walks: every terminal of at most SET_MAX_STATES states stacked now
        self._stacked: tuple[np.ndarray, ...] | None = None
        self._offsets = np.full(len(self.dfas), -1, dtype=np.int64)  # per terminal
        self._is_walkable = np.zeros(len(self.dfas), dtype=bool)  # per terminal
        self._first_words = np.zeros((0, 4), dtype=np.uint64)  # per stacked state
        self._stacked_lists: tuple[list[bool], list[int]] | None = None  # stacked_terminals
        if is_set_walking:
            self._stack_small()

    def _stack_small(self) -> None:
        """Stack every terminal DFA of at most ``SET_MAX_STATES`` states side by side, in one
        kernel pass over their concatenated class tables (:func:`stack_terminals`): a set walk
        then reads ``(terminal, state)`` pairs as global states, and an object's first set walk
        over 100+ key terminals pays no per-terminal bookkeeping (it paid ~20 us a key,
        stacking and testing each terminal on first use). Rows stay in each terminal's
        byte-class space (a key literal's state is a few classes wide, not 256 bytes)."""
        small = [t for t, dfa in enumerate(self.dfas) if dfa.num_states <= SET_MAX_STATES]
        dfas = [self.dfas[t] for t in small]
        num_states = np.array([dfa.num_states for dfa in dfas], dtype=np.int64)
        num_cells = np.array([dfa.transitions.size for dfa in dfas], dtype=np.int64)
        state_lo = np.zeros(len(dfas) + 1, dtype=np.int64)
        cell_lo = np.zeros(len(dfas) + 1, dtype=np.int64)
        np.cumsum(num_states, out=state_lo[1:])
        np.cumsum(num_cells, out=cell_lo[1:])
        cells = np.concatenate(
            [dfa.transitions.ravel() for dfa in dfas] or [np.zeros(0, np.int32)], dtype=np.int32
        )
        class_rows = np.array([dfa.byte_to_class for dfa in dfas], dtype=np.uint8).reshape(-1, 256)
        total = int(state_lo[-1])
        row_start = np.empty(total, dtype=np.int64)
        term_of = np.empty(total, dtype=np.int64)
        classes = np.zeros((len(self.dfas), 256), dtype=np.uint8)  # by terminal id
        first_words = np.zeros((total, 4), dtype=np.uint64)
        stack_terminals(
            cells, class_rows, np.array(small, dtype=np.int64), state_lo, cell_lo,
            SET_MAX_STATES, SET_MAX_LOOP_BYTES, row_start, classes, term_of, self._is_walkable,
            first_words,
        )  # fmt: skip
        accepting = np.concatenate(
            [dfa.is_accepting for dfa in dfas] or [np.zeros(0, bool)], dtype=bool
        )
        self._offsets[small] = state_lo[:-1]
        self._first_words = first_words
        follow = np.ascontiguousarray(np.stack(self.follow))  # (T, 257)
        self._stacked = (cells, row_start, classes, term_of, accepting, follow)
        for array in self._stacked:
            array.setflags(write=False)

    def can_walk_in_set(self, t: int) -> bool:
        """True if set walks are on and terminal ``t``'s DFA has at most ``SET_MAX_STATES``
        states and is acyclic or narrow (at most ``SET_MAX_LOOP_BYTES`` live bytes per state)."""
        return bool(self._is_walkable[t])

    def _stack(self) -> tuple[np.ndarray, ...]:
        """The small terminal DFAs stacked side by side: ``(cells, row_start, classes,
        term_of, is_accepting, follow)`` over global states (terminal ``t``'s state ``q`` is
        ``offsets[t] + q``): the successor of global state ``g`` on byte ``b`` is
        ``cells[row_start[g] + classes[term_of[g], b]]`` (a global state, ``-1`` dead);
        ``follow`` ``(T, 257)``."""
        assert self._stacked is not None, "set walks need is_set_walking=True"
        return self._stacked

    def set_start(self, t: int, state: int) -> int:
        """The stacked state of ``(t, state)`` (``t`` must :meth:`can_walk_in_set`)."""
        return int(self._offsets[t]) + state

    def set_walk(self, starts: np.ndarray) -> tuple[np.ndarray, ...]:
        """Every token from a set of ``(terminal, state)`` pairs (small terminals, by their
        :meth:`set_start` states) at once: one trie walk with the set of live states per node.
        Returns ``(within_row, split_rows, split_steps, split_terminals)``: what the pairs' own
        walks give together (records of tokens within some pair dropped)."""
        return walk_trie_set(self._stack(), starts, self.table)

    def set_walk_records(
        self,
        starts: np.ndarray,
        rows: np.ndarray,
        first_byte_bounds: np.ndarray,
        steps: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """:meth:`walk_records` from a set of pairs at once (as :meth:`set_walk`)."""
        return walk_suffixes_set(self._stack(), starts, rows, steps, first_byte_bounds, self.table)

    def stacked_terminals(self) -> tuple[list[bool], list[int]]:
        """``(is_walkable, offsets)`` per terminal as Python lists (:meth:`can_walk_in_set`,
        and the stacked state of a terminal's state 0, see :meth:`set_start`), for loops
        over many parts."""
        if self._stacked_lists is None:
            self._stacked_lists = (self._is_walkable.tolist(), self._offsets.tolist())
        return self._stacked_lists

    def stacked_first_words(self, starts: list[int]) -> np.ndarray:
        """``(len(starts), 4)`` uint64: per stacked state (:meth:`set_start`), the bytes it can
        read (bit ``b & 63`` of word ``b >> 6``), as :meth:`first_bytes` gives them."""
        return self._first_words[starts]

    def first_bytes(self, t: int, state: int) -> int:
        """Bit set (an int, bit ``b`` = byte ``b``) of the bytes state ``state`` of terminal
        ``t`` can read."""
        offset = int(self._offsets[t])
        if offset >= 0:
            words = self._first_words[offset + state]
        else:
            table, classes, _ = class_table(self.dfas[t])
            words = first_byte_words(table, classes, state)
        return int.from_bytes(words.tobytes(), "little")

    def site(self, t: int, state: int) -> tuple:
        """What a walk from ``state`` of terminal ``t`` is keyed by: the DFA and the state, or
        for a counted chain its :class:`~formcast.grammar.automata.chain_keys.ChainKeys` key (walks
        shared across chains and positions)."""
        dfa = self.dfas[t]
        keys = dfa.walk_keys
        if keys is None:
            return (dfa, state)
        return keys.key(state, self.horizon)

    def local_site(self, t: int, state: int) -> int | tuple:
        """:meth:`site` within this walker's grammar: ``state`` itself where the site is the
        terminal's DFA and ``state`` (the terminal names the DFA), else the chain key."""
        keys = self.dfas[t].walk_keys
        return state if keys is None else keys.key(state, self.horizon)

    def _walked(self, t: int, state: int, site: tuple) -> tuple[ByteDFA, int, np.ndarray]:
        """``(dfa, state, is_accepting)`` a walk keyed by :meth:`site` is computed on: for a
        chain, the canonical chain of its code and the acceptance of its key
        (:func:`~formcast.grammar.automata.chain_keys.canonical_chain`), else the terminal's own."""
        dfa = self.dfas[t]
        keys = dfa.walk_keys
        if keys is None:
            return dfa, state, dfa.is_accepting
        horizon = self.horizon
        pattern, at, accept_from = canonical_chain(site, keys.width, horizon)
        found = _CANONICAL.get(pattern)
        if found is None:
            base = regex_to_dfa(pattern)
            other = base.walk_keys
            if other is None or other.width != keys.width or other.item != keys.item:
                return dfa, state, dfa.is_accepting  # no chain of the same code: walk this one
            found = _CANONICAL[pattern] = (base, {})
            if len(_CANONICAL) > _MAX_CANONICAL:
                _CANONICAL.pop(next(iter(_CANONICAL)))
        base, acceptance = found
        is_accepting = acceptance.get(accept_from)
        if is_accepting is None:
            is_accepting = chain_acceptance(keys.width, horizon, accept_from)
            acceptance[accept_from] = is_accepting
        return base, at, is_accepting

    def vocabulary_walk(self, t: int, state: int) -> tuple[np.ndarray, ...]:
        """Every token from ``state`` of terminal ``t``: one walk of the vocabulary trie."""
        site = self.site(t, state)
        key = ("vocabulary", site, self.table, self._follow_keys[t])
        found = SHARED_WALKS.get(key)
        if found is None:
            dfa, at, is_accepting = self._walked(t, state, site)
            table, classes, _ = class_table(dfa)
            within_row, rows, steps, _ = walk_trie(
                table, at, is_accepting, self.follow[t], self._coverage(dfa), self.table,
                classes=classes,
            )  # fmt: skip
            found = SHARED_WALKS.put(key, (within_row, rows, steps))
        return found

    def _coverage(self, dfa: ByteDFA) -> tuple:
        key = ("coverage", dfa, self.table)
        found = SHARED_WALKS.get(key)
        if found is None:
            found = SHARED_WALKS.put(key, tuple(chain_coverage(dfa, self.table)))
        return found

    def walk_records(
        self,
        t: int,
        state: int,
        rows: np.ndarray,
        first_byte_bounds: np.ndarray,
        steps: np.ndarray,
        records_key: bytes,
    ) -> tuple[np.ndarray, ...]:
        """Read records ``(rows[k], steps[k])`` (sorted by first byte, ``first_byte_bounds``)
        from ``state`` of terminal ``t``; ``records_key`` is a digest of the records."""
        site = self.site(t, state)
        key = ("records", site, self.table, self._follow_keys[t], records_key)
        found = SHARED_WALKS.get(key)
        if found is None:
            dfa, at, is_accepting = self._walked(t, state, site)
            table, classes, _ = class_table(dfa)
            within_row, rows, steps, _ = walk_suffixes(
                table, at, rows, steps, first_byte_bounds,
                is_accepting, self.follow[t], self.table, classes=classes,
            )  # fmt: skip
            found = SHARED_WALKS.put(key, (within_row, rows, steps))
        return found


caches.register(
    "cfg.walks.shared_walks", f"LRU: {_SHARED_MAX_BYTES:,} bytes of walks", SHARED_WALKS.clear
)
caches.register("cfg.walks.canonical_chains", f"{_MAX_CANONICAL} chain codes", _CANONICAL.clear)
