"""CursorHistory: what every matcher keeps (regex, unbounded-value frames, CFG): the step
history and the bitmask it fills.

The history holds one state per accepted step (a token, a byte string, or EOS) after the start
state, so ``num_accepted = len(history) - 1``, ``rollback(n)`` drops the last ``n`` entries,
``reset`` keeps the first and ``fork`` copies the list. A matcher with more per-step lists
(e.g. output offsets) lists them in :meth:`CursorHistory._step_lists`, and they are cut and
copied alongside. ``_write_row`` fills one bitmask row from packed words (a numpy row copy
into a prepared CPU bitmask, else a torch copy).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Self

import numpy as np
import torch

from formcast.bitmask import bitmask_row, copy_packed_row, prepared_rows
from formcast.errors import GrammarError


class CursorHistory(ABC):
    """Base of the per-sequence matchers: history, EOS flag, rollback/reset/fork/accept_tokens,
    the vocabulary's EOS ids and token bytes (``_eos_ids``, ``_token_bytes``).

    Subclasses implement ``accept_token`` (appending to ``_history``) and take their compiled
    grammar as the only constructor argument (``fork`` relies on it).
    """

    __slots__ = (
        "grammar", "_history", "_is_eos_accepted", "_bitmask", "_bitmask_ptr", "_rows",
        "_eos_ids", "_token_bytes",
    )  # fmt: skip

    def __init__(self, grammar: Any, start: Any) -> None:
        self.grammar = grammar
        self._eos_ids = grammar.vocab.eos_token_ids
        self._token_bytes = grammar.vocab.token_bytes
        self._history: list[Any] = [start]
        self._is_eos_accepted = False
        self._bitmask: torch.Tensor | None = None  # keeps ``_rows``' memory alive
        self._bitmask_ptr = 0
        self._rows: np.ndarray | None = None

    def _target_rows(self, bitmask: torch.Tensor, num_words: int) -> np.ndarray | None:
        """``bitmask``'s ``(B, W)`` numpy rows if a row copy can fill it, else None (checked)."""
        if bitmask is not self._bitmask or bitmask.data_ptr() != self._bitmask_ptr:
            self._rows = prepared_rows(bitmask, num_words, self.grammar.vocab_size)
            self._bitmask = bitmask
            self._bitmask_ptr = bitmask.data_ptr()
        return self._rows

    def _write_row(self, bitmask: torch.Tensor, row: int, words: np.ndarray) -> None:
        rows = self._target_rows(bitmask, len(words))
        if rows is not None and 0 <= row < rows.shape[0]:
            rows[row] = words
        else:
            copy_packed_row(bitmask_row(bitmask, row), words)

    def _step_lists(self) -> tuple[list, ...]:
        """Every list with one entry per step (the history first)."""
        return (self._history,)

    @property
    def num_accepted(self) -> int:
        """Tokens (and byte strings) accepted so far, EOS included."""
        return len(self._history) - 1

    @abstractmethod
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if it is not allowed."""

    def accept_tokens(self, token_ids: list[int] | np.ndarray) -> int:
        """Accept tokens in order until one is rejected; return how many were accepted."""
        count = 0
        for token_id in token_ids:
            if not self.accept_token(int(token_id)):
                break
            count += 1
        return count

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted steps (EOS included).

        Raises
        ------
        GrammarError
            If ``num_tokens`` is negative or more than were accepted.
        """
        if not 0 <= num_tokens <= len(self._history) - 1:
            raise GrammarError(
                f"cannot roll back {num_tokens} tokens: {len(self._history) - 1} were accepted"
            )
        if num_tokens == 0:
            return
        self._is_eos_accepted = False
        for steps in self._step_lists():
            del steps[-num_tokens:]

    def reset(self) -> None:
        """Back to the start."""
        for steps in self._step_lists():
            del steps[1:]
        self._is_eos_accepted = False

    def fork(self) -> Self:
        """An independent copy at the same position (and with the same history)."""
        other = type(self)(self.grammar)
        for source, target in zip(self._step_lists(), other._step_lists(), strict=True):
            target[:] = source
        other._is_eos_accepted = self._is_eos_accepted
        return other
