"""MaskFiller: fills a step's grammar bitmask in a worker thread while the forward pass runs.

The mask row of a sequence at step ``t`` depends only on the tokens it had before step ``t``
(sampled at ``t - 1``, plus jump-forward tokens), which are known once the step is scheduled.
So the engine calls ``start(matchers)`` right after scheduling, runs the model (torch releases
the GIL inside its kernels), and calls ``result()`` before sampling. Only the time ``result``
waits is on the critical path; ``fill_seconds`` is the total work, ``wait_seconds`` the part
not hidden behind the forward pass.

The bitmask is one reused pinned/CPU int32 buffer ``(rows, ceil(V/32))``; matchers get the whole
buffer (so their fast row-copy path keeps its cached view) and the step uses its first ``B``
rows. Rows of unconstrained sequences are all ones.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from formcast.grammar import allocate_token_bitmask


class MaskFiller:
    """Per-step bitmask construction, overlapped with the model forward.

    Parameters
    ----------
    vocab_size : int
        Logits width (the bitmask has ``ceil(vocab_size / 32)`` words per row).
    is_async : bool
        Fill in a worker thread (True) or inline in ``result`` (False, for measurements).
    """

    def __init__(self, vocab_size: int, is_async: bool = True) -> None:
        self.vocab_size = vocab_size
        self.is_async = is_async
        self._buffer = allocate_token_bitmask(1, vocab_size)  # (rows, W), grown on demand
        self._executor = (
            ThreadPoolExecutor(1, thread_name_prefix="formcast-mask") if is_async else None
        )
        self._future: Future[None] | None = None
        self._matchers: list[Any] = []
        self.fill_seconds = 0.0
        self.wait_seconds = 0.0
        self.last_fill_seconds = 0.0  # the latest step's fill / wait (for per-step statistics)
        self.last_wait_seconds = 0.0
        self.num_rows_filled = 0
        self.num_fills = 0

    def start(self, matchers: Sequence[Any]) -> None:
        """Begin filling row ``i`` from ``matchers[i]`` (None: every token allowed).

        Nothing is done when no row is constrained; ``result`` then returns None.
        """
        if self._future is not None:
            self._future.result()  # a previous step's fill was never collected
            self._future = None
        self._matchers = list(matchers)
        if all(m is None for m in self._matchers):
            return
        if self._buffer.shape[0] < len(self._matchers):
            self._buffer = allocate_token_bitmask(len(self._matchers), self.vocab_size)
        if self._executor is not None:
            self._future = self._executor.submit(self._fill, self._matchers)

    def result(self) -> torch.Tensor | None:
        """The filled ``(B, ceil(V/32))`` bitmask of the rows given to ``start`` (or None).

        The tensor is a view of a reused buffer: valid until the next ``start``.
        """
        matchers = self._matchers
        if all(m is None for m in matchers):
            return None
        begin = time.perf_counter()
        if self._future is not None:
            future, self._future = self._future, None
            future.result()
        else:
            self._fill(matchers)
        self.last_wait_seconds = time.perf_counter() - begin
        self.wait_seconds += self.last_wait_seconds
        return self._buffer[: len(matchers)]

    def _fill(self, matchers: list[Any]) -> None:
        begin = time.perf_counter()
        buffer = self._buffer
        rows = buffer.numpy()  # shares memory with the tensor
        for row, matcher in enumerate(matchers):
            if matcher is None:
                rows[row] = -1
            else:
                matcher.fill_bitmask(buffer, row)
        self.last_fill_seconds = time.perf_counter() - begin
        self.fill_seconds += self.last_fill_seconds
        self.num_rows_filled += len(matchers)
        self.num_fills += 1

    def shutdown(self) -> None:
        """Stop the worker thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
