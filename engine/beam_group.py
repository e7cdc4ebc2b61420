"""Beam search in the paged engine: each request's beams are Sequences sharing KV blocks.

A beam request starts as one sequence (the prompt). Whenever every live beam of a request
has its next-token logits, `BeamSearchManager` turns them into log-probs (grammar mask per
beam), lets the request's `BeamSearchState` pick the candidates (transformers' semantics, see
`formcast.decoding.beam_search`), and re-forms the beams:

- a parent chosen by ``k >= 1`` candidates continues as itself with the first token and
  forks ``k - 1`` children (`BlockManager.fork_inplace`: the blocks are shared, the partly
  filled last block is copied on the next write);
- a parent chosen by none is retired at once (its blocks return to the pool);
- each new beam's matcher is the parent's fork after the candidate token; a candidate whose
  grammar terminates is a finished hypothesis, like EOS (the mask allows EOS only where the
  grammar accepts).

Beams of one request may be sampled in different steps (a beam preempted and recomputed, a
token budget cut through a request): a beam whose row arrived early is parked (out of the
scheduler's running list, keeping its blocks and row) until its siblings catch up.
Jump-forward is off for beams: every token's log-prob must be computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from formcast.decoding.beam_search import (
    BeamHypothesis,
    BeamSearchParams,
    BeamSearchState,
    CandidateMatchers,
    beam_log_probs,
)
from formcast.engine.block_manager import BlockManager
from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.engine.outputs import CompletionOutput, RequestOutput, StreamDelta
from formcast.engine.request import Request
from formcast.engine.scheduler import Scheduler
from formcast.engine.sequence import Sequence, SequenceStatus
from formcast.errors import DeadEndError, RequestError
from formcast.grammar import MaskHook, Matcher
from formcast.samplers import SamplingParams


@dataclass
class _Finished:
    """Payload of a hypothesis: its generated tokens and how it ended."""

    token_ids: list[int]
    finish_reason: str
    is_grammar_complete: bool | None


@dataclass(eq=False)
class BeamGroup:
    """Engine-side state of one beam search request."""

    request: Request
    params: BeamSearchParams
    state: BeamSearchState
    finishing_token_ids: frozenset[int]
    beams: list[Sequence]  # live beams, in the order of the state's running scores
    pending: dict[int, torch.Tensor] = field(default_factory=dict)  # seq_id -> (V,) log-probs
    parked: list[Sequence] = field(default_factory=list)  # have a row, out of the running list
    is_aborted: bool = False
    first_token_time: float | None = None
    manager: Any = None  # the BeamSearchManager that renders outputs

    def output(self) -> RequestOutput:
        """The request's current output (see `BeamSearchManager.output`)."""
        return self.manager.output(self.request)


def beam_sampling_params(
    sampling_params: SamplingParams | None,
    beam_search: BeamSearchParams,
    jump_forward: Any,
    is_speculative: bool = False,
) -> SamplingParams:
    """The `SamplingParams` a beam request's sequences carry (limits and stop ids only).

    Raises
    ------
    RequestError
        ``sampling_params`` or ``jump_forward=True`` given together with ``beam_search``, or
        an engine running speculative decoding.
    """
    if is_speculative:
        raise RequestError("beam_search is not available on an engine with speculative decoding")
    if not isinstance(beam_search, BeamSearchParams):
        raise RequestError(
            f"beam_search must be a BeamSearchParams, got {type(beam_search).__name__}"
        )
    if sampling_params is not None:
        raise RequestError("pass either sampling_params or beam_search, not both")
    if jump_forward:
        raise RequestError(
            "jump_forward is not available with beam_search (forced tokens are scored)"
        )
    return SamplingParams(
        temperature=0.0,
        max_tokens=beam_search.max_tokens,
        stop_token_ids=beam_search.stop_token_ids,
        ignore_eos=beam_search.ignore_eos,
    )


def blocks_for_beams(
    block_manager: BlockManager, num_prompt_tokens: int, max_tokens: int, num_beams: int
) -> int:
    """Most blocks a beam request can hold at once: shared full prompt blocks + every beam's
    own tail, as if the beams had diverged right after the prompt."""
    shared = num_prompt_tokens // block_manager.block_size
    per_beam = block_manager.blocks_for(num_prompt_tokens + max_tokens) - shared
    return shared + num_beams * per_beam


class BeamSearchManager:
    """All beam requests of one engine.

    Parameters
    ----------
    scheduler : Scheduler
        The engine's scheduler (beams join and leave its running list).
    block_manager : BlockManager
        The engine's blocks (fork / free).
    tokenizer : Any
        For the hypotheses' text.
    eos_token_ids : tuple[int, ...]
        The engine's EOS ids.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        block_manager: BlockManager,
        tokenizer: Any,
        eos_token_ids: tuple[int, ...],
    ) -> None:
        self.scheduler = scheduler
        self.block_manager = block_manager
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids
        self._group_of: dict[int, BeamGroup] = {}  # seq_id of a live beam -> its group

    @property
    def has_groups(self) -> bool:
        """True while some beam request has live beams."""
        return bool(self._group_of)

    @property
    def parked_seqs(self) -> list[Sequence]:
        """Beams holding blocks outside the scheduler's lists (waiting for their siblings)."""
        groups = {id(g): g for g in self._group_of.values()}
        return [seq for group in groups.values() for seq in group.parked]

    def add(self, request: Request, seq: Sequence, params: BeamSearchParams) -> None:
        """Make ``request`` (whose prompt sequence is ``seq``) a beam request.

        Raises
        ------
        RequestError
            The beams may need more KV blocks than the cache has.
        """
        bm = self.block_manager
        needed = blocks_for_beams(bm, seq.num_prompt_tokens, request.max_tokens, params.num_beams)
        usable = bm.num_blocks - bm.watermark_blocks
        if needed > usable:
            raise RequestError(
                f"request {request.request_id!r}: {params.num_beams} beams may need {needed} KV "
                f"blocks ({seq.num_prompt_tokens} prompt + {request.max_tokens} new tokens each) "
                f"but the cache has {usable} usable; raise num_kv_blocks or lower max_tokens"
            )
        state = BeamSearchState(params, request.max_tokens, len(self.eos_token_ids))
        stop_ids = params.finishing_token_ids(self.eos_token_ids)
        group = BeamGroup(request, params, state, stop_ids, [seq], manager=self)
        request.beam_group = group
        seq.jump_forward = False
        seq.num_reserved_seqs = params.num_beams - 1
        self._group_of[seq.seq_id] = group

    # -- the step ------------------------------------------------------------------------------

    def take_rows(
        self, seqs: list[Sequence], logits: torch.Tensor, bitmask: torch.Tensor | None
    ) -> tuple[list[Sequence], torch.Tensor, torch.Tensor | None, list[StreamDelta]]:
        """Consume the beams' logits rows; return the other rows and finished beams' deltas.

        ``logits`` is ``(len(seqs), V)``; ``bitmask`` (or None) has the same rows.
        """
        beam_rows = [i for i, seq in enumerate(seqs) if seq.seq_id in self._group_of]
        if not beam_rows:
            return seqs, logits, bitmask, []
        touched: dict[int, BeamGroup] = {}
        for i in beam_rows:
            group = self._group_of[seqs[i].seq_id]
            touched[id(group)] = group
        for group in touched.values():
            rows = [i for i in beam_rows if self._group_of[seqs[i].seq_id] is group]
            constrained = any(seqs[i].matcher is not None for i in rows)
            mask = bitmask[rows] if bitmask is not None and constrained else None
            try:
                log_probs = beam_log_probs(logits[rows], mask, group.params.renormalize_logprobs)
            except DeadEndError as exc:
                raise DeadEndError(f"request {group.request.request_id!r}: {exc}") from exc
            for row, i in enumerate(rows):
                group.pending[seqs[i].seq_id] = log_probs[row]
        deltas: list[StreamDelta] = []
        for group in touched.values():
            if all(beam.seq_id in group.pending for beam in group.beams):
                deltas.extend(self._step_group(group))
            else:
                self._park(group)
        is_beam_row = set(beam_rows)
        rest = [i for i in range(len(seqs)) if i not in is_beam_row]
        if not rest:
            return [], logits[:0], None, deltas
        index = torch.tensor(rest, device=logits.device)
        rest_mask = bitmask[rest] if bitmask is not None else None
        return [seqs[i] for i in rest], logits[index], rest_mask, deltas

    def _park(self, group: BeamGroup) -> None:
        """Take beams that already have their row out of the running list until the rest do."""
        running = self.scheduler.running
        for beam in group.beams:
            if beam.seq_id in group.pending and beam not in group.parked:
                running.remove(beam)
                group.parked.append(beam)

    def _step_group(self, group: BeamGroup) -> list[StreamDelta]:
        beams = group.beams
        log_probs = torch.stack([group.pending.pop(beam.seq_id) for beam in beams])  # (B, V)
        state = group.state
        candidates = state.top_candidates(log_probs)
        is_constrained = beams[0].matcher is not None
        forks = CandidateMatchers(
            [b.matcher for b in beams] if is_constrained else None, candidates
        )

        def is_stop(rank: int) -> bool:
            token_id = candidates.token_ids[rank]
            if token_id in group.finishing_token_ids or forks.is_terminated(rank):
                return True
            if not group.params.stop:
                return False
            parent = beams[candidates.beam_indices[rank]]
            text = self.tokenizer.decode(parent.output_token_ids + [token_id])
            return any(stop in text for stop in group.params.stop)

        def payload(rank: int, reason: str) -> _Finished:
            parent = beams[candidates.beam_indices[rank]]
            complete = None
            if is_constrained:
                matcher = forks.matcher(rank)
                complete = bool(matcher.is_terminated() or _is_accepting(matcher))
            return _Finished(
                parent.output_token_ids + [candidates.token_ids[rank]], reason, complete
            )

        result = state.advance(candidates, is_stop, payload)
        now = time.monotonic()
        if group.first_token_time is None:
            group.first_token_time = now
        running = self.scheduler.running
        old = set(beams)
        positions = [i for i, seq in enumerate(running) if seq in old]
        position = positions[0] if positions else len(running)
        if result.is_done:
            new_beams: list[Sequence] = []
        else:
            new_beams = self._reform(group, candidates, result.running_ranks, forks)
        kept = set(new_beams)
        running[:] = [seq for seq in running if seq not in old]
        for beam in beams:
            del self._group_of[beam.seq_id]
            if beam not in kept:
                self._retire(group, beam, "stop")
        group.parked = []
        for beam in new_beams:
            beam.status = SequenceStatus.RUNNING
            self._group_of[beam.seq_id] = group
        running[position:position] = new_beams
        if new_beams:
            group.beams = new_beams
            group.request.seqs = list(new_beams)
            return []
        # done: request.seqs keeps the retired beams (all finished)
        group.request.finish_time = now
        return self._final_deltas(group)

    def _reform(
        self, group: BeamGroup, candidates: Any, ranks: list[int], forks: CandidateMatchers
    ) -> list[Sequence]:
        """New beams for ``ranks``: parents continue or fork; tokens appended afterwards."""
        beams = group.beams
        used: set[int] = set()
        new_beams: list[Sequence] = []
        for rank in ranks:
            parent = beams[candidates.beam_indices[rank]]
            if parent.seq_id in used:
                beam = Sequence(
                    parent.request_id,
                    parent.prompt_token_ids,
                    parent.sampling_params,
                    arrival_time=parent.arrival_time,
                    token_ids=list(parent.token_ids),
                )
                beam.grammar = parent.grammar
                beam.num_steps = parent.num_steps
                beam.num_prompt_hit_tokens = parent.num_prompt_hit_tokens
                self.block_manager.fork_inplace(parent, beam)
            else:
                used.add(parent.seq_id)
                beam = parent
            new_beams.append(beam)
        # tokens go in only after every fork copied its parent's tokens
        for beam, rank in zip(new_beams, ranks, strict=True):
            beam.num_reserved_seqs = 0
            beam.append_token(candidates.token_ids[rank])
            if forks.parent_matchers is not None:
                beam.matcher = forks.matcher(rank)
        return new_beams

    def _retire(self, group: BeamGroup, seq: Sequence, reason: str) -> None:
        """Free ``seq``'s blocks now (whether running, waiting or parked)."""
        if seq.status is SequenceStatus.FINISHED:
            return
        if seq in group.parked or (
            seq.status is SequenceStatus.RUNNING and seq not in self.scheduler.running
        ):
            self.block_manager.free_inplace(seq)
            seq.status = SequenceStatus.FINISHED
            seq.finish_reason = reason
        else:
            self.scheduler.finish(seq, reason)

    def abort(self, request: Request) -> None:
        """Retire ``request``'s parked beams (the engine's abort retires the others)."""
        group = request.beam_group
        group.is_aborted = True
        for beam in group.parked:
            self._retire(group, beam, "abort")
        group.parked = []
        for beam in group.beams:
            self._group_of.pop(beam.seq_id, None)
        group.pending.clear()

    # -- outputs -------------------------------------------------------------------------------

    def _text(self, request: Request, token_ids: list[int]) -> str:
        stop = request.beam_group.params.stop
        detokenizer = IncrementalDetokenizer(
            self.tokenizer,
            request.prompt_token_ids,
            stop,
            request.sampling_params.skip_special_tokens,
        )
        for token_id in token_ids:
            if token_id in self.eos_token_ids or token_id in request.sampling_params.stop_token_ids:
                break
            if detokenizer.append(token_id, bool(stop)) is not None:
                return detokenizer.text  # cut before the stop string
        detokenizer.flush()
        return detokenizer.text

    def _final_deltas(self, group: BeamGroup) -> list[StreamDelta]:
        request = group.request
        output = self.output(request)
        return [
            StreamDelta(
                request.request_id,
                c.index,
                c.token_ids,
                c.text,
                c.finish_reason,
                is_grammar_complete=c.is_grammar_complete,
            )
            for c in output.outputs
        ]

    def output(self, request: Request) -> RequestOutput:
        """The request's best hypotheses (live beams fill in while running or after abort)."""
        group: BeamGroup = request.beam_group
        wanted = group.params.num_return_sequences
        entries: list[tuple[BeamHypothesis | None, list[int], str | None, bool | None]] = []
        for hypothesis in group.state.best(wanted):
            finished: _Finished = hypothesis.payload
            entries.append(
                (
                    hypothesis,
                    finished.token_ids,
                    finished.finish_reason,
                    finished.is_grammar_complete,
                )
            )
        if len(entries) < wanted and not group.state.is_done:
            reason = "abort" if group.is_aborted else None
            scores = group.state.running_scores.tolist()
            for beam, _ in sorted(zip(group.beams, scores, strict=False), key=lambda p: -p[1]):
                if len(entries) == wanted:
                    break
                entries.append((None, list(beam.output_token_ids), reason, None))
        completions = []
        for index, (hypothesis, token_ids, reason, complete) in enumerate(entries):
            cumulative = hypothesis.cumulative_logprob if hypothesis is not None else None
            completions.append(
                CompletionOutput(
                    index=index,
                    text=self._text(request, token_ids),
                    token_ids=token_ids,
                    finish_reason=reason,
                    is_grammar_complete=complete,
                    cumulative_logprob=cumulative,
                    beam_score=hypothesis.score if hypothesis is not None else None,
                )
            )
        seqs = request.seqs
        metrics = {
            "arrival_time": request.arrival_time,
            "num_forward_passes": max(seq.num_steps for seq in seqs),
        }
        if group.first_token_time is not None:
            metrics["first_token_time"] = group.first_token_time
        if request.finish_time is not None:
            metrics["finish_time"] = request.finish_time
        return RequestOutput(
            request_id=request.request_id,
            prompt=request.prompt,
            prompt_token_ids=list(request.prompt_token_ids),
            outputs=completions,
            finished=request.is_finished,
            num_cached_prompt_tokens=seqs[0].num_prompt_hit_tokens,
            metrics=metrics,
        )


def _is_accepting(matcher: MaskHook | None) -> bool:
    return isinstance(matcher, Matcher) and matcher.is_accepting()
