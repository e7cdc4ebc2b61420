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
strictly inside their bytes, the split points (completed terminals, remaining suffix). Both
are found by a vectorised walk of the whole vocabulary, memoised per state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formcast.grammar.cfg_grammar import PreparedGrammar
from formcast.grammar.token_index import VocabTable

DEAD = -1


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
        self._walks: dict[int, TokenWalk] = {}

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
        # rows interned but not yet expanded were stored as dead; refresh the ones we expanded
        stale = [s for s in seen if s < known and not (self._np_rows[s] >= 0).any()]
        for s in stale:
            self._np_rows[s] = self.rows[s]
        return self._np_rows

    def token_walk(self, sid: int) -> TokenWalk:
        """Within-lexeme mask and split points of every vocabulary token from state ``sid``."""
        found = self._walks.get(sid)
        if found is not None:
            return found
        table_np = self._materialise_from(sid)
        accepts_any = np.fromiter(
            (bool(a) for a in self.accepts), dtype=bool, count=self.num_states
        )
        vt = self.table
        by_step = vt.bytes_by_step  # (max_len, T) uint16, 256 past the end
        bounds = vt.first_byte_bounds
        first_next = table_np[sid]
        first_bytes = np.flatnonzero(first_next >= 0)
        counts = bounds[first_bytes + 1] - bounds[first_bytes]
        rows = np.concatenate(
            [np.arange(bounds[b], bounds[b + 1], dtype=np.int64) for b in first_bytes]
            or [np.zeros(0, dtype=np.int64)]
        )
        cur = np.repeat(first_next[first_bytes], counts).astype(np.int64)
        within_rows: list[np.ndarray] = []
        split_rows: list[np.ndarray] = []
        split_steps: list[np.ndarray] = []
        split_states: list[np.ndarray] = []
        max_len = by_step.shape[0]
        for j in range(1, max_len + 1):
            if not len(rows):
                break
            byte = by_step[j][rows] if j < max_len else np.full(len(rows), 256, dtype=np.uint16)
            is_end = byte == 256
            if is_end.any():
                within_rows.append(rows[is_end])
            go = ~is_end
            rows, cur, byte = rows[go], cur[go], byte[go]
            is_split = accepts_any[cur]
            if is_split.any():
                split_rows.append(rows[is_split])
                split_steps.append(np.full(int(is_split.sum()), j, dtype=np.int64))
                split_states.append(cur[is_split])
            nxt = table_np[cur, byte.astype(np.int64)]
            alive = nxt >= 0
            rows, cur = rows[alive], nxt[alive].astype(np.int64)
        within_ids = (
            vt.token_ids[np.concatenate(within_rows)] if within_rows else np.zeros(0, np.int32)
        )
        walk = TokenWalk(
            within_row=pack_ids(within_ids, vt.num_words),
            splits=self._group_splits(within_ids, split_rows, split_steps, split_states),
        )
        self._walks[sid] = walk
        return walk

    def _group_splits(self, within_ids, split_rows, split_steps, split_states):
        if not split_rows:
            return []
        rows = np.concatenate(split_rows)
        steps = np.concatenate(split_steps)
        states = np.concatenate(split_states)
        keep = ~np.isin(self.table.token_ids[rows], within_ids)
        rows, steps, states = rows[keep], steps[keep], states[keep]
        # group by the set of completed terminals (few distinct sets)
        accept_ids: dict[frozenset[int], int] = {}
        state_group = np.array(
            [
                accept_ids.setdefault(self.accepts[s], len(accept_ids))
                for s in range(self.num_states)
            ]
        )
        groups = state_group[states]
        out = []
        for accepts, g in accept_ids.items():
            sel = groups == g
            if sel.any():
                out.append(SplitGroup.build(accepts, rows[sel], steps[sel], self.table))
        return out


class SplitGroup:
    """Tokens that complete one of ``accepts`` after a proper prefix of their bytes.

    Records ``(token row, split offset j)`` are kept as arrays sorted by the first suffix byte
    (``token[j]``); the sorted distinct suffixes starting with a given byte are built on first
    use (:meth:`suffixes_from`), so bytes the parser never allows cost nothing.
    """

    def __init__(self, accepts, rows, steps, first_byte_bounds, table: VocabTable) -> None:
        self.accepts: frozenset[int] = accepts
        self.rows = rows
        self.steps = steps
        self.first_byte_bounds = first_byte_bounds
        self.table = table
        self._by_first: dict[int, tuple[list[bytes], np.ndarray, np.ndarray]] = {}

    @classmethod
    def build(cls, accepts, rows, steps, table: VocabTable) -> SplitGroup:
        firsts = table.matrix[rows, steps]
        order = np.argsort(firsts, kind="stable")
        bounds = np.searchsorted(firsts[order], np.arange(257))
        return cls(accepts, rows[order], steps[order], bounds, table)

    def has_first_byte(self, byte: int) -> bool:
        return self.first_byte_bounds[byte] < self.first_byte_bounds[byte + 1]

    def suffixes_from(self, byte: int) -> tuple[list[bytes], np.ndarray, np.ndarray]:
        """``(suffixes, token_ids, offsets)``: sorted distinct suffixes starting with ``byte``;
        the tokens of ``suffixes[k]`` are ``token_ids[offsets[k]:offsets[k + 1]]``."""
        found = self._by_first.get(byte)
        if found is not None:
            return found
        lo, hi = self.first_byte_bounds[byte], self.first_byte_bounds[byte + 1]
        matrix, lengths, token_ids = self.table.matrix, self.table.lengths, self.table.token_ids
        by_suffix: dict[bytes, list[int]] = {}
        for row, j in zip(self.rows[lo:hi].tolist(), self.steps[lo:hi].tolist(), strict=True):
            by_suffix.setdefault(matrix[row, j : lengths[row]].tobytes(), []).append(
                int(token_ids[row])
            )
        suffixes = sorted(by_suffix)
        counts = [len(by_suffix[x]) for x in suffixes]
        flat = np.asarray([t for x in suffixes for t in by_suffix[x]], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        found = (suffixes, flat, offsets)
        self._by_first[byte] = found
        return found


def pack_ids(token_ids: np.ndarray, num_words: int) -> np.ndarray:
    """``(num_words,)`` int32 packed row with the bits of ``token_ids`` set."""
    bits = np.zeros(num_words * 32, dtype=bool)
    bits[token_ids] = True
    return np.packbits(bits, bitorder="little").view("<i4").copy()
