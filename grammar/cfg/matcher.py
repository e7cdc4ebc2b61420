"""CfgMatcher: the per-sequence cursor over a CompiledCFG, with the regex Matcher's interface.

The state is the head set of :mod:`formcast.grammar.cfg.runtime`; the full history of head
sets is kept (one entry per accepted token or byte string), so ``rollback`` can go back any
number of steps and ``fork`` is a list copy. Masks come from the runtime's memo tables.
A matcher belongs to one sequence (one thread at a time); matchers of the same compiled
grammar may run on different threads concurrently (the shared runtime is locked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from formcast.grammar.index.cursor_history import CursorHistory

if TYPE_CHECKING:
    from formcast.grammar.cfg.compiled import CompiledCFG

_MAX_FORCED_BYTES = 4096


class CfgMatcher(CursorHistory):
    """Cursor over a :class:`~formcast.grammar.cfg.compiled.CompiledCFG` for one sequence.

    A token is allowed iff the bytes accepted so far followed by the token's bytes are a
    prefix of some sentence of the grammar; EOS ids are allowed exactly when the text so far
    is a sentence; special and padding ids are never allowed.
    """

    __slots__ = (
        "_runtime",
        "_offsets",
    )

    def __init__(self, grammar: CompiledCFG) -> None:
        super().__init__(grammar, grammar.initial_heads)
        self._runtime = grammar.runtime
        self._offsets = [0]  # output length in bytes after each history entry

    def is_accepting(self) -> bool:
        """True if the text so far is a sentence of the grammar (EOS would be allowed)."""
        return self._runtime.is_accepting(self._history[-1])

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or when the text is complete and nothing can follow."""
        if self._is_eos_accepted:
            return True
        heads = self._history[-1]
        return self._runtime.is_accepting(heads) and not self._runtime.next_bytes(heads)

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; return False (and change nothing) if it is not allowed.

        Raises
        ------
        GrammarError
            If the grammar was compiled with ``max_depth`` and the token nests deeper (the
            message names the depth and the output byte offset; the matcher is unchanged).
        """
        if self._is_eos_accepted:
            return False
        heads = self._history[-1]
        if token_id in self._eos_ids:
            if not self._runtime.is_accepting(heads):
                return False
            self._history.append(heads)
            self._offsets.append(self._offsets[-1])
            self._is_eos_accepted = True
            return True
        if not 0 <= token_id < len(self._token_bytes):
            return False
        data = self._token_bytes[token_id]
        if not data:
            return False  # special or padding id
        return self._push(self._runtime.advance(heads, data, self._offsets[-1]), len(data))

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. jump-forward text); counts as one step for rollback.

        Raises
        ------
        GrammarError
            As :meth:`accept_token`.
        """
        if self._is_eos_accepted:
            return False
        heads = self._runtime.advance(self._history[-1], data, self._offsets[-1])
        return self._push(heads, len(data))

    def _step_lists(self) -> tuple[list, ...]:
        return (self._history, self._offsets)

    def _push(self, heads: frozenset, num_bytes: int) -> bool:
        if not heads:
            return False
        self._history.append(heads)
        self._offsets.append(self._offsets[-1] + num_bytes)
        return True

    def forced_bytes(self) -> bytes:
        """The longest byte string every valid continuation starts with ("" if none or done)."""
        if self._is_eos_accepted:
            return b""
        runtime = self._runtime
        heads = self._history[-1]
        out = bytearray()
        while len(out) < _MAX_FORCED_BYTES and not runtime.is_accepting(heads):
            allowed = runtime.next_bytes(heads)
            if len(allowed) != 1:
                break
            out.append(allowed[0])
            heads = runtime.step(heads, allowed[0])
        return bytes(out)

    def packed_row(self) -> np.ndarray:
        """The current ``(ceil(V/32),)`` int32 mask row (read-only)."""
        if self._is_eos_accepted:
            return self._runtime.eos_row
        return self._runtime.mask(self._history[-1])

    def allowed_token_ids(self) -> np.ndarray:
        """Ascending int64 ids of every allowed token (EOS included where accepting)."""
        bits = np.unpackbits(self.packed_row().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.grammar.vocab_size])

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed-token mask into ``bitmask[row]`` (int32, ``(B, ceil(V/32))``).

        Raises
        ------
        GrammarError
            If the bitmask has the wrong dtype, is too narrow, or ``row`` is out of range.
        """
        self._write_row(bitmask, row, self.packed_row())

    def __repr__(self) -> str:
        return (
            f"CfgMatcher(accepted={self.num_accepted}, heads={len(self._history[-1])}, "
            f"accepting={self.is_accepting()}, terminated={self.is_terminated()})"
        )
