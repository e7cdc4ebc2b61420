"""Request: one prompt with its sampling parameters, its sequences and their detokenizers.

A request with a grammar spec still compiling holds its future in ``grammar_future``; its
sequence stays out of the scheduler until the grammar is ready.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.engine.outputs import CompletionOutput, RequestOutput
from formcast.engine.sequence import Sequence
from formcast.grammar import Matcher


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
    grammar_name: str | None = None  # what the request's grammar is, for messages
    grammar_future: Future | None = None  # set while the grammar compiles
    beam_group: Any = None  # a beam search request's BeamGroup (its seqs are the live beams)

    @property
    def is_finished(self) -> bool:
        """True when every sequence has finished."""
        return bool(self.seqs) and all(seq.is_finished for seq in self.seqs)

    def output(self) -> RequestOutput:
        """Snapshot of the request as a `RequestOutput`."""
        if self.beam_group is not None:
            return self.beam_group.output()
        completions = []
        want_logprobs = self.sampling_params.logprobs is not None
        for seq in sorted(self.seqs, key=lambda s: s.index):
            text = self.detokenizers[seq.seq_id].text
            stop_reason = self.stop_reasons.get(seq.seq_id)
            completions.append(
                CompletionOutput(
                    index=seq.index,
                    text=text,
                    token_ids=list(seq.output_token_ids),
                    finish_reason=seq.finish_reason,
                    logprobs=list(seq.logprobs) if want_logprobs else None,
                    stop_reason=stop_reason,
                    is_grammar_complete=is_grammar_complete(seq, text, stop_reason),
                    num_forced_tokens=seq.num_forced_tokens,
                    cumulative_logprob=None if seq.score is None else seq.score.cumulative_logprob,
                    stop_logprob=None if seq.score is None else seq.score.stop_logprob,
                )
            )
        metrics = {
            "arrival_time": self.arrival_time,
            # forward passes that computed a span of this request (prefill chunks included)
            "num_forward_passes": max(seq.num_steps for seq in self.seqs),
        }
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


def is_grammar_complete(seq: Sequence, text: str, stop_reason: str | int | None) -> bool | None:
    """True iff ``seq``'s output is a complete string of its grammar (None: no grammar).

    A stop string cuts the text short of what the matcher saw, so then the cut text itself
    is run through a fresh matcher.
    """
    if seq.finished_grammar_complete is not None:
        return seq.finished_grammar_complete
    matcher = seq.matcher
    if not isinstance(matcher, Matcher):  # no grammar, or a bare mask hook: nothing to say
        return None
    if isinstance(stop_reason, str) and seq.grammar is not None:
        fresh = seq.grammar.matcher()
        is_complete = bool(fresh.accept_bytes(text.encode("utf-8"))) and fresh.is_accepting()
    else:
        is_complete = bool(matcher.is_terminated() or matcher.is_accepting())
    if seq.is_finished:  # final: the last delta and the request output share one answer
        seq.finished_grammar_complete = is_complete
    return is_complete
