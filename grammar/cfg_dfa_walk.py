"""Vocabulary walks of single-terminal lexer parts, read off the terminal's own byte DFA.

Most lexer parts (:meth:`formcast.grammar.cfg_lexer.CfgLexer.parts`) are one live pair
``(terminal t, DFA state q)``: reading bytes from it is reading ``t``'s DFA from ``q``, and a
*split* (``t`` completes strictly inside a token) happens where that DFA accepts. So such a
part's walk needs neither interned lexer states nor their 256-entry rows: this module walks the
terminal DFA directly.

- Whole-vocabulary walks use the vocabulary byte trie (:func:`~formcast.grammar.
  cfg_walk_kernels.walk_trie`): one step per alive token *prefix*, and a subtree that stays on
  its state's uniform chain (a string's inside, a ``{0,63}`` counter, a run of bounded
  whitespace) is finished at once as a row range, every token in it "within". Splits inside
  such a subtree need not be recorded: a split only matters for tokens that do not stay within
  the lexeme (a within token is allowed anyway, and split records of within tokens are
  dropped).
- Record walks (a split group's suffixes, :meth:`DfaWalker.walk_records`) read each record
  byte by byte in the DFA's own ``(S, 256)`` table (:func:`~formcast.grammar.
  cfg_walk_kernels.walk_suffixes`).
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
from formcast.grammar.cfg_walk_kernels import chain_coverage, walk_suffixes, walk_trie
from formcast.grammar.token_index import VocabTable


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

    Every walk returns ``(within_row, split_rows, split_steps)``: the packed mask of the tokens
    that stay inside the lexeme, and the records ``(row, offset)`` of the other tokens that
    complete the terminal strictly inside their bytes at ``offset`` with a byte after it that
    a following lexeme may start with.
    """

    def __init__(self, grammar: PreparedGrammar, table: VocabTable) -> None:
        self.table = table
        self.dfas = grammar.terminal_dfas
        self.follow = follow_first_bytes(grammar)
        self._full: dict[int, np.ndarray] = {}  # terminal -> (S, 256) int32 successors
        self._coverage: dict[int, tuple] = {}  # terminal -> its chain coverage

    def _table(self, t: int) -> np.ndarray:
        found = self._full.get(t)
        if found is None:
            dfa = self.dfas[t]
            full = dfa.transitions[:, dfa.byte_to_class].astype(np.int32, copy=False)
            found = self._full[t] = np.ascontiguousarray(full)
        return found

    def first_bytes(self, t: int, state: int) -> np.ndarray:
        """``(256,)`` bool: the bytes state ``state`` of terminal ``t`` can read."""
        return self._table(t)[state] >= 0

    def vocabulary_walk(self, t: int, state: int) -> tuple[np.ndarray, ...]:
        """Every token from ``state`` of terminal ``t``: one walk of the vocabulary trie."""
        coverage = self._coverage.get(t)
        if coverage is None:
            coverage = self._coverage[t] = chain_coverage(self.dfas[t], self.table)
        within_row, rows, steps, _ = walk_trie(
            self._table(t), state, self.dfas[t].is_accepting, self.follow[t], coverage, self.table
        )
        return within_row, rows, steps

    def walk_records(
        self, t: int, state: int, rows: np.ndarray, first_byte_bounds: np.ndarray, steps
    ) -> tuple[np.ndarray, ...]:
        """Read records ``(rows[k], steps[k])`` (sorted by first byte, ``first_byte_bounds``)
        from ``state`` of terminal ``t``."""
        within_row, rows, steps, _ = walk_suffixes(
            self._table(t), state, rows, steps, first_byte_bounds,
            self.dfas[t].is_accepting, self.follow[t], self.table,
        )  # fmt: skip
        return within_row, rows, steps
