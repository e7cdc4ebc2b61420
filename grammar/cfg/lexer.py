"""CfgLexer: one lazily built automaton for "ignored text, then one expected terminal".

A lexer state is the set of live ``(component, dfa_state)`` pairs for the lexeme read so far,
where the components are the expected terminals and the ``%ignore`` terminals. A lexeme is
``IGNORE* T`` for one expected terminal ``T``: whenever an ignore component completes, the
lexeme restarts (all components from their start state), so ignored text is a prefix of the
next lexeme rather than a token of its own. States are interned to ints; each has a 256-entry
successor row (``-1`` = dead), the set of expected terminals it completes (``accepts``), and
``is_boundary`` (the lexeme so far is only ignored text, possibly empty).

Per state, :meth:`CfgLexer.token_walk` computes what is independent of the parser: the tokens
whose bytes stay inside the lexeme (a packed mask row) and, for tokens that complete a terminal
strictly inside their bytes, the split points grouped by what completes there
(:class:`SplitGroup`). The pairs of a state evolve independently (an NFA) except where ignored
text restarts the expected terminals, so a state's walk is the union of the walks of its
*parts* (:meth:`CfgLexer.parts`): one per live terminal pair and one for the ignored text, whose
restarts are recorded as :data:`RESTART` splits and resolved against the parser's expected
terminals at mask time. Parts do not depend on the parse context, so the many lexer states of
different expected sets share a few walks. A part's walk is one walk of the vocabulary
trie and split groups are hash-consed by content. The same walker (:meth:`CfgLexer.
walk_records`) reads a group's remaining suffixes from each part of the lexeme that follows,
memoised per (group, part), so the parser is only asked which terminals it takes, never to
read token bytes. Both walks are numba kernels over an ``(S, 256)`` table
(:mod:`formcast.grammar.cfg.walks.kernels`). :meth:`CfgLexer.precompute` walks parts ahead of
use within a compile-time budget. Parts that are one terminal pair and no ignored text (all
parts of grammars without ``%ignore``, e.g. GBNF and JSON Schema grammars) are walked on that
terminal's own DFA instead (:mod:`formcast.grammar.cfg.walks.dfa_walk`: no interned-state rows,
split records filtered by the bytes that can follow the terminal, walks shared across grammars
that hold the same terminal DFA); ``CfgLexer(..., use_dfa_walks=False)`` turns that off
(tests compare both). With ``min_set_parts`` (JSON-Schema grammars), a state with that many such parts of
small acyclic or narrow DFAs (an object's next key among 100+ key terminals) is walked as one
*set* (:meth:`CfgLexer.set_parts`): one trie walk with the set of live states per node instead
of one walk per part, likewise for records.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from formcast.grammar.cfg.rules import PreparedGrammar
from formcast.grammar.cfg.walks.dfa_walk import DfaWalker
from formcast.grammar.cfg.walks.kernels import (
    NO_COVERAGE,
    sort_records,
    walk_suffixes,
    walk_trie,
)
from formcast.grammar.index.token_index import VocabTable

DEAD = -1
RESTART = -1  # pseudo-terminal of split groups: an ignored lexeme ended, the next one starts
# JSON-Schema grammars (compile_json_schema_cfg): this many single-terminal parts of small
# acyclic or narrow DFAs are walked as one set. Off for Lark/GBNF grammars: measured on
# bench_cfg's pyexpr, keywords meet again in many different sets, and their cached per-part
# walks are cheaper than a set walk per set (cold p99 0.70 vs 0.90 ms)
MIN_SET_PARTS = 8
_MAX_SET_PARTS_MEMO = 65536
_FULL_ROWS_MAX_STATES = 1024  # terminal DFAs up to this size get an (S, 256) successor table
_EVERY_BYTE = np.ones(257, dtype=bool)  # walks over interned states split before any byte
_NO_STARTS = np.zeros(0, dtype=np.int64)
# the expected set of parts (no terminal expected): one object, not one per interned state
_NO_TERMINALS: frozenset[int] = frozenset()


@dataclass(slots=True)
class TokenWalk:
    """Parser-independent token facts for one lexer state.

    Attributes
    ----------
    within_row:
        ``(num_words,)`` int32 packed mask: tokens whose every byte keeps the lexeme alive.
    splits:
        One :class:`SplitGroup` per set of completed terminals: the tokens that are not in
        ``within_row`` but complete a terminal strictly inside their bytes (a tuple: most walks
        have none and share the empty one, no per-walk list for the collector to scan).
    """

    within_row: np.ndarray
    splits: tuple[SplitGroup, ...]
    has_within: bool = field(init=False)  # within_row has a token (no per-instance dict)

    def __post_init__(self) -> None:
        self.within_row.setflags(write=False)
        self.has_within = bool(np.count_nonzero(self.within_row))  # (a third of .any()'s call)


class CfgLexer:
    """Interned lexer states over one prepared grammar (see module docstring)."""

    def __init__(
        self,
        grammar: PreparedGrammar,
        table: VocabTable,
        min_set_parts: int | None = None,
        *,
        use_dfa_walks: bool = True,
    ) -> None:
        self.table = table
        # single-terminal parts walk their terminal's DFA (walks.dfa_walk); False: every
        # part walks the interned lexer states (the generic path, which tests compare with)
        self.use_dfa_walks = use_dfa_walks
        self.min_set_parts = min_set_parts  # None: no set walks (see set_parts)
        self.num_terminals = grammar.num_terminals
        self.dfas = list(grammar.terminal_dfas) + list(grammar.ignore_dfas)
        self.ignore_components = range(self.num_terminals, len(self.dfas))
        self._full_rows: dict[int, np.ndarray] = {}  # component -> (S, 256), built on first use
        self._keys: dict[tuple, int] = {}  # (expected set's number, boundary, *sorted pairs)
        self._expected_ids: dict[frozenset[int], int] = {}
        self.expected_of: list[frozenset[int]] = []
        self.pairs_of: list[tuple[tuple[int, int], ...]] = []
        self.accepts: list[frozenset[int]] = []
        self.is_boundary: list[bool] = []
        self.rows: list[list[int] | None] = []
        self._initial: dict[frozenset[int], int] = {}
        self._np_rows = np.zeros((0, 256), dtype=np.int32)
        self._splits_any = np.zeros(0, dtype=bool)
        self._num_tabled = 0  # states whose row and split flag are in the numpy table
        self._materialised: set[int] = set()
        self._walks: dict[int, TokenWalk] = {}
        self._byte_steps: dict[int, int] = {}  # (sid << 8) | byte -> successor, see step
        self._parts: dict[int, tuple[int, ...]] = {}
        self._pair_parts: dict[tuple[int, int], int] = {}  # see _pair_part (not exported)
        self._fresh: dict[tuple[frozenset[int], bool], tuple[int, ...]] = {}
        self._first_bytes: dict[int, int] = {}
        self._groups: dict[tuple, SplitGroup] = {}
        self._sets: dict[frozenset[int], frozenset[int]] = {}  # see shared_set
        self._dfa_walker = DfaWalker(grammar, table, is_set_walking=min_set_parts is not None)
        self._set_parts: dict[tuple, tuple[np.ndarray, tuple[int, ...]]] = {}  # see set_parts
        # per part id, see _learn_part_facts
        self._fact_firsts = np.zeros((0, 4), dtype=np.uint64)
        self._fact_starts = np.zeros(0, dtype=np.int64)
        self._site_walks: dict[tuple[int, int | tuple], TokenWalk] = {}  # see _pair_walk

    _STATE_FIELDS = (
        "_keys", "_expected_ids", "expected_of", "pairs_of", "accepts", "is_boundary", "rows",
        "_initial", "_np_rows", "_splits_any", "_num_tabled", "_materialised", "_walks", "_parts",
        "_fresh", "_first_bytes", "_groups", "_byte_steps",
    )  # fmt: skip

    def export_state(self) -> dict:
        """Every state, row and token walk built so far (no vocabulary), for the disk cache."""
        return {name: getattr(self, name) for name in self._STATE_FIELDS}

    def load_state(self, state: dict) -> None:
        """Adopt :meth:`export_state` output of a lexer of the same grammar and vocabulary."""
        for name in self._STATE_FIELDS:
            setattr(self, name, state[name])

    @property
    def num_states(self) -> int:
        return len(self.pairs_of)

    def _starts(self, expected: frozenset[int]) -> set[tuple[int, int]]:
        pairs = {(t, 0) for t in expected}
        pairs.update((c, 0) for c in self.ignore_components)
        return pairs

    def _intern(self, expected: frozenset[int], pairs: set[tuple[int, int]], boundary: bool) -> int:
        if not any(c >= self.num_terminals for c, _ in pairs):
            # no ignore component is live, so the lexeme cannot restart: the expected set no
            # longer matters (states inside e.g. a string are shared by every context)
            expected = _NO_TERMINALS
        # a flat tuple of ints (the expected set by its number, then the sorted pairs): the
        # collector untracks such tuples in its youngest pass (a nested one only if its inner
        # tuples come first in the collector's list, which its reordering breaks), so the ~1
        # key per first-visited state does not fill the older generation whose collection
        # pauses a mask (a key of frozensets stayed tracked: ~1,700 of the ~7,500 objects of a
        # 1.4 ms gen-1 pass)
        expected_id = self._expected_ids.setdefault(expected, len(self._expected_ids))
        sorted_pairs = tuple(sorted(pairs))
        key = (expected_id, boundary, *itertools.chain.from_iterable(sorted_pairs))
        found = self._keys.get(key)
        if found is not None:
            return found
        accepts = frozenset(
            c for c, s in pairs if c < self.num_terminals and self.dfas[c].is_accepting[s]
        )
        return self._add_state(key, expected, sorted_pairs, accepts, boundary)

    def _add_state(
        self,
        key: tuple[int, ...],
        expected: frozenset[int],
        sorted_pairs: tuple[tuple[int, int], ...],
        accepts: frozenset[int],
        boundary: bool,
    ) -> int:
        """Append a new state under ``key`` (not interned yet; see :meth:`_intern`)."""
        sid = len(self.pairs_of)
        self._keys[key] = sid
        self.expected_of.append(expected)
        self.pairs_of.append(sorted_pairs)
        self.accepts.append(self.shared_set(accepts))
        self.is_boundary.append(boundary)
        self.rows.append(None)
        return sid

    def shared_set(self, terminals: frozenset[int]) -> frozenset[int]:
        """``terminals`` as the one object kept for that set (acceptance sets of interned
        states and split groups repeat a few small sets thousands of times: each object is
        work for every garbage collection that scans it)."""
        return self._sets.setdefault(terminals, terminals)

    def initial(self, expected: frozenset[int]) -> int:
        """The state at the start of a lexeme when the parser expects ``expected``."""
        sid = self._initial.get(expected)
        if sid is None:
            sid = self._intern(expected, self._starts(expected), True)
            self._initial[expected] = sid
        return sid

    def row(self, sid: int) -> list[int]:
        """The 256 successors of state ``sid`` (``-1`` = dead), computed on first use."""
        found = self.rows[sid]
        if found is not None:
            return found
        expected = self.expected_of[sid]
        pairs_of = self.pairs_of[sid]
        if not pairs_of:
            self.rows[sid] = [DEAD] * 256
            return self.rows[sid]
        # (P, 256): the next state of every live pair on every byte; bytes whose columns are
        # equal lead to the same lexer state, so each distinct column is interned once
        nxt = np.stack([self._full_row(c, s) for c, s in pairs_of], axis=1)  # (256, P)
        data = np.ascontiguousarray(nxt, dtype=np.int32).tobytes()
        width = 4 * len(pairs_of)
        column_of: dict[bytes, int] = {}
        byte_column = [
            column_of.setdefault(data[b * width : (b + 1) * width], len(column_of))
            for b in range(256)
        ]
        firsts = {k: b for b, k in reversed(list(enumerate(byte_column)))}
        columns = nxt[[firsts[k] for k in range(len(column_of))]].tolist()
        ignore_dfas = self.dfas[self.num_terminals :]
        interned = []
        for column in columns:
            pairs = {(c, q) for (c, _), q in zip(pairs_of, column, strict=True) if q >= 0}
            if not pairs:
                interned.append(DEAD)
                continue
            boundary = any(
                c >= self.num_terminals and ignore_dfas[c - self.num_terminals].is_accepting[q]
                for c, q in pairs
            )
            if boundary:
                pairs |= self._starts(expected)
            interned.append(self._intern(expected, pairs, boundary))
        out = [interned[k] for k in byte_column]
        self.rows[sid] = out
        return out

    def _full_row(self, component: int, state: int) -> np.ndarray:
        """``(256,)`` successors of ``state`` in a component's DFA."""
        full = self._full_rows.get(component)
        if full is None:
            dfa = self.dfas[component]
            if dfa.num_states > _FULL_ROWS_MAX_STATES:  # a long counted chain: row by row
                return dfa.transitions[state][dfa.byte_to_class]
            full = self._full_rows[component] = dfa.transitions[:, dfa.byte_to_class]
        return full[state]

    def split_key(self, sid: int) -> frozenset[int]:
        """What a walk records at ``sid`` strictly inside a token: the completed terminals,
        plus :data:`RESTART` where an ignored lexeme just ended (in a part, see :meth:`parts`)."""
        accepts = self.accepts[sid]
        return accepts | {RESTART} if self.is_boundary[sid] else accepts

    def parts(self, sid: int) -> tuple[int, ...]:
        """The *parts* of state ``sid``: states whose vocabulary walks, united, give its walk.

        The live pairs of a lexer state evolve independently (an NFA), except that an ignored
        lexeme's end restarts every expected terminal, which is where ``expected`` enters. A
        part has no expected terminals: one part per live terminal pair (that terminal's DFA
        alone), plus one for the live ignore pairs (ignored text only, restarting only the
        ignore automata) whose walk records the restarts as :data:`RESTART` splits, resolved
        at mask time against the parser node's expected terminals. Parts do not depend on the
        parse context, so their walks are shared by every lexer state that contains them."""
        found = self._parts.get(sid)
        if found is None:
            pairs = self.pairs_of[sid]
            ignore = {(c, s) for c, s in pairs if c >= self.num_terminals}
            if not self.expected_of[sid] and (len(pairs) == 1 or len(ignore) == len(pairs)):
                found = (sid,)  # a part already
            else:
                found = tuple(self._pair_part(c, s) for c, s in pairs if c < self.num_terminals)
                if ignore:
                    found += (self._intern(_NO_TERMINALS, ignore, self.is_boundary[sid]),)
            self._parts[sid] = found
        return found

    def _pair_part(self, terminal: int, state: int) -> int:
        """The part of the single pair ``(terminal, state)`` (memoised :meth:`_intern`)."""
        found = self._pair_parts.get((terminal, state))
        if found is None:
            # _intern of {(terminal, state)} (a terminal pair: no ignore component, so no
            # expected set), its key built directly: an object's first key meets ~100 new parts
            key = (self._expected_ids.setdefault(_NO_TERMINALS, len(self._expected_ids)), False,
                   terminal, state)  # fmt: skip
            found = self._keys.get(key)
            if found is None:
                is_accepting = self.dfas[terminal].is_accepting[state]
                accepts = frozenset((terminal,)) if is_accepting else _NO_TERMINALS
                found = self._add_state(key, _NO_TERMINALS, ((terminal, state),), accepts, False)
            self._pair_parts[(terminal, state)] = found
        return found

    def fresh_parts(self, expected: frozenset[int], with_ignore: bool) -> tuple[int, ...]:
        """Parts of a fresh lexeme over ``expected``: :meth:`parts` of :meth:`initial`
        (``with_ignore``), or only the terminals' start parts (after a :data:`RESTART`: the
        ignore part that restarted is walked on by the ignore part itself)."""
        key = (expected, with_ignore)
        found = self._fresh.get(key)
        if found is None:
            if len(expected) > 1 and self.num_terminals == len(self.dfas):
                # no ignored text: the parts of initial(expected), without interning it
                found = tuple(self._pair_part(t, 0) for t in sorted(expected))
            else:
                found = self.parts(self.initial(expected))
            if not with_ignore:
                found = tuple(p for p in found if self.pairs_of[p][0][0] < self.num_terminals)
            self._fresh[key] = found
        return found

    def precompute(self, budget_s: float) -> int:
        """Walk the vocabulary from lexer parts ahead of use, breadth first from every
        terminal's start (and the ignored text's), until ``budget_s`` seconds of this thread's
        CPU time are spent; return how many parts are walked. Masks do not depend on it (a
        part not walked here is walked on first use), only first visits get cheaper."""
        start = time.thread_time()
        queue = deque(self._pair_part(t, 0) for t in range(self.num_terminals))
        if self.num_terminals < len(self.dfas):
            queue.append(self.initial(_NO_TERMINALS))
        seen = set(queue)
        while queue and time.thread_time() - start < budget_s:
            sid = queue.popleft()
            self.token_walk(sid)
            for nxt in self.row(sid):
                if nxt >= 0 and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return len(seen) - len(queue)

    def first_bytes(self, sid: int) -> int:
        """Bit set (an int, bit ``b`` = byte ``b``) of the bytes state ``sid`` can read."""
        found = self._first_bytes.get(sid)
        if found is None:
            pair = self._single_pair(sid)
            if pair is not None:
                found = self._dfa_walker.first_bytes(*pair)
            else:
                is_live = np.asarray(self.row(sid)) >= 0
                # bit b of the int = byte b (little-endian bits of little-endian bytes)
                found = int.from_bytes(np.packbits(is_live, bitorder="little").tobytes(), "little")
            self._first_bytes[sid] = found
        return found

    def _single_pair(self, sid: int) -> tuple[int, int] | None:
        """``(terminal, DFA state)`` if ``sid`` is a part with one live terminal pair and no
        ignored text (its walks are read off that terminal's DFA, :mod:`~formcast.grammar.cfg.walks.dfa_walk`)."""
        if not self.use_dfa_walks:
            return None
        pairs = self.pairs_of[sid]
        if len(pairs) == 1 and pairs[0][0] < self.num_terminals and not self.expected_of[sid]:
            return pairs[0]
        return None

    def _dfa_walk(self, terminal: int, within_row, split_rows, split_steps) -> TokenWalk:
        """A :class:`TokenWalk` from :class:`DfaWalker` output (splits complete ``terminal``)."""
        splits: tuple[SplitGroup, ...] = ()
        if len(split_rows):
            terminals = self.shared_set(frozenset((terminal,)))
            splits = (self._group(terminals, split_rows, split_steps),)
        return TokenWalk(within_row=within_row, splits=splits)

    def step(self, sid: int, byte: int) -> int:
        """The state after ``byte``, or ``-1``.

        Reads the row if :meth:`row` built it; otherwise computes this one successor
        (``O(pairs)``, memoised per ``(state, byte)``), since a walk through a large terminal
        visits a new state at nearly every byte and needs one entry of its row, not 256."""
        row = self.rows[sid]
        if row is not None:
            return row[byte]
        key = (sid << 8) | byte
        found = self._byte_steps.get(key)
        if found is None:
            found = self._byte_steps[key] = self._successor(sid, byte)
        return found

    def _successor(self, sid: int, byte: int) -> int:
        """Entry ``byte`` of :meth:`row` (same interning), computed alone."""
        expected = self.expected_of[sid]
        pairs: set[tuple[int, int]] = set()
        boundary = False
        for c, s in self.pairs_of[sid]:
            dfa = self.dfas[c]
            q = int(dfa.transitions[s, dfa.byte_to_class[byte]])
            if q >= 0:
                pairs.add((c, q))
                boundary = boundary or (c >= self.num_terminals and bool(dfa.is_accepting[q]))
        if not pairs:
            return DEAD
        if boundary:
            pairs |= self._starts(expected)
        return self._intern(expected, pairs, boundary)

    # -- walks over the interned states (parts with ignored text) --------------------------------

    def _grow_table(self) -> None:
        """Extend the numpy table and the split flags to every interned state (rows not
        computed yet are stored as dead; :meth:`_materialise_from` refreshes them)."""
        known = self._num_tabled  # states in the table (its capacity may be larger)
        num_states = self.num_states
        if known < num_states:
            if self._np_rows.shape[0] < num_states:  # grow geometrically (amortised copies)
                size = max(num_states, 2 * self._np_rows.shape[0])
                grown = np.full((size, 256), DEAD, dtype=np.int32)
                grown[:known] = self._np_rows[:known]
                self._np_rows = grown
                self._splits_any = np.concatenate(
                    [self._splits_any[:known], np.zeros(size - known, dtype=bool)]
                )
            for s in range(known, num_states):
                if self.rows[s] is not None:
                    self._np_rows[s] = self.rows[s]
                self._splits_any[s] = bool(self.split_key(s))
            self._num_tabled = num_states

    def _materialise_from(self, sid: int) -> np.ndarray:
        """Rows of every state reachable from ``sid``, as an ``(N, 256)`` int32 table (rows
        past the interned states are padding)."""
        if sid in self._materialised:
            return self._np_rows
        stack = [sid]
        seen = {sid}
        while stack:
            s = stack.pop()
            for t in self.row(s):
                if t >= 0 and t not in seen:
                    seen.add(t)
                    stack.append(t)
        known = self._num_tabled
        self._grow_table()
        # rows interned but not yet expanded were stored as dead; refresh the ones we expanded
        for s in seen:
            if s < known and s not in self._materialised:
                self._np_rows[s] = self.rows[s]
        self._materialised.update(seen)
        return self._np_rows

    def token_walk(self, sid: int) -> TokenWalk:
        """Within-lexeme mask and split points of every vocabulary token from state ``sid``
        (the union of its :meth:`parts`' walks; a part's is one walk of the vocabulary trie)."""
        found = self._walks.get(sid)
        if found is None:
            parts = self.parts(sid)
            pair = self._single_pair(sid) if parts == (sid,) else None
            if pair is not None:
                found = self._pair_walk(*pair)
            elif parts == (sid,):
                table = self._materialise_from(sid)
                found = self._walk(walk_trie(table, sid, *self._flags(), NO_COVERAGE, self.table))
            else:
                starts, alone = self.set_parts(parts)
                walks = [self.token_walk(p) for p in alone]
                if len(starts):
                    walks.append(self._set_walk(self._dfa_walker.set_walk(starts)))
                found = union_walks(walks, self.table.num_words)
            self._walks[sid] = found
        return found

    def _pair_walk(self, terminal: int, state: int) -> TokenWalk:
        """The walk of a single-pair part, one :class:`TokenWalk` per :meth:`DfaWalker.site`:
        the positions of a bounded string with the same distance to its bounds share it (and
        with it the head masks' split groups), not only its stored arrays."""
        # keyed by ints (and a chain key's str): see _intern on tracked keys
        key = (terminal, self._dfa_walker.local_site(terminal, state))
        found = self._site_walks.get(key)
        if found is None:
            found = self._dfa_walk(terminal, *self._dfa_walker.vocabulary_walk(terminal, state))
            self._site_walks[key] = found
        return found

    def set_parts(
        self, parts: tuple[int, ...], first_bytes: int = -1
    ) -> tuple[np.ndarray, tuple[int, ...]]:
        """``(starts, alone)`` for the parts that can read a byte of bit set ``first_bytes``
        (all by default): the stacked start states (:meth:`DfaWalker.set_start`) of the
        single-pair parts of small acyclic or narrow terminal DFAs (:meth:`DfaWalker.
        can_walk_in_set`), to be walked together in one set walk (an object's next key among
        100+ key terminals is one trie walk, not 100+), if there are at least
        ``min_set_parts`` of them (else none), and the parts to walk one by one. Memoised per
        ``(parts, first_bytes)``; per-part facts are arrays (:meth:`_learn_part_facts`)."""
        least = self.min_set_parts
        if least is None or len(parts) < least:
            if first_bytes != -1:
                parts = tuple(p for p in parts if first_bytes & self.first_bytes(p))
            return _NO_STARTS, parts
        key = (parts, first_bytes)
        found = self._set_parts.get(key)
        if found is not None:
            return found
        ids = np.array(parts, dtype=np.int64)  # (P,)
        self._learn_part_facts(ids, first_bytes != -1)
        fact_starts = self._fact_starts[ids]  # (P,) stacked start, or < 0: walked alone
        firsts = self._fact_firsts[ids]  # (P, 4)
        if first_bytes == -1:
            # no byte filter: a part walked alone is walked untested (one that reads no byte
            # walks nothing), so a first key among hundreds of large terminals computes no
            # first bytes of theirs
            reads = firsts.any(axis=1) | (fact_starts < 0)  # (P,)
        else:
            firsts &= np.frombuffer(first_bytes.to_bytes(32, "little"), dtype="<u8")
            reads = firsts.any(axis=1)  # (P,) the part reads one of the bytes
        num_starts = int(np.count_nonzero(reads & (fact_starts >= 0)))
        if num_starts < least:
            found = (_NO_STARTS, tuple(ids[reads].tolist()))
        else:
            is_alone = reads & (fact_starts < 0)
            found = (fact_starts[reads & (fact_starts >= 0)], tuple(ids[is_alone].tolist()))
        if len(self._set_parts) < _MAX_SET_PARTS_MEMO:
            self._set_parts[key] = found
        return found

    def _learn_part_facts(self, ids: np.ndarray, with_firsts: bool) -> None:
        """Fill the per-part facts of :meth:`set_parts` for the parts ``ids`` not seen yet:
        ``_fact_starts[p]``, the stacked start state of part ``p`` (single pairs of terminals
        :meth:`DfaWalker.can_walk_in_set`), else -1 (walked alone), -3 (walked alone, first
        bytes not computed yet) or -2 (not seen); ``_fact_firsts[p]`` ``(4,)`` uint64, the
        bytes it can read (bit ``b & 63`` of word ``b >> 6``), for parts walked alone only
        ``with_firsts``. Arrays indexed by part id, so an object's next key among hundreds of
        parts is a gather, not a Python loop over the parts."""
        size = int(ids.max()) + 1 if len(ids) else 0
        if size > len(self._fact_starts):
            size = max(size, 2 * len(self._fact_starts), 64)
            firsts = np.zeros((size, 4), dtype=np.uint64)
            starts = np.full(size, -2, dtype=np.int64)
            firsts[: len(self._fact_firsts)] = self._fact_firsts
            starts[: len(self._fact_starts)] = self._fact_starts
            self._fact_firsts, self._fact_starts = firsts, starts
        walker = self._dfa_walker
        new_ids = ids[self._fact_starts[ids] == -2].tolist()
        # the parts of one stacked terminal pair (:meth:`_single_pair` and
        # :meth:`DfaWalker.can_walk_in_set`, inlined: a first object key meets ~1,000 new parts)
        is_walkable, offsets = walker.stacked_terminals() if self.use_dfa_walks else ((), ())
        num_terminals = self.num_terminals
        pairs_of, expected_of = self.pairs_of, self.expected_of
        stacked: list[int] = []
        stacked_starts: list[int] = []
        for part in new_ids:
            pairs = pairs_of[part]
            if len(pairs) == 1 and not expected_of[part] and is_walkable:
                t, q = pairs[0]
                if t < num_terminals and is_walkable[t]:
                    stacked.append(part)
                    stacked_starts.append(offsets[t] + q)
                    continue
            self._fact_starts[part] = -3
        if stacked:
            self._fact_starts[stacked] = stacked_starts
            self._fact_firsts[stacked] = walker.stacked_first_words(stacked_starts)
        if with_firsts:
            for part in ids[self._fact_starts[ids] == -3].tolist():
                self._fact_firsts[part] = np.frombuffer(
                    self.first_bytes(part).to_bytes(32, "little"), dtype="<u8"
                )
                self._fact_starts[part] = -1

    def _set_walk(self, found: tuple[np.ndarray, ...]) -> TokenWalk:
        """A :class:`TokenWalk` from a set walk: split records grouped by the terminal that
        completes (one group per terminal, as the pairs' own walks would give)."""
        within_row, rows, steps, terminals = found
        splits = []
        for t in np.unique(terminals).tolist():
            is_t = terminals == t
            splits.append(self._group(self.shared_set(frozenset((t,))), rows[is_t], steps[is_t]))
        return TokenWalk(within_row=within_row, splits=tuple(splits))

    def walk_records_set(
        self, starts: np.ndarray, rows: np.ndarray, first_byte_bounds, steps
    ) -> TokenWalk:
        """:meth:`walk_records` from several single-pair parts at once, by their stacked start
        states (see :meth:`set_parts`)."""
        return self._set_walk(
            self._dfa_walker.set_walk_records(starts, rows, first_byte_bounds, steps)
        )

    def _flags(self) -> tuple[np.ndarray, np.ndarray]:
        """``(is_split, follow)`` of walks over the interned states: every state whose
        :meth:`split_key` is not empty splits, before any byte."""
        return self._splits_any, _EVERY_BYTE

    def walk_records(
        self,
        sid: int,
        rows: np.ndarray,
        first_byte_bounds: np.ndarray,
        steps: np.ndarray,
        records_key: bytes,
    ) -> TokenWalk:
        """Read token suffixes from lexer state ``sid``.

        A record is ``(rows[k], steps[k])`` (int32 arrays): the bytes of table row ``rows[k]``
        from offset ``steps[k]`` on (never empty). Records are sorted by their first byte
        (``first_byte_bounds``, ``(257,)``), so bytes dead in ``sid`` are skipped whole.
        Returns the tokens of the records that end inside the lexeme (``within_row``) and the
        records of the other tokens that complete a terminal (or an ignored lexeme) strictly
        inside their bytes, grouped by :meth:`split_key` (``splits``; offsets are where the
        next lexeme starts). ``sid`` must be a part (no expected terminals, see :meth:`parts`).
        ``records_key``: a digest of the records (:attr:`SplitGroup.records_key`), the key of
        walks shared across grammars.
        """
        assert not self.expected_of[sid], "walks start from parts"
        pair = self._single_pair(sid)
        if pair is not None:
            found = self._dfa_walker.walk_records(
                *pair, rows, first_byte_bounds, steps, records_key
            )
            return self._dfa_walk(pair[0], *found)
        table = self._materialise_from(sid)
        args = (rows, steps, first_byte_bounds, *self._flags())
        return self._walk(walk_suffixes(table, sid, *args, self.table))

    def _walk(self, found: tuple[np.ndarray, ...]) -> TokenWalk:
        """A :class:`TokenWalk` from a kernel's output over the interned states: split records
        grouped by the :meth:`split_key` of the state they split in (few distinct keys)."""
        within_row, rows, steps, states = found
        if not len(rows):
            return TokenWalk(within_row=within_row, splits=())
        groups: dict[frozenset[int], list[int]] = {}
        for s in np.unique(states).tolist():
            groups.setdefault(self.split_key(s), []).append(s)
        if len(groups) == 1:
            (key,) = groups
            return TokenWalk(within_row=within_row, splits=(self._group(key, rows, steps),))
        splits = []
        for key, members in groups.items():
            sel = np.isin(states, members)
            splits.append(self._group(key, rows[sel], steps[sel]))
        return TokenWalk(within_row=within_row, splits=tuple(splits))

    def _group(self, accepts: frozenset[int], rows: np.ndarray, steps: np.ndarray) -> SplitGroup:
        """The :class:`SplitGroup` of these records, hash-consed: walks from lexer states that
        split the same tokens at the same offsets (e.g. every state after which a leading
        space completes a lexeme) share one group, hence its memoised suffix walks."""
        rows, steps, bounds, first_bytes = sort_records(rows, steps, self.table)
        key = (accepts, rows.tobytes(), steps.tobytes())
        found = self._groups.get(key)
        if found is None:
            found = SplitGroup(accepts, rows, steps, bounds, first_bytes, self.table)
            self._groups[key] = found
        return found


class SplitGroup:
    """Tokens that complete one of ``accepts`` after a proper prefix of their bytes.

    ``accepts`` holds terminal ids, or :data:`RESTART` (ignored text ended there). Records
    ``(token row, split offset j)`` are kept as int32 arrays sorted by the first suffix byte
    (``token[j]``), then by row and offset (:func:`~formcast.grammar.cfg.walks.kernels.
    sort_records`; ``first_bytes`` is the int bit set of those first bytes). What the suffixes
    do from a fresh lexeme depends only on that lexeme's parts, so :meth:`walk_from` is
    memoised per part and per tuple of parts: only the completed terminal's parse (which
    terminals follow, whether the parser takes the terminal at all) is looked up at mask time. Groups are hash-consed by content (:meth:`CfgLexer._group`), so
    their walks and the runtime's memo entries (keyed by group identity) are shared.
    """

    def __init__(self, accepts, rows, steps, first_byte_bounds, first_bytes, table) -> None:
        self.accepts: frozenset[int] = accepts
        self.rows = rows
        self.steps = steps
        self.first_byte_bounds = first_byte_bounds
        self._token_ids = table.token_ids[rows]  # token id per record
        self._num_words = table.num_words
        self._token_row: np.ndarray | None = None  # their packed row, built on first use
        # bit set of the suffixes' first bytes: a part that reads none of them walks nothing
        self.first_bytes: int = first_bytes
        # per part (int) and per tuple of parts (their union)
        self._walks: dict[int | tuple[int, ...], TokenWalk] = {}
        self._records_key: bytes | None = None

    @property
    def records_key(self) -> bytes:
        """128-bit BLAKE2 digest of the records (rows and offsets), computed on first use: the
        key of their walks in :data:`~formcast.grammar.cfg.walks.dfa_walk.SHARED_WALKS`."""
        if self._records_key is None:
            digest = hashlib.blake2b(self.rows.tobytes(), digest_size=16)
            digest.update(self.steps.tobytes())
            self._records_key = digest.digest()
        return self._records_key

    def is_covered(self, row: np.ndarray) -> bool:
        """True if every token of the group is set in packed ``row`` (``(num_words,)``)."""
        ids = self._token_ids
        if len(ids) <= 8:
            return all(int(row[i >> 5]) >> (i & 31) & 1 for i in ids.tolist())
        packed = self._token_row
        if packed is None:
            packed = self._token_row = pack_ids(ids, self._num_words)
        return not (packed & ~row).any()

    def walk_from(self, lexer: CfgLexer, parts: tuple[int, ...]) -> TokenWalk:
        """The suffixes read from a fresh lexeme with these parts (see
        :meth:`CfgLexer.fresh_parts`): the union of one walk per part, each memoised (many
        parts of small terminals: one set walk, :meth:`CfgLexer.set_parts`)."""
        found = self._walks.get(parts)
        if found is None:
            walks = []
            starts, alone = lexer.set_parts(parts, self.first_bytes)
            if len(starts):
                walks.append(
                    lexer.walk_records_set(starts, self.rows, self.first_byte_bounds, self.steps)
                )
            for part in alone:
                walk = self._walks.get(part)
                if walk is None:
                    walk = lexer.walk_records(
                        part, self.rows, self.first_byte_bounds, self.steps, self.records_key
                    )
                    self._walks[part] = walk
                walks.append(walk)
            if len(walks) == 1:
                found = walks[0]
            else:
                found = union_walks(walks, lexer.table.num_words)
                found.within_row.setflags(write=False)
            self._walks[parts] = found
        return found


def union_walks(walks: list[TokenWalk], num_words: int) -> TokenWalk:
    """The walk of a union of independent automata: within rows ORed, split groups listed."""
    row = np.zeros(num_words, dtype=np.int32)
    splits: list[SplitGroup] = []
    for walk in walks:
        if walk.has_within:
            row |= walk.within_row
        splits += walk.splits
    return TokenWalk(within_row=row, splits=tuple(splits))


def pack_ids(token_ids: np.ndarray, num_words: int) -> np.ndarray:
    """``(num_words,)`` int32 packed row with the bits of ``token_ids`` set."""
    if len(token_ids) <= 64:
        ids = np.asarray(token_ids, dtype=np.int64)
        words = np.zeros(num_words, dtype=np.uint32)
        np.bitwise_or.at(words, ids >> 5, np.left_shift(1, ids & 31).astype(np.uint32))
        return words.view("<i4")
    bits = np.zeros(num_words * 32, dtype=bool)
    bits[token_ids] = True
    return np.packbits(bits, bitorder="little").view("<i4").copy()
