"""Postprocessor: the one place a token is committed to a sequence.

Plain decoding, jump-forward and speculative verification (chain and tree) all commit through
here, so they produce the same tokens, text, logprobs, finish reasons and counters:

- `Postprocessor.commit_token` appends one token: the sequence's tokens (and first-token
  time), the engine's counters, the logprob entry, the matcher advance, the stop check;
- `Postprocessor.jump_forward` commits the tokens the grammar forces (not sampled: they enter
  the KV cache with the next step's span, their logprob entries hold NaN);
- `Postprocessor.commit_sampled` is plain decoding's step end: one sampled token per
  sequence, jump-forward after it, retirement, one `StreamDelta` each;
- `Postprocessor.finish` retires a sequence, `Postprocessor.delta` hands out what a sequence
  has not streamed yet.

Stop rules (`check_stop`): a stop token id or EOS once ``min_tokens`` outputs exist, a stop
string (the detokenizer holds text back while one may be forming), a terminated matcher
(``"stop"`` even at ``max_tokens``), then ``max_tokens`` / ``max_model_len`` (``"length"``).
`stops_after` is the same decision without the detokenizer, for tokens a speculator proposes.
"""

from __future__ import annotations

import math
import time

import torch

from formcast.engine.config import EngineConfig
from formcast.engine.engine_stats import EngineStats
from formcast.engine.outputs import StreamDelta
from formcast.engine.request import Request, is_grammar_complete
from formcast.engine.scheduler import Scheduler
from formcast.engine.sequence import Sequence
from formcast.engine.structured import StructuredOutputManager
from formcast.errors import DeadEndError, EngineError
from formcast.samplers import SamplerOutput


def _drawable(entry: dict[int, float] | None, token_id: int) -> dict[int, float] | None:
    """``entry`` without the alternatives of log-probability ``-inf`` (never ``token_id``)."""
    if entry is None or all(value != -math.inf for value in entry.values()):
        return entry
    return {t: value for t, value in entry.items() if t == token_id or value != -math.inf}


class Postprocessor:
    """Commits tokens to the sequences of one engine (see module docstring).

    Parameters
    ----------
    config : EngineConfig
        The engine's settings (``max_model_len``).
    requests : dict[str, Request]
        The engine's live requests by id (shared, not copied): detokenizers, limits.
    scheduler : Scheduler
        Retires finished sequences (their blocks return to the pool).
    structured : StructuredOutputManager
        The engine's grammar side (jump-forward tokens).
    eos_token_ids : tuple[int, ...]
        The engine's EOS ids.
    stats : EngineStats
        The engine's counters, updated in place.
    """

    def __init__(
        self,
        config: EngineConfig,
        requests: dict[str, Request],
        scheduler: Scheduler,
        structured: StructuredOutputManager,
        eos_token_ids: tuple[int, ...],
        stats: EngineStats,
    ) -> None:
        self.config = config
        self.requests = requests
        self.scheduler = scheduler
        self.structured = structured
        self.eos_token_ids = eos_token_ids
        self.stats = stats

    # -- one token ---------------------------------------------------------------------------

    def commit_token(
        self,
        seq: Sequence,
        token_id: int,
        *,
        is_forced: bool = False,
        is_verified: bool = False,
        logprobs_entry: dict[int, float] | None = None,
        now: float | None = None,
    ) -> str | None:
        """Append ``token_id`` to ``seq``; return its finish reason (None: keep going).

        Parameters
        ----------
        is_forced : bool
            A jump-forward token: counted as forced, its logprob entry is NaN.
        is_verified : bool
            Emitted by speculative verification (names the token so in a matcher error).
        logprobs_entry : dict[int, float], optional
            ``{token: logprob, ...}`` of a sampled token, kept when the request asks for
            logprobs; alternatives at ``-inf`` (tokens that could not be drawn, e.g. masked
            by the grammar in ``"processed"`` mode) are left out.
        now : float, optional
            The step's time: the sequence's first-token time if it has none yet (None for
            jump-forward tokens committed outside sampling).

        Raises
        ------
        EngineError
            The matcher rejected the token (its own mask or jump-forward allowed it).
        """
        seq.append_token(token_id)
        if now is not None and seq.first_token_time is None:
            seq.first_token_time = now
        if is_forced:
            seq.num_forced_tokens += 1
            self.stats.num_forced_tokens += 1
            logprobs_entry = {token_id: math.nan}
        else:
            self.stats.num_sampled_tokens += 1
            self.stats.num_constrained_rows += seq.matcher is not None
        if seq.sampling_params.logprobs is not None:
            seq.logprobs.append(_drawable(logprobs_entry, token_id))
        if seq.matcher is not None and not seq.matcher.accept_token(token_id):
            raise self._rejected(seq, token_id, is_forced, is_verified)
        return self.check_stop(seq, token_id)

    def _rejected(
        self, seq: Sequence, token_id: int, is_forced: bool, is_verified: bool
    ) -> EngineError:
        where = f"request {seq.request_id!r}"
        if is_verified:
            return EngineError(f"{where}: the matcher rejected verified token {token_id}")
        if is_forced:
            grammar = self.requests[seq.request_id].grammar_name
            return EngineError(
                f"{where}: grammar {grammar} rejected its own jump-forward token {token_id} at "
                f"output position {seq.num_output_tokens - 1}"
            )
        return EngineError(
            f"{where}: the matcher rejected token {token_id} that its own bitmask allowed"
        )

    def check_stop(self, seq: Sequence, token_id: int) -> str | None:
        """Finish reason after ``token_id`` was appended (None: keep going)."""
        p = seq.sampling_params
        request = self.requests[seq.request_id]
        detokenizer = request.detokenizers[seq.seq_id]
        # the sampler masks EOS and stop ids while fewer than min_tokens outputs existed
        may_stop = seq.num_output_tokens > p.min_tokens
        if token_id in p.stop_token_ids and may_stop:
            request.stop_reasons[seq.seq_id] = token_id
            detokenizer.flush()
            return "stop"
        if token_id in self.eos_token_ids and not p.ignore_eos and may_stop:
            detokenizer.flush()
            return "stop"
        stop_string = detokenizer.append(token_id, may_stop)
        if stop_string is not None:
            request.stop_reasons[seq.seq_id] = stop_string
            return "stop"
        if seq.matcher is not None and seq.matcher.is_terminated():
            detokenizer.flush()
            return "stop"  # complete even if it also reached max_tokens
        if (
            seq.num_output_tokens >= request.max_tokens
            or seq.num_tokens >= self.config.max_model_len
        ):
            detokenizer.flush()
            return "length"
        return None

    def stops_after(self, seq: Sequence, token_id: int) -> bool:
        """Would `check_stop` finish ``seq`` after ``token_id`` (stop strings aside)?

        For proposed tokens: ``token_id`` is already in ``seq.token_ids``, the detokenizer
        is left alone.
        """
        p = seq.sampling_params
        may_stop = seq.num_output_tokens > p.min_tokens
        if may_stop and (
            token_id in p.stop_token_ids or (token_id in self.eos_token_ids and not p.ignore_eos)
        ):
            return True
        if seq.matcher is not None and seq.matcher.is_terminated():
            return True
        request = self.requests[seq.request_id]
        return (
            seq.num_output_tokens >= request.max_tokens
            or seq.num_tokens >= self.config.max_model_len
        )

    # -- jump-forward ------------------------------------------------------------------------

    def forced_token_ids(self, seq: Sequence) -> list[int]:
        """The tokens ``seq``'s grammar forces now, within its ``max_tokens`` (empty: sample)."""
        room = self.requests[seq.request_id].max_tokens - seq.num_output_tokens
        return self.structured.forced_token_ids(seq, room)

    def jump_forward(self, seq: Sequence) -> str | None:
        """Commit the tokens ``seq``'s grammar forces (repeatedly); return a finish reason.

        Forced tokens are not sampled: they enter the KV cache with the next step's span.
        Their logprob entries (when asked) hold NaN, as no distribution was computed for them.
        """
        while True:
            forced_ids = self.forced_token_ids(seq)
            if not forced_ids:
                return None
            for token_id in forced_ids:
                reason = self.commit_token(seq, token_id, is_forced=True)
                if reason is not None:
                    return reason

    # -- plain decoding's step end -----------------------------------------------------------

    def commit_sampled(self, seqs: list[Sequence], sampled: SamplerOutput) -> list[StreamDelta]:
        """Commit the sampler's token of each sequence (row ``i`` is ``seqs[i]``), then its
        jump-forward text; retire finished sequences; one `StreamDelta` per sequence.

        Reads only the host copy the sampler made (`SamplerOutput.host`, the step's one
        device-to-host copy): committing never waits for the device again."""
        host = sampled.on_host()
        token_ids = host.token_ids.tolist()
        want_logprobs = any(seq.sampling_params.logprobs is not None for seq in seqs)
        chosen_logprobs = host.logprobs.tolist() if want_logprobs else None
        top_ids = top_lps = None
        if want_logprobs and host.top_logprob_ids is not None:
            top_ids = host.top_logprob_ids.tolist()
            top_lps = host.top_logprobs.tolist()
        now = time.monotonic()
        deltas = []
        for i, seq in enumerate(seqs):
            token_id = token_ids[i]
            num_top = seq.sampling_params.logprobs
            entry = None
            if num_top is not None:
                entry = {token_id: chosen_logprobs[i]}
                if top_ids is not None:
                    for k in range(min(num_top, len(top_ids[i]))):
                        entry.setdefault(top_ids[i][k], top_lps[i][k])
            reason = self.commit_token(seq, token_id, logprobs_entry=entry, now=now)
            if reason is None and seq.jump_forward:
                reason = self.jump_forward(seq)
            if reason is not None:
                self.finish(seq, reason, now)
            deltas.append(self.delta(seq))
        return deltas

    def finish(self, seq: Sequence, reason: str, now: float) -> None:
        """Retire a scheduled ``seq`` with ``reason``; stamp its request once all are done."""
        self.scheduler.finish(seq, reason)
        request = self.requests[seq.request_id]
        if request.is_finished:
            request.finish_time = now

    def delta(self, seq: Sequence) -> StreamDelta:
        """The output of ``seq`` not yet handed out (tokens, text, logprobs; on the last
        delta, whether the output is a complete sentence of its grammar)."""
        detokenizer = self.requests[seq.request_id].detokenizers[seq.seq_id]
        start = seq.num_streamed_tokens
        seq.num_streamed_tokens = seq.num_output_tokens
        want_logprobs = seq.sampling_params.logprobs is not None
        text = detokenizer.take_delta(seq.is_finished)
        is_complete = None
        if seq.is_finished:  # the last delta says whether the whole output is a sentence
            request = self.requests[seq.request_id]
            stop_reason = request.stop_reasons.get(seq.seq_id)
            is_complete = is_grammar_complete(seq, detokenizer.text, stop_reason)
        return StreamDelta(
            seq.request_id,
            seq.index,
            seq.token_ids[seq.num_prompt_tokens + start :],  # no copy of the whole output
            text,
            seq.finish_reason,
            seq.logprobs[start:] if want_logprobs else None,
            is_complete,
        )

    def dead_end(
        self, seqs: list[Sequence], bitmask: torch.Tensor | None, error: DeadEndError
    ) -> DeadEndError:
        """A `DeadEndError` naming each constrained request's grammar and output position."""
        empty_rows = set()
        if bitmask is not None:
            empty_rows = set((bitmask == 0).all(dim=1).nonzero().flatten().tolist())
        parts = []
        for row, seq in enumerate(seqs):
            if seq.matcher is None or (empty_rows and row not in empty_rows):
                continue
            request = self.requests[seq.request_id]
            tail = request.detokenizers[seq.seq_id].text[-40:]
            grammar = request.grammar_name or repr(seq.matcher)
            what = "allows no token" if empty_rows else "has no allowed token left"
            parts.append(
                f"request {seq.request_id!r} (completion {seq.index}): grammar {grammar} "
                f"{what} at output position {seq.num_output_tokens} "
                f"(text so far ends with {tail!r})"
            )
        cause = "" if empty_rows else f" after logit_bias masking ({error})"
        return DeadEndError("dead end" + cause + ": " + "; ".join(parts or [str(error)]))
