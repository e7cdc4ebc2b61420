"""Prompt lookup (n-gram) proposer: copy what followed the last n tokens earlier in the text.

For ``n = max_ngram .. min_ngram`` (longest first): find the most recent earlier start ``s``
with ``tokens[s : s + n] == tokens[-n:]`` and ``s + n < len(tokens)``; the drafts are
``tokens[s + n : s + n + k]``. No model runs, so the drafts are point masses (``q = onehot``).
Extraction and structured output copy spans from the prompt, where this is nearly free
speculation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from formcast.errors import EngineConfigError


class NgramProposer:
    """Draft tokens by matching the last n tokens against the whole context.

    Parameters
    ----------
    min_ngram, max_ngram : int
        Match lengths tried, longest first (``1 <= min_ngram <= max_ngram``).
    """

    def __init__(self, min_ngram: int = 1, max_ngram: int = 4) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise EngineConfigError(
                f"NgramProposer: need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}"
            )
        self.min_ngram = min_ngram
        self.max_ngram = max_ngram

    def propose(self, token_ids: Sequence[int], num_tokens: int) -> list[int]:
        """Up to ``num_tokens`` drafts continuing ``token_ids`` (empty: no match).

        Parameters
        ----------
        token_ids : Sequence[int]
            Prompt and output so far, oldest first.
        num_tokens : int
            Most drafts wanted.
        """
        length = len(token_ids)
        if num_tokens <= 0 or length < self.min_ngram + 1:
            return []
        tokens = np.asarray(token_ids, dtype=np.int64)
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            # is_match[s]: tokens[s : s + n] == tokens[-n:], for starts s = 0 .. length - n - 1
            # (each start has a token after its window)
            num_starts = length - n
            is_match = tokens[n - 1 : n - 1 + num_starts] == tokens[length - 1]
            for i in range(n - 1):
                if not is_match.any():
                    break
                is_match &= tokens[i : i + num_starts] == tokens[length - n + i]
            starts = np.flatnonzero(is_match)
            if starts.size == 0:
                continue
            begin = int(starts[-1]) + n  # the most recent occurrence
            return tokens[begin : begin + num_tokens].tolist()
        return []
