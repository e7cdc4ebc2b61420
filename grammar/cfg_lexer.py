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
different expected sets share a few walks. A part's walk is one vectorised walk of the whole
vocabulary per *first-byte class* (bytes leading to the same state, memoised per (state, class)),
records whose remaining bytes all loop on a non-splitting state (a string's inside) are settled
at once from per-token byte sets, and split groups are hash-consed by content. The same walker
(:meth:`CfgLexer.walk_records`) reads a group's remaining suffixes from each part of the lexeme
that follows, memoised per (group, part), so the parser is only asked which terminals it takes,
never to read token bytes. Walks over a handful of records run byte by byte (cheaper than
setting up arrays). :meth:`CfgLexer.precompute` walks parts ahead of use within a compile-time
budget. Parts that are one terminal pair and no ignored text (all parts of grammars without
``%ignore``, e.g. GBNF and JSON Schema grammars) are walked on that terminal's own DFA instead
(:mod:`formcast.grammar.cfg_dfa_walk`: trie walks inside strings, no interned-state rows, split
records filtered by the bytes that can follow the terminal); ``USE_DFA_WALKS = False`` turns
that off (tests compare both).
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from dataclasses import dataclass

import numpy as np

from formcast.grammar.cfg_dfa_walk import DfaWalker
from formcast.grammar.cfg_grammar import PreparedGrammar
from formcast.grammar.token_index import VocabTable

DEAD = -1
RESTART = -1  # pseudo-terminal of split groups: an ignored lexeme ended, the next one starts
_NUM_SCALAR_RECORDS = 48  # walks of at most this many records run byte by byte in Python
USE_DFA_WALKS = True  # single-terminal parts walk their terminal's DFA (cfg_dfa_walk)


@dataclass
class TokenWalk:
    """Parser-independent token facts for one lexer state.

    Attributes
    ----------
    within_row:
        ``(num_words,)`` int32 packed mask: tokens whose every byte keeps the lexeme alive.
    splits:
        One :class:`SplitGroup` per set of completed terminals: the tokens that are not in
        ``within_row`` but complete a terminal strictly inside their bytes.
    """

    within_row: np.ndarray
    splits: list[SplitGroup]

    def __post_init__(self) -> None:
        self.within_row.setflags(write=False)
        self.has_within = bool(self.within_row.any())


class CfgLexer:
    """Interned lexer states over one prepared grammar (see module docstring)."""

    def __init__(self, grammar: PreparedGrammar, table: VocabTable) -> None:
        self.table = table
        _suffix_byte_sets(table)  # once per vocabulary (like the table itself)
        self.num_terminals = grammar.num_terminals
        self.dfas = list(grammar.terminal_dfas) + list(grammar.ignore_dfas)
        self.ignore_components = range(self.num_terminals, len(self.dfas))
        self._full_rows = [dfa.transitions[:, dfa.byte_to_class] for dfa in self.dfas]
        self._keys: dict[tuple, int] = {}
        self.expected_of: list[frozenset[int]] = []
        self.pairs_of: list[tuple[tuple[int, int], ...]] = []
        self.accepts: list[frozenset[int]] = []
        self.is_boundary: list[bool] = []
        self.rows: list[list[int] | None] = []
        self._initial: dict[frozenset[int], int] = {}
        self._np_rows = np.zeros((0, 256), dtype=np.int32)
        self._splits_any = np.zeros(0, dtype=bool)
        self._split_flags: list[bool] = []  # the same as a list (for byte-by-byte walks)
        self._materialised: set[int] = set()
        self._walks: dict[int, TokenWalk] = {}
        self._parts: dict[int, tuple[int, ...]] = {}
        self._fresh: dict[tuple[frozenset[int], bool], tuple[int, ...]] = {}
        self._first_bytes: dict[int, int] = {}
        self._groups: dict[tuple, SplitGroup] = {}
        self._class_walks: dict[tuple, TokenWalk] = {}
        self._dfa_walker = DfaWalker(grammar, table)

    _STATE_FIELDS = (
        "_keys", "expected_of", "pairs_of", "accepts", "is_boundary", "rows", "_initial",
        "_np_rows", "_splits_any", "_split_flags", "_materialised", "_walks", "_parts", "_fresh",
        "_first_bytes", "_groups", "_class_walks",
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
            expected = frozenset()
        key = (expected, frozenset(pairs), boundary)
        found = self._keys.get(key)
        if found is not None:
            return found
        sid = len(self.pairs_of)
        self._keys[key] = sid
        self.expected_of.append(expected)
        self.pairs_of.append(tuple(sorted(pairs)))
        accepts = frozenset(
            c for c, s in pairs if c < self.num_terminals and self.dfas[c].is_accepting[s]
        )
        self.accepts.append(accepts)
        self.is_boundary.append(boundary)
        self.rows.append(None)
        return sid

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
        nxt = np.stack([self._full_rows[c][s] for c, s in pairs_of], axis=1)  # (256, P)
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
                found = tuple(
                    self._intern(frozenset(), {(c, s)}, False)
                    for c, s in pairs
                    if c < self.num_terminals
                )
                if ignore:
                    found += (self._intern(frozenset(), ignore, self.is_boundary[sid]),)
            self._parts[sid] = found
        return found

    def fresh_parts(self, expected: frozenset[int], with_ignore: bool) -> tuple[int, ...]:
        """Parts of a fresh lexeme over ``expected``: :meth:`parts` of :meth:`initial`
        (``with_ignore``), or only the terminals' start parts (after a :data:`RESTART`: the
        ignore part that restarted is walked on by the ignore part itself)."""
        key = (expected, with_ignore)
        found = self._fresh.get(key)
        if found is None:
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
        queue = deque(self._intern(frozenset(), {(t, 0)}, False) for t in range(self.num_terminals))
        if self.num_terminals < len(self.dfas):
            queue.append(self.initial(frozenset()))
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
                live = np.flatnonzero(self._dfa_walker.first_bytes(*pair)).tolist()
            else:
                live = [b for b, t in enumerate(self.row(sid)) if t >= 0]
            found = sum(1 << b for b in live)
            self._first_bytes[sid] = found
        return found

    def _single_pair(self, sid: int) -> tuple[int, int] | None:
        """``(terminal, DFA state)`` if ``sid`` is a part with one live terminal pair and no
        ignored text (its walks are read off that terminal's DFA, :mod:`cfg_dfa_walk`)."""
        if not USE_DFA_WALKS:
            return None
        pairs = self.pairs_of[sid]
        if len(pairs) == 1 and pairs[0][0] < self.num_terminals and not self.expected_of[sid]:
            return pairs[0]
        return None

    def _dfa_walk(self, terminal: int, within_rows, split_rows, split_steps) -> TokenWalk:
        """A :class:`TokenWalk` from :class:`DfaWalker` output (splits complete ``terminal``;
        records of tokens that stay within are dropped, as in :meth:`_group_splits`)."""
        vt = self.table
        if within_rows.dtype == bool:  # a (T,) mask over the table rows (from a trie walk)
            is_within = within_rows
            bits = np.zeros(vt.num_words * 32, dtype=bool)
            bits[vt.token_ids] = is_within
            within_row = np.packbits(bits, bitorder="little").view("<i4")
        else:
            within_row = pack_ids(vt.token_ids[within_rows], vt.num_words)
            is_within = None
            if len(split_rows) and len(within_rows):
                is_within = np.zeros(len(vt.token_ids), dtype=bool)
                is_within[within_rows] = True
        splits = []
        if len(split_rows):
            if is_within is not None:
                keep = ~is_within[split_rows]
                split_rows, split_steps = split_rows[keep], split_steps[keep]
            if len(split_rows):
                splits.append(self._group(frozenset((terminal,)), split_rows, split_steps))
        return TokenWalk(within_row=within_row, splits=splits)

    def step(self, sid: int, byte: int) -> int:
        """The state after ``byte``, or ``-1``."""
        row = self.rows[sid]
        if row is None:
            row = self.row(sid)
        return row[byte]

    # -- vectorised vocabulary walk ---------------------------------------------------------------

    def _grow_table(self) -> None:
        """Extend the numpy table and the split flags to every interned state (rows not
        computed yet are stored as dead; :meth:`_materialise_from` refreshes them)."""
        known = len(self._split_flags)  # states in the table (its capacity may be larger)
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
            splits = [bool(self.split_key(s)) for s in range(known, num_states)]
            self._splits_any[known:num_states] = splits
            self._split_flags += splits

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
        known = len(self._split_flags)
        self._grow_table()
        # rows interned but not yet expanded were stored as dead; refresh the ones we expanded
        for s in seen:
            if s < known and s not in self._materialised:
                self._np_rows[s] = self.rows[s]
        self._materialised.update(seen)
        return self._np_rows

    def token_walk(self, sid: int) -> TokenWalk:
        """Within-lexeme mask and split points of every vocabulary token from state ``sid``
        (the union of its :meth:`parts`' walks; a part's is one vectorised vocabulary walk)."""
        found = self._walks.get(sid)
        if found is None:
            parts = self.parts(sid)
            pair = self._single_pair(sid) if parts == (sid,) else None
            if pair is not None:
                found = self._dfa_walk(pair[0], *self._dfa_walker.vocabulary_walk(*pair))
            elif parts == (sid,):
                found = self._vocabulary_walk(sid)
            else:
                found = union_walks([self.token_walk(p) for p in parts], self.table.num_words)
            self._walks[sid] = found
        return found

    def _vocabulary_walk(self, sid: int) -> TokenWalk:
        """The walk of every token from part ``sid``, as the union of one walk per *first-byte
        class*: the bytes ``B`` that lead to the same state ``q``. What tokens starting with a
        byte of ``B`` do after it depends on ``(q, B)`` only, so class walks are memoised on
        that and shared by states that differ only on other bytes (e.g. the digit-counting
        states of a number all reach the same state on a space)."""
        row = self.row(sid)
        bounds = self.table.first_byte_bounds
        classes: dict[int, list[int]] = {}
        for b, q in enumerate(row):
            if q >= 0 and bounds[b + 1] > bounds[b]:
                classes.setdefault(q, []).append(b)
        walks = []
        for q, first in classes.items():
            # a state that reads nothing more behaves like any other such state with the
            # same split key (the end of a terminal, say): share their class walks
            state_key = ("end", self.split_key(q)) if not self.first_bytes(q) else q
            key = (state_key, sum(1 << b for b in first))
            walk = self._class_walks.get(key)
            if walk is None:
                only = np.zeros(256, dtype=bool)
                only[first] = True
                rows = np.arange(len(self.table.token_ids), dtype=np.int32)
                walk = self.walk_records(sid, rows, bounds, 0, only)
                self._class_walks[key] = walk
            walks.append(walk)
        if len(walks) == 1:
            return walks[0]
        return union_walks(walks, self.table.num_words)

    def walk_records(
        self, sid: int, rows: np.ndarray, first_byte_bounds: np.ndarray, steps, only_bytes=None
    ) -> TokenWalk:
        """Read token suffixes from lexer state ``sid``, vectorised.

        A record is ``(rows[k], steps[k])``: the bytes of table row ``rows[k]`` from offset
        ``steps[k]`` on (never empty). Records are sorted by their first byte
        (``first_byte_bounds``, ``(257,)``), so bytes dead in ``sid`` are skipped whole.
        ``steps`` is an array parallel to ``rows`` or one int for all.
        Returns the tokens of the records that end inside the lexeme (``within_row``) and the
        records that complete a terminal (or an ignored lexeme) strictly inside their bytes,
        grouped by :meth:`split_key` (``splits``; offsets are where the next lexeme starts).
        ``sid`` must be a part (no expected terminals, see :meth:`parts`). ``only_bytes``
        (``(256,)`` bool, optional) keeps only the records whose first byte it marks.
        """
        assert not self.expected_of[sid], "walks start from parts"
        pair = self._single_pair(sid) if only_bytes is None else None
        if pair is not None:
            found = self._dfa_walker.walk_records(*pair, rows, first_byte_bounds, steps)
            return self._dfa_walk(pair[0], *found)
        if len(rows) <= _NUM_SCALAR_RECORDS and only_bytes is None:
            return self._walk_records_scalar(sid, rows, steps)
        vt = self.table
        first_next = np.asarray(self.row(sid), dtype=np.int64)
        is_live = (first_next >= 0) & (np.diff(first_byte_bounds[:257]) > 0)
        if only_bytes is not None:
            is_live &= only_bytes
        first_bytes = np.flatnonzero(is_live)
        lo, hi = first_byte_bounds[first_bytes], first_byte_bounds[first_bytes + 1]
        counts = hi - lo
        total = int(counts.sum())
        idx = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts - lo, counts)
        if isinstance(steps, np.ndarray):
            steps = steps[idx]
        if total <= _NUM_SCALAR_RECORDS:
            return self._walk_records_scalar(sid, rows[idx], steps)
        table_np = self._materialise_from(sid)
        flat_table = table_np.reshape(-1)  # state s, byte b -> flat_table[s * 256 + b]
        splits_any = self._splits_any
        by_step = vt.bytes_by_step  # (max_len, T) uint16, 256 past the end
        max_len, num_rows = by_step.shape
        flat_bytes = by_step.reshape(-1)
        cur_rows = rows[idx].astype(np.int64)
        uniform = not isinstance(steps, np.ndarray)  # every record starts at the same offset
        pos = steps + 1 if uniform else steps.astype(np.int64) + 1
        cur = np.repeat(first_next[first_bytes], counts)
        within: list[np.ndarray] = []
        if uniform and pos == 1 and len(cur_rows) > _NUM_SCALAR_RECORDS:
            # records whose other bytes all loop on the state the first byte reached (a
            # string's inside, say) end inside the lexeme without a split: settle them at once
            cur_rows, cur = self._settle_loops(cur_rows, cur, within)
        split_rows: list[np.ndarray] = []
        split_pos: list[np.ndarray] = []
        split_states: list[np.ndarray] = []
        while len(cur_rows):
            # pos: offset of the next byte to read (>= 1 byte read from the record already)
            if len(cur_rows) <= _NUM_SCALAR_RECORDS:  # a few long tokens left: finish by hand
                positions = np.full(len(cur_rows), pos) if uniform else pos
                found = (within, split_rows, split_pos, split_states)
                self._finish_scalar(cur_rows, positions, cur, *found)
                break
            if uniform:
                if pos >= max_len:
                    within.append(cur_rows)
                    break
                byte = by_step[pos][cur_rows]
            else:
                byte = flat_bytes[np.minimum(pos, max_len - 1) * num_rows + cur_rows]
                byte[pos >= max_len] = 256
            is_end = byte == 256
            if is_end.any():
                within.append(cur_rows[is_end])
                go = ~is_end
                cur_rows, cur, byte = cur_rows[go], cur[go], byte[go]
                if not uniform:
                    pos = pos[go]
            is_split = splits_any[cur]
            if is_split.any():
                split_rows.append(cur_rows[is_split])
                split_pos.append(
                    np.full(int(is_split.sum()), pos, dtype=np.int64) if uniform else pos[is_split]
                )
                split_states.append(cur[is_split])
            nxt = flat_table[cur * 256 + byte]
            alive = nxt >= 0
            cur_rows, cur = cur_rows[alive], nxt[alive]
            pos = pos + 1 if uniform else pos[alive] + 1
        within_ids = vt.token_ids[np.concatenate(within)] if within else np.zeros(0, np.int32)
        return TokenWalk(
            within_row=pack_ids(within_ids, vt.num_words),
            splits=self._group_splits(within_ids, split_rows, split_pos, split_states),
        )

    def _settle_loops(self, rows: np.ndarray, states: np.ndarray, within: list) -> tuple:
        """Move to ``within`` the records (first byte read, in state ``states``) whose remaining
        bytes all loop on that state when it records no split; return the others."""
        keep = np.ones(len(rows), dtype=bool)
        suffix_sets = None
        for s in np.flatnonzero(np.bincount(states)).tolist():
            if self._split_flags[s]:
                continue
            loop = np.asarray(self.row(s)) == s
            if not loop.any():
                continue
            if suffix_sets is None:
                suffix_sets = _suffix_byte_sets(self.table)
            leave = ~np.packbits(loop, bitorder="little").view("<u8")  # (4,) bytes leaving s
            sel = np.flatnonzero(states == s)
            sel_rows = rows[sel]
            outside = np.zeros(len(sel), dtype=np.uint64)
            for w in np.flatnonzero(leave).tolist():
                outside |= suffix_sets[w][sel_rows] & leave[w]
            keep[sel[outside == 0]] = False
        if keep.all():
            return rows, states
        within.append(rows[~keep])
        return rows[keep], states[keep]

    def _finish_scalar(self, rows, positions, states, within, split_rows, split_pos, split_states):
        """Continue records (at least one byte read) byte by byte; append to the result lists."""
        vt = self.table
        matrix, lengths, step = vt.matrix, vt.lengths, self.step
        self._grow_table()
        accepts = self._split_flags  # grown in place below as states are interned
        out_within: list[int] = []
        out_split: list[tuple[int, int, int]] = []
        for row, start, state in zip(
            rows.tolist(), positions.tolist(), states.tolist(), strict=True
        ):
            for k, byte in enumerate(matrix[row, start : lengths[row]].tobytes()):
                if state >= len(accepts):
                    self._grow_table()
                if accepts[state]:
                    out_split.append((row, start + k, state))
                state = step(state, byte)
                if state < 0:
                    break
            else:
                out_within.append(row)
        if out_within:
            within.append(np.asarray(out_within, dtype=np.int64))
        if out_split:
            found = np.asarray(out_split, dtype=np.int64)
            split_rows.append(found[:, 0])
            split_pos.append(found[:, 1])
            split_states.append(found[:, 2])

    def _walk_records_scalar(self, sid: int, rows: np.ndarray, steps) -> TokenWalk:
        """:meth:`walk_records` for a few records: byte by byte, no array set-up (and only the
        states the records reach are expanded, not every state reachable from ``sid``)."""
        vt = self.table
        matrix, lengths, step = vt.matrix, vt.lengths, self.step
        self._grow_table()
        accepts = self._split_flags  # grown in place below as states are interned
        starts = steps.tolist() if isinstance(steps, np.ndarray) else [steps] * len(rows)
        within: list[int] = []
        split_rows: list[int] = []
        split_pos: list[int] = []
        split_states: list[int] = []
        for row, start in zip(rows.tolist(), starts, strict=True):
            state = sid
            for k, byte in enumerate(matrix[row, start : lengths[row]].tobytes()):
                if state >= len(accepts):
                    self._grow_table()
                if k and accepts[state]:
                    split_rows.append(row)
                    split_pos.append(start + k)
                    split_states.append(state)
                state = step(state, byte)
                if state < 0:
                    break
            else:
                within.append(row)
        within_ids = vt.token_ids[np.asarray(within, dtype=np.int64)]
        as_arrays = [np.asarray(x, dtype=np.int64) for x in (split_rows, split_pos, split_states)]
        return TokenWalk(
            within_row=pack_ids(within_ids, vt.num_words),
            splits=self._group_splits(within_ids, *([x] if len(x) else [] for x in as_arrays)),
        )

    def _group_splits(self, within_ids, split_rows, split_pos, split_states):
        if not split_rows:
            return []
        rows = np.concatenate(split_rows)
        steps = np.concatenate(split_pos)
        states = np.concatenate(split_states)
        if len(within_ids):
            is_within = np.zeros(self.table.num_words * 32, dtype=bool)
            is_within[within_ids] = True
            keep = ~is_within[self.table.token_ids[rows]]
            rows, steps, states = rows[keep], steps[keep], states[keep]
        # group by the set of completed terminals (few distinct sets)
        groups: dict[frozenset[int], list[int]] = {}
        for s in np.flatnonzero(np.bincount(states)).tolist():
            groups.setdefault(self.split_key(s), []).append(s)
        out = []
        for accepts, members in groups.items():
            if len(groups) > 1:
                is_member = np.zeros(self.num_states, dtype=bool)
                is_member[members] = True
                sel = is_member[states]
                out.append(self._group(accepts, rows[sel], steps[sel]))
            else:
                out.append(self._group(accepts, rows, steps))
        return out

    def _group(self, accepts: frozenset[int], rows: np.ndarray, steps: np.ndarray) -> SplitGroup:
        """The :class:`SplitGroup` of these records, hash-consed: walks from lexer states that
        split the same tokens at the same offsets (e.g. every state after which a leading
        space completes a lexeme) share one group, hence its memoised suffix walks."""
        group = SplitGroup.build(accepts, rows, steps, self.table)
        key = (accepts, group.rows.tobytes(), group.steps.tobytes())
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = group
        return found


class SplitGroup:
    """Tokens that complete one of ``accepts`` after a proper prefix of their bytes.

    ``accepts`` holds terminal ids, or :data:`RESTART` (ignored text ended there). Records
    ``(token row, split offset j)`` are kept as int32 arrays sorted by the first suffix byte
    (``token[j]``). What the suffixes do from a fresh lexeme depends only on that lexeme's
    parts, so :meth:`walk_from` is memoised per part and per tuple of parts: only the completed
    terminal's parse (which terminals follow, whether the parser takes the terminal at all) is
    looked up at mask time. Groups are hash-consed by content (:meth:`CfgLexer._group`), so
    their walks and the runtime's memo entries (keyed by group identity) are shared.
    """

    def __init__(self, accepts, rows, steps, first_byte_bounds) -> None:
        self.accepts: frozenset[int] = accepts
        self.rows = rows
        self.steps = steps
        self.first_byte_bounds = first_byte_bounds
        self._token_ids = np.zeros(0, dtype=np.int32)  # token id per record (set by build)
        self._num_words = 0
        self._token_row: np.ndarray | None = None  # their packed row, built on first use
        # bit set of the suffixes' first bytes: a part that reads none of them walks nothing
        self.first_bytes = sum(1 << b for b in np.flatnonzero(np.diff(first_byte_bounds)).tolist())
        # per part (int) and per tuple of parts (their union)
        self._walks: dict[int | tuple[int, ...], TokenWalk] = {}

    @classmethod
    def build(cls, accepts, rows, steps, table: VocabTable) -> SplitGroup:
        firsts = table.matrix[rows, steps]
        order = np.argsort(firsts, kind="stable")
        bounds = np.searchsorted(firsts[order], np.arange(257))
        group = cls(accepts, rows[order].astype(np.int32), steps[order].astype(np.int32), bounds)
        group._token_ids = table.token_ids[group.rows]
        group._num_words = table.num_words
        return group

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
        :meth:`CfgLexer.fresh_parts`): the union of one walk per part, each memoised."""
        found = self._walks.get(parts)
        if found is None:
            walks = []
            for part in parts:
                if not self.first_bytes & lexer.first_bytes(part):
                    continue
                walk = self._walks.get(part)
                if walk is None:
                    walk = lexer.walk_records(part, self.rows, self.first_byte_bounds, self.steps)
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
        row |= walk.within_row
        splits += walk.splits
    return TokenWalk(within_row=row, splits=splits)


_SUFFIX_SETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _suffix_byte_sets(table: VocabTable) -> np.ndarray:
    """``(4, T)`` uint64: bit ``b % 64`` of word ``b // 64`` of table row ``r`` is set iff byte
    ``b`` occurs in the token after its first byte (computed once per vocabulary table)."""
    found = _SUFFIX_SETS.get(table)
    if found is None:
        lengths = table.lengths.astype(np.int64)
        mask = np.arange(table.matrix.shape[1]) < lengths[:, None]
        mask[:, 0] = False
        row_of = np.nonzero(mask)[0]  # row of each suffix byte, ascending
        data = table.matrix[mask].astype(np.uint64)  # (N,) the suffix bytes, row by row
        found = np.zeros((4, len(lengths)), dtype=np.uint64)
        has = np.flatnonzero(lengths > 1)
        if len(has):
            starts = np.searchsorted(row_of, has)
            bits = np.left_shift(np.uint64(1), data & np.uint64(63))
            word = data >> np.uint64(6)
            for w in range(4):
                values = np.where(word == w, bits, np.uint64(0))
                found[w, has] = np.bitwise_or.reduceat(values, starts)
        _SUFFIX_SETS[table] = found
    return found


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
