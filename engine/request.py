"""Request: one prompt with its sampling parameters, its sequences and their detokenizers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.engine.outputs import CompletionOutput, RequestOutput
from formcast.engine.sequence import Sequence


@dataclass(eq=False)
class Request:
    """Engine-side state of a request: ``n`` sequences (forked after the prompt is prefilled)."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    sampling_params: Any
    max_tokens: int  # resolved: never past max_model_len
    seqs: list[Sequence] = field(default_factory=list)
    detokenizers: dict[int, IncrementalDetokenizer] = field(default_factory=dict)
    stop_reasons: dict[int, str | int] = field(default_factory=dict)
    arrival_time: float = field(default_factory=time.monotonic)
    finish_time: float | None = None

    @property
    def is_finished(self) -> bool:
        """True when every sequence has finished."""
        return bool(self.seqs) and all(seq.is_finished for seq in self.seqs)

    def output(self) -> RequestOutput:
        """Snapshot of the request as a `RequestOutput`."""
        completions = []
        want_logprobs = self.sampling_params.logprobs is not None
        for seq in sorted(self.seqs, key=lambda s: s.index):
            completions.append(
                CompletionOutput(
                    index=seq.index,
                    text=self.detokenizers[seq.seq_id].text,
                    token_ids=list(seq.output_token_ids),
                    finish_reason=seq.finish_reason,
                    logprobs=list(seq.logprobs) if want_logprobs else None,
                    stop_reason=self.stop_reasons.get(seq.seq_id),
                )
            )
        metrics = {"arrival_time": self.arrival_time}
        first = [s.first_token_time for s in self.seqs if s.first_token_time is not None]
        if first:
            metrics["first_token_time"] = min(first)
        if self.finish_time is not None:
            metrics["finish_time"] = self.finish_time
        return RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            prompt_token_ids=list(self.prompt_token_ids),
            outputs=completions,
            finished=self.is_finished,
            num_cached_prompt_tokens=self.seqs[0].num_prompt_hit_tokens,
            metrics=metrics,
        )
