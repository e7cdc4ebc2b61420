"""AnyValueMatcher: the per-sequence cursor over an AnyValueGrammar (frame stacks).

The cursor API of :class:`~formcast.grammar.index.matcher.DfaMatcher`. Its position is a set of frame
stacks (usually one; more only where the schema allows both a typed container and an
unconstrained value at the same place), kept per accepted step for ``rollback``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from formcast.bitmask import row_token_ids
from formcast.grammar.index.cursor_history import CursorHistory
from formcast.grammar.json_schema.any_value import frames
from formcast.grammar.json_schema.any_value.frames import TOKEN_NEVER

if TYPE_CHECKING:
    from formcast.grammar.json_schema.any_value.grammar import AnyValueGrammar

Configs = tuple[tuple[int, ...], ...]


class AnyValueMatcher(CursorHistory):
    """Cursor over an :class:`AnyValueGrammar` for one sequence.

    A token is allowed iff some valid output starts with the bytes accepted so far followed by
    the token's bytes; EOS ids are allowed exactly when the output is complete; special and
    padding ids never.
    """

    __slots__ = ("_kinds",)

    def __init__(self, grammar: AnyValueGrammar) -> None:
        super().__init__(grammar, grammar.start_configs)
        self._kinds = grammar.candidates.kinds

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> Configs:
        """The current frame stacks (global automaton states, bottom first)."""
        return self._history[-1]

    def _is_complete(self, stack: tuple[int, ...]) -> bool:
        grammar = self.grammar.schema_grammar
        return len(stack) == 1 and bool(grammar.dfa.is_accepting[stack[0]])

    def is_accepting(self) -> bool:
        """True if the text so far is a complete valid output (EOS would be allowed)."""
        return any(self._is_complete(s) for s in self._history[-1])

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or when the text is complete and nothing can follow."""
        if self._is_eos_accepted:
            return True
        dfa = self.grammar.schema_grammar.dfa
        return all(
            self._is_complete(s) and not bool((dfa.transitions[s[0]] >= 0).any())
            for s in self._history[-1]
        )

    # -- advancing --------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; return False (and change nothing) if it is not allowed."""
        if self._is_eos_accepted:
            return False
        configs = self._history[-1]
        if token_id in self._eos_ids:
            if not self.is_accepting():
                return False
            self._history.append(configs)
            self._is_eos_accepted = True
            return True
        if not 0 <= token_id < len(self._kinds):
            return False
        kind = int(self._kinds[token_id])
        if kind == TOKEN_NEVER:
            return False
        nxt = self.grammar.advance(configs, self._token_bytes[token_id], kind)
        if not nxt:
            return False
        self._history.append(nxt)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. jump-forward text); counts as one step for rollback."""
        if self._is_eos_accepted:
            return False
        data = bytes(data)
        nxt = self.grammar.advance(self._history[-1], data, self.grammar.byte_kind(data))
        if not nxt:
            return False
        self._history.append(nxt)
        return True

    # -- queries ----------------------------------------------------------------------------

    def forced_bytes(self) -> bytes:
        """Bytes every valid continuation starts with ("" if none or done).

        Stops before a point where a container could open an unconstrained value (a push),
        and when several readings of the output are alive (then it may be shorter than the
        longest common prefix, never wrong).
        """
        configs = self._history[-1]
        if self._is_eos_accepted or len(configs) != 1:
            return b""
        grammar = self.grammar
        tables = grammar.machine.tables
        stack = list(configs[0])
        out = bytearray()
        while True:
            g = stack[-1]
            if tables.opt_lo[g] < tables.opt_lo[g + 1]:
                break  # a marker is possible here: the next byte may open a frame
            automaton, local = grammar.locate(g)
            byte = int(automaton.forced_bytes_table()[local])
            if byte < 0 or byte in (frames.MARKER_BYTE, frames.DEPTH_BYTE):
                break
            out.append(byte)
            stack[-1] = g - local + automaton.dfa.step(local, byte)
            while len(stack) > 1 and tables.is_pop[stack[-1]]:
                stack.pop()
        return bytes(out)

    def packed_row(self) -> np.ndarray:
        """The current ``(ceil(V/32),)`` int32 mask row (read-only; do not modify)."""
        if self._is_eos_accepted:
            return self.grammar.schema_grammar.index.eos_row
        return self.grammar.mask(self._history[-1])

    def allowed_token_ids(self) -> np.ndarray:
        """Ascending int64 ids of every allowed token (EOS included where accepting)."""
        return row_token_ids(self.packed_row(), self.grammar.vocab_size)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed-token mask into ``bitmask[row]`` (int32, ``(B, ceil(V/32))``).

        A CPU bitmask with contiguous rows of exactly ``ceil(V/32)`` words is filled by one
        numpy row copy (its view is kept between calls); any other by a torch copy, zeroing
        columns beyond ``ceil(V/32)``.

        Raises
        ------
        GrammarError
            If the bitmask has the wrong dtype, is too narrow, or ``row`` is out of range.
        """
        configs = self._history[-1]
        stack = configs[0]
        if len(configs) == 1 and len(stack) == 1 and not self._is_eos_accepted:
            # the common case: one plain schema state (views None until the index is filled)
            views = self.grammar.schema_grammar.index.row_views
            if views is not None and self.grammar.is_plain_state[stack[0]]:
                self._write_row(bitmask, row, views[stack[0]])
                return
        self._write_row(bitmask, row, self.packed_row())

    def __repr__(self) -> str:
        return (
            f"AnyValueMatcher(readings={len(self._history[-1])}, accepted={self.num_accepted}, "
            f"accepting={self.is_accepting()}, terminated={self.is_terminated()})"
        )
