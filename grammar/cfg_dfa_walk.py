"""Vocabulary walks of single-terminal lexer parts, read off the terminal's own byte DFA.

Most lexer parts (:meth:`formcast.grammar.cfg_lexer.CfgLexer.parts`) are one live pair
``(terminal t, DFA state q)``: reading bytes from it is reading ``t``'s DFA from ``q``, and a
*split* (``t`` completes strictly inside a token) happens where that DFA accepts. So such a
part's walk needs neither interned lexer states nor their 256-entry rows: this module walks the
terminal DFA directly.

- Whole-vocabulary walks use the vocabulary byte trie (:class:`~formcast.grammar.token_index.
  VocabTrie`) like :func:`~formcast.grammar.token_index.walk_trie`: one (trie node, state) pair
  per alive token *prefix*, and a subtree that stays on its state's uniform chain (a string's
  inside, a ``{0,63}`` counter, a run of bounded whitespace) is finished at once as a row range,
  every token in it "within". Splits inside such a subtree need not be recorded: a split only
  matters for tokens that do not stay within the lexeme (a within token is allowed anyway, and
  the lexer drops split records of within tokens).
- Record walks (a split group's suffixes, :meth:`DfaWalker.walk_records`) are vectorised over
  the records, one gather per byte, in the DFA's own ``(S, 256)`` table.
- *Follow filter*: a split at offset ``j`` matters only if byte ``j`` of the token can start a
  lexeme that may follow ``t`` in some sentence (the first bytes of the terminals in
  ``FOLLOW(t)``, and of the ignored terminals): otherwise the suffix dies on its first byte in
  every parse context. Such records are not produced, which keeps split groups small (inside a
  string every offset completes a ``{0,63}`` chunk, but only a ``"`` can follow it).

All walks are exact: they produce the same within tokens and the same split records as the
generic lexer walk, minus records whose suffix no parse context can read.
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.byte_dfa import ByteDFA
from formcast.grammar.cfg_first_follow import bit_set, first_follow
from formcast.grammar.cfg_grammar import PreparedGrammar
from formcast.grammar.token_index import TrieTokens, VocabTable

_NUM_SCALAR_RECORDS = 48  # record walks of at most this many records run in Python
_NUM_SCALAR_PAIRS = 16  # trie walks with at most this many prefixes left finish in Python
_MIN_TRIE_BYTES = 48  # states whose uniform step reads this many bytes walk the trie


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
    out = []
    for bits in follow_terminal_bits(grammar):
        row = np.zeros(257, dtype=bool)
        row[:256] = ignored
        if bits:
            packed = np.frombuffer(bits.to_bytes(num_bytes, "little"), dtype=np.uint8)
            is_follower = np.unpackbits(packed, bitorder="little")[:num_terminals].astype(bool)
            row[:256] |= starts_with[is_follower].any(axis=0)
        out.append(row)
    return out


class DfaWalker:
    """Walks of single-terminal parts over one vocabulary (see module docstring).

    Every walk returns ``(within, split_rows, split_steps)``: the tokens that stay inside the
    lexeme (table rows, or a ``(T,)`` bool mask over the rows from trie walks), and the records
    ``(row, offset)`` of the tokens that complete the terminal strictly inside their bytes at
    ``offset`` with a byte after it that a following lexeme may start with (records of within
    tokens may be included; the caller drops them).
    """

    def __init__(self, grammar: PreparedGrammar, table: VocabTable) -> None:
        self.table = table
        self.dfas = grammar.terminal_dfas
        self.follow = follow_first_bytes(grammar)
        self._full: dict[int, np.ndarray] = {}  # terminal -> (S, 256) int64 flat table
        self._chains: dict[int, TrieTokens] = {}
        self._class_walks: dict[tuple, tuple[np.ndarray, ...]] = {}
        self._all_rows = np.arange(len(table.token_ids), dtype=np.int64)
        self._lists: dict[int, list] = {}  # terminal -> per state: successors as a list

    def _flat(self, t: int) -> np.ndarray:
        found = self._full.get(t)
        if found is None:
            dfa = self.dfas[t]
            full = dfa.transitions[:, dfa.byte_to_class].astype(np.int64)  # (S, 256)
            found = self._full[t] = np.ascontiguousarray(full).reshape(-1)
        return found

    def first_bytes(self, t: int, state: int) -> np.ndarray:
        """``(256,)`` bool: the bytes state ``state`` of terminal ``t`` can read."""
        return self._flat(t)[state * 256 : state * 256 + 256] >= 0

    def vocabulary_walk(self, t: int, state: int) -> tuple[np.ndarray, ...]:
        """Every token from ``state`` of terminal ``t``: a walk of the vocabulary trie if the
        state's uniform step reads many bytes (a string's inside, where the trie settles whole
        subtrees), else one record walk per first-byte class (the bytes leading to the same
        state), memoised per (terminal, state reached, class): states that differ only on other
        bytes share them, and a terminal with only narrow states needs no chain tables."""
        flat = self._flat(t)
        row = flat[state * 256 : state * 256 + 256]
        if int((row >= 0).sum()) >= _MIN_TRIE_BYTES:  # (else its uniform step is narrow too)
            tokens = self._chains.get(t)
            if tokens is None:
                tokens = self._chains[t] = TrieTokens(self.dfas[t], self.table, max_height=None)
            if tokens.num_uniform[state] >= _MIN_TRIE_BYTES:
                return self._trie_walk(t, state, tokens)
        bounds = self.table.first_byte_bounds
        live = np.flatnonzero((row >= 0) & (np.diff(bounds) > 0))
        targets = row[live]
        parts = []
        for q in np.unique(targets).tolist():
            first = live[targets == q]
            key = (t, q, first.tobytes())
            found = self._class_walks.get(key)
            if found is None:
                only = np.zeros(256, dtype=bool)
                only[first] = True
                found = self.walk_records(t, state, self._all_rows, bounds, 0, only)
                self._class_walks[key] = found
            parts.append(found)
        if len(parts) == 1:
            return parts[0]
        empty = np.zeros(0, dtype=np.int64)
        return tuple(np.concatenate([p[k] for p in parts]) if parts else empty for k in range(3))

    def _trie_walk(self, t: int, state: int, tokens: TrieTokens) -> tuple[np.ndarray, ...]:
        """The walk of every token from ``state`` over the vocabulary trie."""
        trie = self.table.trie
        child_start, child_end = trie.child_start, trie.child_end
        has_token, below, height = trie.has_token, trie.bytes_below, trie.height
        covered, max_height = tokens.covered, tokens.max_height
        flat, width, node_class = tokens.flat, tokens.width, tokens.node_class
        is_accepting = self.dfas[t].is_accepting
        follow = self.follow[t]
        node_byte = trie.node_byte
        node = np.zeros(1, dtype=np.int64)
        cur = np.full(1, state, dtype=np.int64)
        depth = 0  # bytes read to reach `node`
        single_nodes: list[np.ndarray] = []
        range_nodes: list[np.ndarray] = []
        split_nodes: list[np.ndarray] = []
        split_depths: list[int] = []
        scalar: tuple[np.ndarray, ...] | None = None
        while len(node):
            if depth and len(node) <= _NUM_SCALAR_PAIRS:
                # a few prefixes left (long tokens, runs of one byte): read their subtrees'
                # tokens byte by byte from here (a split at `depth` is recorded there too)
                lo, hi = trie.row_lo[node], trie.row_hi[node]
                counts = hi - lo
                if int(counts.sum()) <= _NUM_SCALAR_RECORDS * 4:
                    offsets = np.cumsum(counts) - counts
                    rows = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(
                        lo - offsets, counts
                    )
                    positions = np.full(len(rows), depth, dtype=np.int64)
                    scalar = self._walk_scalar(t, rows, positions, np.repeat(cur, counts))
                    break
            lo = child_start[node]
            counts = child_end[node] - lo
            total = int(counts.sum())
            if not total:
                break
            offsets = np.cumsum(counts) - counts
            child = np.arange(total, dtype=np.int64) + np.repeat(lo - offsets, counts)
            parent_state = np.repeat(cur, counts)
            if depth:  # the terminal completes after `depth` bytes, the child's byte follows
                is_split = is_accepting[parent_state] & follow[node_byte[child]]
                if is_split.any():
                    split_nodes.append(child[is_split])
                    split_depths.append(depth)
            nxt = flat[parent_state * width + node_class[child]]
            alive = np.flatnonzero(nxt >= 0)
            node, cur = child[alive], nxt[alive]
            depth += 1
            node_height = height[node]
            is_short = (node_height > 0) & (node_height <= max_height)
            uncovered = below[node] & ~covered[np.minimum(node_height, max_height), cur]
            is_covered = (
                uncovered[:, 0] | uncovered[:, 1] | uncovered[:, 2] | uncovered[:, 3]
            ) == 0
            is_covered &= is_short
            if is_covered.any():
                range_nodes.append(node[is_covered])
                keep = ~is_covered
                node, cur = node[keep], cur[keep]
            is_token = has_token[node]
            if is_token.any():
                single_nodes.append(node[is_token])
        num_rows = len(self.table.token_ids)
        # within rows: ranges and the singles' rows, as one (T,) bool row mask
        if range_nodes:  # +1 at each range start, -1 at its end: cumsum > 0 inside a range
            ranges = np.concatenate(range_nodes)
            edges = np.bincount(trie.row_lo[ranges], minlength=num_rows + 1)
            edges -= np.bincount(trie.row_hi[ranges], minlength=num_rows + 1)
            is_within = np.cumsum(edges[:-1]) > 0
        else:
            is_within = np.zeros(num_rows, dtype=bool)
        if single_nodes:
            singles = np.concatenate(single_nodes)
            starts = trie.token_start
            per_node = starts[singles + 1] - starts[singles]
            first = np.repeat(starts[singles] - (np.cumsum(per_node) - per_node), per_node)
            is_within[trie.token_rows[np.arange(int(per_node.sum())) + first]] = True
        if scalar is not None:
            is_within[scalar[0]] = True
        empty = np.zeros(0, dtype=np.int64)
        late_rows, late_steps = (scalar[1], scalar[2]) if scalar is not None else (empty, empty)
        if not split_nodes:
            keep = ~is_within[late_rows]
            return is_within, late_rows[keep], late_steps[keep]
        nodes = np.concatenate(split_nodes)
        node_steps = np.repeat(split_depths, [len(n) for n in split_nodes])
        lo, hi = trie.row_lo[nodes], trie.row_hi[nodes]
        counts = hi - lo
        offsets = np.cumsum(counts) - counts
        rows = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - offsets, counts)
        steps = np.repeat(node_steps, counts)
        rows, steps = np.concatenate([rows, late_rows]), np.concatenate([steps, late_steps])
        keep = ~is_within[rows]
        return is_within, rows[keep], steps[keep]

    def walk_records(
        self,
        t: int,
        state: int,
        rows: np.ndarray,
        first_byte_bounds: np.ndarray,
        steps,
        only_bytes: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Read records ``(rows[k], steps[k])`` (sorted by first byte, ``first_byte_bounds``)
        from ``state`` of terminal ``t``; ``steps`` is an array or one int for all;
        ``only_bytes`` (``(256,)`` bool) keeps only records whose first byte it marks."""
        flat = self._flat(t)
        first_next = flat[state * 256 : state * 256 + 256]
        is_live = (first_next >= 0) & (np.diff(first_byte_bounds[:257]) > 0)
        if only_bytes is not None:
            is_live &= only_bytes
        first_bytes = np.flatnonzero(is_live)
        lo, hi = first_byte_bounds[first_bytes], first_byte_bounds[first_bytes + 1]
        counts = hi - lo
        total = int(counts.sum())
        empty = np.zeros(0, dtype=np.int64)
        if not total:
            return empty, empty, empty
        idx = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts - lo, counts)
        cur_rows = rows[idx].astype(np.int64)
        if isinstance(steps, np.ndarray):
            pos = steps[idx].astype(np.int64) + 1
        else:
            pos = np.full(total, steps + 1, dtype=np.int64)
        cur = np.repeat(first_next[first_bytes], counts)
        if total <= _NUM_SCALAR_RECORDS:
            return self._walk_scalar(t, cur_rows, pos, cur)
        is_accepting = self.dfas[t].is_accepting
        follow = self.follow[t]
        by_step = self.table.bytes_by_step  # (max_len, T) uint16, 256 past the end
        max_len, num_rows = by_step.shape
        flat_bytes = by_step.reshape(-1)
        within: list[np.ndarray] = []
        split_rows: list[np.ndarray] = []
        split_pos: list[np.ndarray] = []
        while len(cur_rows):
            byte = flat_bytes[np.minimum(pos, max_len - 1) * num_rows + cur_rows].astype(np.int64)
            byte[pos >= max_len] = 256
            is_end = byte == 256
            if is_end.any():
                within.append(cur_rows[is_end])
                go = ~is_end
                cur_rows, cur, byte, pos = cur_rows[go], cur[go], byte[go], pos[go]
            is_split = is_accepting[cur] & follow[byte]
            if is_split.any():
                split_rows.append(cur_rows[is_split])
                split_pos.append(pos[is_split])
            nxt = flat[cur * 256 + byte]
            alive = nxt >= 0
            cur_rows, cur, pos = cur_rows[alive], nxt[alive], pos[alive] + 1
        return (
            np.concatenate(within) if within else empty,
            np.concatenate(split_rows) if split_rows else empty,
            np.concatenate(split_pos) if split_pos else empty,
        )

    def _walk_scalar(self, t: int, rows, positions, states) -> tuple[np.ndarray, ...]:
        """:meth:`walk_records` for a few records (first byte read already), byte by byte."""
        table = self.table
        matrix, lengths = table.matrix, table.lengths
        is_accepting = self.dfas[t].is_accepting.tolist()
        follow = self.follow[t].tolist()
        lists = self._lists.get(t)
        if lists is None:
            lists = self._lists[t] = [None] * len(is_accepting)  # state -> its 256 successors
        flat = self._flat(t)
        within: list[int] = []
        split_rows: list[int] = []
        split_pos: list[int] = []
        for row, start, state in zip(
            rows.tolist(), positions.tolist(), states.tolist(), strict=True
        ):
            for k, byte in enumerate(matrix[row, start : lengths[row]].tobytes()):
                if is_accepting[state] and follow[byte]:
                    split_rows.append(row)
                    split_pos.append(start + k)
                successors = lists[state]
                if successors is None:
                    successors = lists[state] = flat[state * 256 : state * 256 + 256].tolist()
                state = successors[byte]
                if state < 0:
                    break
            else:
                within.append(row)
        return (
            np.asarray(within, dtype=np.int64),
            np.asarray(split_rows, dtype=np.int64),
            np.asarray(split_pos, dtype=np.int64),
        )
