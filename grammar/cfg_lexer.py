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
strictly inside their bytes, the split points grouped by the set of completed terminals
(:class:`SplitGroup`). Both are found by a vectorised walk of the whole vocabulary, memoised
per state. The same walk (:meth:`CfgLexer.walk_records`) reads a group's remaining suffixes
from the lexer state the next lexeme starts in, memoised per (group, state), so the parser is
only asked which terminals it takes, never to read token bytes. Walks over a handful of records
run byte by byte (cheaper than setting up arrays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formcast.grammar.cfg_grammar import PreparedGrammar
from formcast.grammar.token_index import VocabTable

DEAD = -1
_NUM_SCALAR_RECORDS = 48  # walks of at most this many records run byte by byte in Python


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


class CfgLexer:
    """Interned lexer states over one prepared grammar (see module docstring)."""

    def __init__(self, grammar: PreparedGrammar, table: VocabTable) -> None:
        self.table = table
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
        self._accepts_any = np.zeros(0, dtype=bool)
        self._materialised: set[int] = set()
        self._walks: dict[int, TokenWalk] = {}

    _STATE_FIELDS = (
        "_keys", "expected_of", "pairs_of", "accepts", "is_boundary", "rows", "_initial",
        "_np_rows", "_accepts_any", "_materialised", "_walks",
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
        targets: list[set[tuple[int, int]]] = [set() for _ in range(256)]
        for c, s in self.pairs_of[sid]:
            nxt = self._full_rows[c][s]
            for b in np.flatnonzero(nxt >= 0).tolist():
                targets[b].add((c, int(nxt[b])))
        out = [DEAD] * 256
        ignore_dfas = self.dfas[self.num_terminals :]
        for b, pairs in enumerate(targets):
            if not pairs:
                continue
            boundary = any(
                c >= self.num_terminals and ignore_dfas[c - self.num_terminals].is_accepting[s]
                for c, s in pairs
            )
            if boundary:
                pairs |= self._starts(expected)
            out[b] = self._intern(expected, pairs, boundary)
        self.rows[sid] = out
        return out

    def step(self, sid: int, byte: int) -> int:
        """The state after ``byte``, or ``-1``."""
        row = self.rows[sid]
        if row is None:
            row = self.row(sid)
        return row[byte]

    # -- vectorised vocabulary walk ---------------------------------------------------------------

    def _materialise_from(self, sid: int) -> np.ndarray:
        """Rows of every state reachable from ``sid``, as an ``(N, 256)`` int32 table."""
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
        known = self._np_rows.shape[0]
        if known < self.num_states:
            fresh = [
                self.rows[s] if self.rows[s] is not None else [DEAD] * 256
                for s in range(known, self.num_states)
            ]
            self._np_rows = np.vstack([self._np_rows, np.asarray(fresh, dtype=np.int32)])
            accepts = self.accepts[known:]
            self._accepts_any = np.concatenate(
                [self._accepts_any, np.fromiter(map(bool, accepts), dtype=bool, count=len(accepts))]
            )
        # rows interned but not yet expanded were stored as dead; refresh the ones we expanded
        for s in seen:
            if s < known and s not in self._materialised:
                self._np_rows[s] = self.rows[s]
        self._materialised.update(seen)
        return self._np_rows

    def token_walk(self, sid: int) -> TokenWalk:
        """Within-lexeme mask and split points of every vocabulary token from state ``sid``."""
        found = self._walks.get(sid)
        if found is None:
            vt = self.table
            walk = self.walk_records(
                sid, np.arange(len(vt.token_ids), dtype=np.int32), vt.first_byte_bounds, 0
            )
            found = self._walks[sid] = walk
        return found

    def walk_records(
        self, sid: int, rows: np.ndarray, first_byte_bounds: np.ndarray, steps
    ) -> TokenWalk:
        """Read token suffixes from lexer state ``sid``, vectorised.

        A record is ``(rows[k], steps[k])``: the bytes of table row ``rows[k]`` from offset
        ``steps[k]`` on (never empty). Records are sorted by their first byte
        (``first_byte_bounds``, ``(257,)``), so bytes dead in ``sid`` are skipped whole.
        ``steps`` is an array parallel to ``rows`` or one int for all.
        Returns the tokens of the records that end inside the lexeme (``within_row``) and the
        records that complete a terminal strictly inside their bytes, grouped by the set of
        completed terminals (``splits``; offsets are where the next lexeme starts).
        """
        vt = self.table
        first_next = np.asarray(self.row(sid), dtype=np.int64)
        first_bytes = np.flatnonzero((first_next >= 0) & (np.diff(first_byte_bounds[:257]) > 0))
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
        accepts_any = self._accepts_any
        by_step = vt.bytes_by_step  # (max_len, T) uint16, 256 past the end
        max_len, num_rows = by_step.shape
        flat_bytes = by_step.reshape(-1)
        cur_rows = rows[idx].astype(np.int64)
        uniform = not isinstance(steps, np.ndarray)  # every record starts at the same offset
        pos = steps + 1 if uniform else steps.astype(np.int64) + 1
        cur = np.repeat(first_next[first_bytes], counts)
        within: list[np.ndarray] = []
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
            is_split = accepts_any[cur]
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

    def _finish_scalar(self, rows, positions, states, within, split_rows, split_pos, split_states):
        """Continue records (at least one byte read) byte by byte; append to the result lists."""
        vt = self.table
        matrix, lengths, accepts, step = vt.matrix, vt.lengths, self.accepts, self.step
        out_within: list[int] = []
        out_split: list[tuple[int, int, int]] = []
        for row, start, state in zip(
            rows.tolist(), positions.tolist(), states.tolist(), strict=True
        ):
            for k, byte in enumerate(matrix[row, start : lengths[row]].tobytes()):
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
        """:meth:`walk_records` for a few records: byte by byte, no array set-up."""
        vt = self.table
        matrix, lengths, accepts, step = vt.matrix, vt.lengths, self.accepts, self.step
        starts = steps.tolist() if isinstance(steps, np.ndarray) else [steps] * len(rows)
        within: list[int] = []
        split_rows: list[int] = []
        split_pos: list[int] = []
        split_states: list[int] = []
        for row, start in zip(rows.tolist(), starts, strict=True):
            state = sid
            for k, byte in enumerate(matrix[row, start : lengths[row]].tobytes()):
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
            keep = ~np.isin(self.table.token_ids[rows], within_ids)
            rows, steps, states = rows[keep], steps[keep], states[keep]
        # group by the set of completed terminals (few distinct sets)
        groups: dict[frozenset[int], list[int]] = {}
        for s in np.unique(states).tolist():
            groups.setdefault(self.accepts[s], []).append(s)
        out = []
        for accepts, members in groups.items():
            sel = np.isin(states, members) if len(groups) > 1 else slice(None)
            out.append(SplitGroup.build(accepts, rows[sel], steps[sel], self.table))
        return out


class SplitGroup:
    """Tokens that complete one of ``accepts`` after a proper prefix of their bytes.

    Records ``(token row, split offset j)`` are kept as int32 arrays sorted by the first
    suffix byte (``token[j]``). What the suffixes do from a fresh lexeme depends only on the
    lexer state the next lexeme starts in, so :meth:`walk_from` is memoised per state: only
    the completed terminal's parse (which lexer state follows, whether the parser takes the
    terminal at all) is looked up at mask time.
    """

    def __init__(self, accepts, rows, steps, first_byte_bounds) -> None:
        self.accepts: frozenset[int] = accepts
        self.rows = rows
        self.steps = steps
        self.first_byte_bounds = first_byte_bounds
        self._walks: dict[int, TokenWalk] = {}

    @classmethod
    def build(cls, accepts, rows, steps, table: VocabTable) -> SplitGroup:
        firsts = table.matrix[rows, steps]
        order = np.argsort(firsts, kind="stable")
        bounds = np.searchsorted(firsts[order], np.arange(257))
        return cls(accepts, rows[order].astype(np.int32), steps[order].astype(np.int32), bounds)

    def walk_from(self, lexer: CfgLexer, sid: int) -> TokenWalk:
        """The suffixes read from lexer state ``sid`` (memoised; see :meth:`CfgLexer.walk_records`)."""
        found = self._walks.get(sid)
        if found is None:
            found = lexer.walk_records(sid, self.rows, self.first_byte_bounds, self.steps)
            self._walks[sid] = found
        return found


def pack_ids(token_ids: np.ndarray, num_words: int) -> np.ndarray:
    """``(num_words,)`` int32 packed row with the bits of ``token_ids`` set."""
    bits = np.zeros(num_words * 32, dtype=bool)
    bits[token_ids] = True
    return np.packbits(bits, bitorder="little").view("<i4").copy()
