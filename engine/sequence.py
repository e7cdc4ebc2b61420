"""Sequence: one stream of tokens being generated, with its place in the paged KV cache.

Invariants: ``num_cached_tokens <= len(token_ids)``; the KV of ``token_ids[:num_cached_tokens]``
is in the blocks ``block_table[: ceil(num_cached_tokens / block_size)]``; the first
``len(block_hashes)`` blocks are full and registered in the prefix cache under those hashes.
"""

from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from formcast.grammar import Grammar, MaskHook

if TYPE_CHECKING:
    from formcast.engine.scoring import ScoreState


class SequenceStatus(enum.Enum):
    """Where a sequence is in its life."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


_seq_counter = itertools.count()


@dataclass(eq=False)
class Sequence:
    """A prompt plus the tokens generated so far, and its KV cache bookkeeping.

    Parameters
    ----------
    request_id : str
        The request this sequence belongs to (``n > 1`` requests own several sequences).
    prompt_token_ids : list[int]
        The prompt.
    sampling_params : Any
        A ``formcast.samplers.SamplingParams``.
    """

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: Any
    arrival_time: float = field(default_factory=time.monotonic)
    seq_id: int = field(default_factory=lambda: next(_seq_counter))
    index: int = 0  # position among the request's n sequences
    status: SequenceStatus = SequenceStatus.WAITING
    token_ids: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    generator: torch.Generator | None = None
    matcher: MaskHook | None = None  # a grammar's Matcher, or a bare low-level mask hook
    grammar: Grammar | None = None  # the grammar behind `matcher` (None for a bare hook)
    jump_forward: bool = False  # append grammar-forced tokens without sampling
    num_forced_tokens: int = 0  # output tokens appended by jump-forward
    num_streamed_tokens: int = 0  # output tokens already handed out in StreamDeltas
    num_steps: int = 0  # forward passes that computed a span of this sequence
    finish_reason: str | None = None
    logprobs: list[dict[int, float]] = field(default_factory=list)
    num_pending_forks: int = 0  # n - 1 siblings to fork once the prompt is prefilled
    num_reserved_seqs: int = 0  # num_beams - 1 beams a beam search will fork (admission counts)
    num_preemptions: int = 0
    num_prompt_hit_tokens: int = 0  # prompt tokens served by the prefix cache on admission
    score: ScoreState | None = None  # a score request's sequence: rows read, never sampled
    first_token_time: float | None = None
    # once finished: whether the output is a complete sentence of its grammar (computed once,
    # by request.is_grammar_complete, for the last stream delta and the request output alike)
    finished_grammar_complete: bool | None = None

    def __post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.prompt_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        """Length of the prompt."""
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        """Generated tokens."""
        return len(self.token_ids) - len(self.prompt_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        """The generated tokens."""
        return self.token_ids[len(self.prompt_token_ids) :]

    @property
    def num_uncached_tokens(self) -> int:
        """Tokens whose KV is not yet in the cache (the next step's span, at most)."""
        return len(self.token_ids) - self.num_cached_tokens

    @property
    def is_finished(self) -> bool:
        """True once a stop condition was met or the request was aborted."""
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        """Append a generated token (its KV is computed by the next step)."""
        self.token_ids.append(token_id)

    def block_token_ids(self, block_index: int, block_size: int) -> tuple[int, ...]:
        """Token ids held by block ``block_index`` of this sequence."""
        return tuple(self.token_ids[block_index * block_size : (block_index + 1) * block_size])
