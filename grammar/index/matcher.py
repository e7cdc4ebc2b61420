"""DfaMatcher: the per-sequence cursor over a CompiledGrammar (accept, mask, roll back, fork).

The state history is kept in full (one int per accepted token), so ``rollback`` can go back
any number of tokens. ``fill_bitmask`` copies the state's precomputed packed row into the
caller's bitmask: for a CPU int32 bitmask with contiguous rows that is one row memcpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from formcast.bitmask import bitmask_row, copy_packed_row, row_token_ids
from formcast.grammar.automata.byte_dfa import DEAD
from formcast.grammar.index.cursor_history import CursorHistory

if TYPE_CHECKING:
    from formcast.grammar.index.compiled_grammar import CompiledGrammar


class DfaMatcher(CursorHistory):
    """Cursor over a :class:`CompiledGrammar` for one sequence.

    A token is allowed iff some string of the grammar's language starts with the bytes
    accepted so far followed by the token's bytes; EOS ids are allowed exactly in accepting
    states; special and padding ids are never allowed.
    """

    __slots__ = ("_index",)

    def __init__(self, grammar: CompiledGrammar) -> None:
        super().__init__(grammar, grammar.start_state)
        self._index = grammar.index

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> int:
        """The current DFA state."""
        return self._history[-1]

    def is_accepting(self) -> bool:
        """True if the text so far is in the language (EOS would be allowed)."""
        return bool(self.grammar.dfa.is_accepting[self._history[-1]])

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or when the text is complete and nothing can follow."""
        if self._is_eos_accepted:
            return True
        state = self._history[-1]
        dfa = self.grammar.dfa
        return bool(dfa.is_accepting[state]) and not bool((dfa.transitions[state] >= 0).any())

    # -- advancing --------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; return False (and change nothing) if it is not allowed."""
        if self._is_eos_accepted:
            return False
        state = self._history[-1]
        if token_id in self._eos_ids:
            if not self.grammar.dfa.is_accepting[state]:
                return False
            self._history.append(state)
            self._is_eos_accepted = True
            return True
        if not 0 <= token_id < len(self._token_bytes):
            return False
        data = self._token_bytes[token_id]
        if not data:
            return False  # special or padding id
        nxt = self.grammar.dfa.walk(state, data)
        if nxt == DEAD:
            return False
        self._history.append(nxt)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. jump-forward text); counts as one step for rollback."""
        if self._is_eos_accepted:
            return False
        nxt = self.grammar.dfa.walk(self._history[-1], data)
        if nxt == DEAD:
            return False
        self._history.append(nxt)
        return True

    # -- queries ----------------------------------------------------------------------------

    def forced_bytes(self) -> bytes:
        """The longest byte string every valid continuation starts with ("" if none or done)."""
        if self._is_eos_accepted:
            return b""
        forced = self.grammar.forced_bytes_table()
        dfa = self.grammar.dfa
        state = self._history[-1]
        out = bytearray()
        while (byte := int(forced[state])) >= 0:
            out.append(byte)
            state = dfa.step(state, byte)
        return bytes(out)

    def packed_row(self) -> np.ndarray:
        """The current ``(ceil(V/32),)`` int32 mask row (read-only view; do not modify)."""
        if self._is_eos_accepted:
            return self.grammar.index.eos_row
        return self.grammar.index.row(self._history[-1])

    def allowed_token_ids(self) -> np.ndarray:
        """Ascending int64 ids of every allowed token (EOS included where accepting)."""
        return row_token_ids(self.packed_row(), self.grammar.vocab_size)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed-token mask into ``bitmask[row]`` (int32, ``(B, ceil(V/32))``).

        A CPU bitmask with contiguous rows is filled by one numpy row copy of the precomputed
        packed row (a memcpy); any other bitmask (CUDA, strided, wider than ``ceil(V/32)``,
        1-D) by a torch copy, zeroing columns beyond ``ceil(V/32)`` (ids past the vocabulary).

        Raises
        ------
        GrammarError
            If the bitmask has the wrong dtype, is too narrow, or ``row`` is out of range.
        """
        target = self._target_rows(bitmask, self._index.table.num_words)
        if target is not None and 0 <= row < target.shape[0]:
            if self._is_eos_accepted:
                target[row] = self._index.eos_row
            else:
                views = self._index.row_views  # None until a background fill has published
                state = self._history[-1]
                target[row] = views[state] if views is not None else self._index.row(state)
            return
        copy_packed_row(bitmask_row(bitmask, row), self.packed_row())

    def __repr__(self) -> str:
        return (
            f"DfaMatcher(state={self.state}, accepted={self.num_accepted}, "
            f"accepting={self.is_accepting()}, terminated={self.is_terminated()})"
        )
