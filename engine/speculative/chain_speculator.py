"""Speculator: the engine side of speculative decoding (propose, fit to the plan, verify).

One engine step with speculation:

1. ``propose`` (before scheduling): for each running sequence in decode state (at most
   ``max_batch_size`` running), a proposer drafts ``k`` tokens (``k`` adapted per sequence).
   Each draft is checked against the grammar matcher and the proposal is cut at the first
   rejection; after each accepted draft, grammar-forced text (jump-forward) is appended as
   *forced* tokens, free drafts that need no verification. One bitmask row is filled per
   verified position (before each draft, and after the proposal); the matcher then rolls
   back, so it stays at the committed state. Proposals stop where plain decoding would stop
   (EOS, stop ids, grammar end, ``max_tokens``, ``max_model_len``). The proposal is appended
   to ``seq.token_ids``, so the scheduler gives the sequence one span: its uncached committed
   tokens plus the proposal.
2. ``fit_plan`` (after scheduling): a scheduled span holding a proposal gets ``num_logits =
   len(proposal) + 1`` and ``is_verification``; a preempted sequence drops its proposal.
   Proposals are budgeted so a running sequence's span is never cut.
3. ``verify`` (after the forward): the target's logits at the sample rows are processed like
   the sampler does (penalties, bias, mask, temperature, truncation); greedy rows keep drafts
   equal to the argmax, sampled rows use exact rejection sampling. The KV cache is truncated
   to the committed plus kept tokens (``BlockManager.truncate_inplace``), full verified blocks
   enter the prefix cache, and the kept tokens plus the final one are committed one by one
   through the engine's `Postprocessor` (stop checks, matcher, jump-forward) exactly as plain
   decoding would have produced them.

Greedy output equals plain greedy decoding token for token; sampled output follows the same
distribution (not the same random stream: seeded requests draw different noise).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from formcast.decoding.speculative.acceptance import AcceptanceTracker
from formcast.decoding.speculative.ngram_proposer import NgramProposer
from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.decoding.speculative.verifier import (
    Proposal,
    Verdict,
    verify_greedy,
    verify_sampled,
)
from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.model_runner import ModelRunner
from formcast.engine.models.config import ModelConfig
from formcast.engine.outputs import StreamDelta
from formcast.engine.postprocess import Postprocessor
from formcast.engine.request import Request
from formcast.engine.scheduler import ScheduledSeq, Scheduler, SchedulerOutput
from formcast.engine.sequence import Sequence, SequenceStatus
from formcast.engine.speculative.draft_runner import DraftModel, build_draft_runner
from formcast.errors import DeadEndError, EngineError
from formcast.grammar import allocate_token_bitmask
from formcast.samplers import Sampler, SamplingBatch

MAX_UNCACHED_FOR_SPECULATION = 16  # committed tokens still to compute (e.g. jump-forward)
MAX_FORCED_PER_PROPOSAL = 16  # jump-forward tokens a proposal may carry beyond its drafts


class EngineParts(Protocol):
    """What a speculator uses of its engine (`formcast.engine.llm_engine.LLM` has them all).

    A speculator proposes into the scheduler's running sequences, runs the sampler's logits
    processing on verified rows, trims the KV cache and commits tokens through the engine's
    `Postprocessor`; it never reaches into the engine's private state.
    """

    config: EngineConfig
    model_config: ModelConfig
    model_path: Path
    runner: ModelRunner
    block_manager: BlockManager
    scheduler: Scheduler
    sampler: Sampler
    postprocessor: Postprocessor
    requests: dict[str, Request]
    vocab_size: int
    eos_token_ids: tuple[int, ...]


def mark_verification(item: ScheduledSeq, num_proposed: int) -> None:
    """Make a scheduled span a verification span: logits for its ``num_proposed`` proposed
    tokens plus one. The span must hold the whole proposal (proposals are budgeted so the
    scheduler never cuts one)."""
    seq = item.seq
    if seq.num_cached_tokens + item.num_new_tokens != seq.num_tokens:
        raise EngineError(
            f"sequence {seq.seq_id}: its speculative span was cut by the scheduler "
            "(proposals are budgeted so this cannot happen)"
        )
    item.num_logits = num_proposed + 1
    item.is_verification = True


@dataclass
class SpeculatorStats:
    """Cumulative counters of one engine's speculation.

    Attributes
    ----------
    num_verifications : int
        Sequence spans verified (one per sequence and step with a proposal).
    num_draft_tokens : int
        Drafts verified (forced tokens excluded).
    num_accepted_tokens : int
        Drafts accepted.
    num_forced_draft_tokens : int
        Jump-forward tokens carried inside proposals and kept.
    num_emitted_tokens : int
        Tokens emitted by verified spans (kept drafts, forced tokens, final tokens).
    num_draft_forwards : int
        Forward passes of the draft model.
    propose_seconds, verify_seconds : float
        Wall time proposing (drafting, grammar checks, masks) and verifying.
    """

    num_verifications: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_forced_draft_tokens: int = 0
    num_emitted_tokens: int = 0
    num_draft_forwards: int = 0
    propose_seconds: float = 0.0
    verify_seconds: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / verified drafts (0 when none)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0


@dataclass
class ProposalState:
    """One sequence's proposal in the current step (a tree's accepted path is one too)."""

    seq: Sequence
    committed_len: int
    max_len: int  # longest proposal (drafts + forced tokens) the step budgeted for
    proposal: Proposal = field(default_factory=Proposal)
    rows: list[int] = field(default_factory=list)  # bitmask rows, one per sample row
    has_open_row: bool = False  # rows[-1] is the mask after the proposal, no draft on it yet
    num_matcher_steps: int = 0
    is_open: bool = True  # more drafts may follow
    logits_start: int = 0  # first logits row of the span (set by verify)


class Speculator:
    """Speculative decoding for one `LLM` (see module docstring).

    Parameters
    ----------
    llm : EngineParts
        The engine (its block manager, scheduler, sampler and postprocessor).
    config : SpeculativeConfig
        The settings.
    """

    def __init__(self, llm: EngineParts, config: SpeculativeConfig) -> None:
        self.llm = llm
        self.config = config
        span_overhead = config.span_overhead
        if span_overhead is None:
            span_overhead = 0.5 if llm.runner.device.type == "cpu" else 0.1
        self.tracker = AcceptanceTracker(
            config.num_draft_tokens,
            config.adaptive,
            config.draft_cost,
            span_overhead,
            config.acceptance_decay,
            config.probe_interval,
        )
        self.ngram: NgramProposer | None = None
        self.draft: DraftModel | None = None
        if config.method == "ngram":
            self.ngram = NgramProposer(config.min_ngram, config.max_ngram)
        elif config.method in ("self_draft", "draft_model"):
            runner = build_draft_runner(
                config.method,
                llm.runner,
                config.draft_num_layers,
                config.draft_model,
                llm.runner.num_kv_blocks,
            )
            self.draft = DraftModel(runner)
        self.stats = SpeculatorStats()
        capacity = config.max_batch_size * (config.num_draft_tokens + 1)
        self._bitmask = allocate_token_bitmask(capacity, llm.vocab_size)  # (rows, W)
        self._num_rows = 0
        self._states: dict[int, ProposalState] = {}
        self.trees: dict | None = None  # token trees of this step's spans (tree speculation)

    # -- 1. propose ------------------------------------------------------------------------

    def propose(self) -> None:
        """Append proposals to the running sequences that speculate this step."""
        begin = time.perf_counter()
        step = self._begin_step()
        if step is None:
            return
        running, budget, free_blocks = step
        bm = self.llm.block_manager
        states = []
        for seq in running:
            if not self._can_speculate(seq):
                continue
            k = min(self.tracker.num_drafts(seq.seq_id), budget)
            # a proposal may reach max_tokens / max_model_len (its final token is then dropped)
            room = self.llm.requests[seq.request_id].max_tokens - seq.num_output_tokens
            k = min(k, room, self.llm.config.max_model_len - seq.num_tokens)
            if k <= 0:
                continue
            can_force = seq.jump_forward and seq.matcher is not None
            max_len = min(k + MAX_FORCED_PER_PROPOSAL if can_force else k, budget)
            need = bm.num_blocks_to_grow(seq, seq.num_uncached_tokens + max_len)
            if need > free_blocks:
                continue
            if self.draft is not None and not self.draft.can_extend(seq, max_len):
                continue
            free_blocks -= need
            budget -= max_len
            states.append((ProposalState(seq, seq.num_tokens, max_len), k))
        if self.draft is None:
            for state, k in states:
                self._propose_point_mass(state, k)
        else:
            self._propose_with_draft(states)
        for state, _ in states:
            self._close(state)
            if state.proposal.num_drafts > 0:
                self._states[state.seq.seq_id] = state
            else:
                self._strip(state)
        self.stats.propose_seconds += time.perf_counter() - begin

    def _begin_step(self) -> tuple[list[Sequence], int, int] | None:
        """Drop the last step's proposals; the running sequences, the token budget and the
        free KV blocks left for this step's proposals (None: no speculation this step)."""
        self._states = {}
        self._num_rows = 0
        self._release_finished()
        running = self.llm.scheduler.running
        if not running or len(running) > self.config.max_batch_size:
            return None
        budget = self.llm.config.max_num_batched_tokens - sum(
            s.num_uncached_tokens for s in running
        )
        bm = self.llm.block_manager
        return running, budget, bm.num_free_blocks - bm.watermark_blocks

    def _can_speculate(self, seq: Sequence) -> bool:
        if seq.status is not SequenceStatus.RUNNING or seq.num_pending_forks:
            return False
        if seq.score is not None:  # a score request's rows are read, not sampled
            return False
        if not 1 <= seq.num_uncached_tokens <= MAX_UNCACHED_FOR_SPECULATION:
            return False
        matcher = seq.matcher
        return matcher is None or callable(getattr(matcher, "rollback", None))

    def _propose_point_mass(self, state: ProposalState, k: int) -> None:
        seq = state.seq
        if self.ngram is not None:
            candidates = self.ngram.propose(seq.token_ids, k)
        else:
            candidates = list(self.config.proposer.propose(list(seq.token_ids), k))[:k]
        for token_id in candidates:
            if not 0 <= int(token_id) < self.llm.vocab_size:
                raise EngineError(
                    f"speculative proposer returned token id {token_id} outside "
                    f"[0, {self.llm.vocab_size})"
                )
            if not self._push_draft(state, int(token_id), None) or (state.proposal.num_drafts >= k):
                break

    def _propose_with_draft(self, states: list[tuple[ProposalState, int]]) -> None:
        """Autoregressive drafting, batched over sequences: one draft forward per position."""
        draft = self.draft
        active = [(state, k) for state, k in states]
        while active:
            seqs = [state.seq for state, _ in active]
            logits = draft.logits_for(seqs)  # (B, V)
            self.stats.num_draft_forwards += 1
            rows = [self._open_row(state) for state, _ in active]
            params = [seq.sampling_params for seq in seqs]
            batch = SamplingBatch.build(
                params,
                [seq.prompt_token_ids for seq in seqs],
                [seq.output_token_ids for seq in seqs],
                self.llm.vocab_size,
                self.llm.eos_token_ids,
                None,
                logits.device,
            )
            bitmask = None
            if any(seq.matcher is not None for seq in seqs):
                free_rows = [r for r, seq in zip(rows, seqs, strict=True) if seq.matcher is None]
                if free_rows:
                    self._bitmask[free_rows] = -1
                bitmask = self._bitmask[rows].to(logits.device)
            processed = self.llm.sampler.process_logits(logits, batch, bitmask)  # (B, V)
            still = []
            for i, (state, k) in enumerate(active):
                seq = state.seq
                if seq.sampling_params.is_greedy:
                    token_id, probs = int(processed[i].argmax()), None
                else:
                    probs = torch.softmax(processed[i], dim=-1)
                    token_id = int(torch.multinomial(probs, 1, generator=seq.generator))
                if self._push_draft(state, token_id, probs) and state.proposal.num_drafts < k:
                    still.append((state, k))
            active = still

    def _open_row(self, state: ProposalState) -> int:
        """Fill (once) the bitmask row of the position after the current proposal."""
        if not state.has_open_row:
            row = self._num_rows
            if row >= self._bitmask.shape[0]:
                raise EngineError("speculative bitmask buffer overflow")
            self._num_rows += 1
            matcher = state.seq.matcher
            if matcher is not None:  # rows of unconstrained sequences are set in _judge
                matcher.fill_bitmask(self._bitmask, row)
            state.rows.append(row)
            state.has_open_row = True
        return state.rows[-1]

    def _push_draft(self, state: ProposalState, token_id: int, probs: torch.Tensor | None) -> bool:
        """Add a draft (and the forced text after it); False when no more drafts may follow."""
        seq = state.seq
        self._open_row(state)
        matcher = seq.matcher
        if matcher is not None and not matcher.accept_token(token_id):
            state.is_open = False  # cut at the first draft the grammar rejects
            return False
        length_before = len(state.proposal)
        steps_before = state.num_matcher_steps
        state.num_matcher_steps += matcher is not None
        state.has_open_row = False
        state.proposal.append(token_id, False, probs)
        seq.token_ids.append(token_id)
        is_stopped = self.llm.postprocessor.stops_after(seq, token_id)
        if not is_stopped and seq.jump_forward and matcher is not None:
            is_stopped = not self._push_forced(state)
        if len(state.proposal) > state.max_len:
            # a forced run overflowed the budget; it cannot be cut (plain decoding would
            # append all of it), so the draft that led to it is withdrawn
            if state.num_matcher_steps > steps_before:
                matcher.rollback(state.num_matcher_steps - steps_before)
            state.num_matcher_steps = steps_before
            state.proposal.truncate(length_before)
            del seq.token_ids[state.committed_len + length_before :]
            state.has_open_row = True  # rows[-1] is again the mask after the proposal
            state.is_open = False
            return False
        if is_stopped:
            state.is_open = False
            return False
        return len(state.proposal) < state.max_len

    def _push_forced(self, state: ProposalState) -> bool:
        """Append the text the grammar forces now, as plain jump-forward would; False on stop."""
        seq = state.seq
        matcher = seq.matcher
        while True:
            forced_ids = self.llm.postprocessor.forced_token_ids(seq)
            if not forced_ids:
                return True
            for forced_id in forced_ids:
                if not matcher.accept_token(forced_id):
                    raise EngineError(
                        f"request {seq.request_id!r}: grammar rejected its own jump-forward "
                        f"token {forced_id}"
                    )
                state.num_matcher_steps += 1
                state.proposal.append(forced_id, True)
                seq.token_ids.append(forced_id)
                if self.llm.postprocessor.stops_after(seq, forced_id):
                    return False

    def _close(self, state: ProposalState) -> None:
        """Fill the mask after the proposal; roll the matcher back to the committed state."""
        if state.proposal.num_drafts > 0:
            self._open_row(state)
        if state.num_matcher_steps:
            state.seq.matcher.rollback(state.num_matcher_steps)
            state.num_matcher_steps = 0

    def _strip(self, state: ProposalState) -> None:
        """Drop a proposal that will not be verified (tokens and draft-cache entries)."""
        del state.seq.token_ids[state.committed_len :]
        if self.draft is not None:
            self.draft.rollback(state.seq, state.committed_len)

    def _release_finished(self) -> None:
        """Forget sequences that finished or were aborted (acceptance rates, draft caches)."""
        live = {seq.seq_id for seq in self.llm.scheduler.running}
        live.update(seq.seq_id for seq in self.llm.scheduler.waiting)
        self.tracker.retain(live)
        if self.draft is not None:
            for seq_id in [s for s in self.draft.shadows if s not in live]:
                self.draft.release(seq_id)

    # -- 2. fit the plan -------------------------------------------------------------------

    def fit_plan(self, plan: SchedulerOutput) -> None:
        """Mark verification spans; drop the proposals of sequences not fully scheduled."""
        scheduled = set()
        for item in plan.scheduled:
            state = self._states.get(item.seq.seq_id)
            if state is None:
                continue
            mark_verification(item, len(state.proposal))
            scheduled.add(item.seq.seq_id)
        for seq_id in [s for s in self._states if s not in scheduled]:
            self._strip(self._states.pop(seq_id))  # preempted: its blocks are gone already

    # -- 3. verify -------------------------------------------------------------------------

    def verify(self, plan: SchedulerOutput, logits: torch.Tensor) -> list[StreamDelta]:
        """Verify every verification span of ``plan`` against the step's ``logits``."""
        if not self._states:
            return []
        begin = time.perf_counter()
        states: list[ProposalState] = []
        row = 0
        for item in plan.scheduled:
            if item.is_verification:
                state = self._states[item.seq.seq_id]
                state.logits_start = row
                item.seq.num_cached_tokens += item.num_new_tokens
                item.seq.num_steps += 1
                states.append(state)
            row += item.num_logits
        verdicts, sample_logits = self._judge(states, logits)
        deltas = []
        for state, verdict, rows in zip(states, verdicts, sample_logits, strict=True):
            self._record(state.seq.seq_id, state.proposal.num_drafts, verdict.num_accepted)
            deltas.append(self._emit(state, verdict, rows))
        self._states = {}
        self.stats.verify_seconds += time.perf_counter() - begin
        return deltas

    def _process_rows(
        self,
        raw: torch.Tensor,
        states: list,
        row_requests: tuple[list, list, list],
        mask_rows: list[int],
        rows_of: Callable[[Any], list[int]],
        what: str,
    ) -> torch.Tensor:
        """The sampler's processing (penalties, bias, grammar mask, temperature, truncation) of
        the verified rows ``raw (R, V)``; ``row_requests`` = per row (params, prompt, output so
        far); ``mask_rows`` = per row its bitmask row; unconstrained states' rows (``rows_of``)
        are opened to every token first."""
        device = raw.device
        params, prompts, outputs = row_requests
        batch = SamplingBatch.build(
            params, prompts, outputs, self.llm.vocab_size, self.llm.eos_token_ids, None, device
        )
        bitmask = None
        if any(state.seq.matcher is not None for state in states):
            free_rows = [r for state in states if state.seq.matcher is None for r in rows_of(state)]
            if free_rows:
                self._bitmask[free_rows] = -1
            bitmask = self._bitmask[mask_rows].to(device)
        try:
            return self.llm.sampler.process_logits(raw, batch, bitmask)
        except DeadEndError as exc:
            names = ", ".join(repr(s.seq.request_id) for s in states)
            raise DeadEndError(f"{what} of requests {names}: {exc}") from exc

    def _judge(
        self, states: list[ProposalState], logits: torch.Tensor
    ) -> tuple[list[Verdict], list[torch.Tensor]]:
        """Verdicts and each state's sample-row logits ``(K_i + 1, V)`` for its logprobs (raw,
        or processed when the sampler reports processed logprobs for it)."""
        row_ids, params, prompts, outputs, mask_rows = [], [], [], [], []
        for state in states:
            seq = state.seq
            start = seq.num_prompt_tokens
            for r in state.proposal.sample_rows:
                row_ids.append(state.logits_start + r)
                params.append(seq.sampling_params)
                prompts.append(seq.prompt_token_ids)
                outputs.append(seq.token_ids[start : state.committed_len + r])
            mask_rows.extend(state.rows)
        rows = logits[torch.tensor(row_ids, dtype=torch.long, device=logits.device)]  # (R, V)
        processed = self._process_rows(
            rows,
            states,
            (params, prompts, outputs),
            mask_rows,
            lambda state: state.rows,
            "speculative verification",
        )  # (R, V)
        verdicts: list[Verdict | None] = [None] * len(states)
        sample_logits = []
        sampled, sampled_probs, sampled_index = [], [], []
        start = 0
        for i, state in enumerate(states):
            count = state.proposal.num_drafts + 1
            block = processed[start : start + count]
            is_processed = self.llm.sampler.reports_processed(state.seq.sampling_params)
            sample_logits.append(block if is_processed else rows[start : start + count])
            start += count
            if state.seq.sampling_params.is_greedy:
                verdicts[i] = verify_greedy(state.proposal, block.argmax(dim=-1).tolist())
            else:
                sampled.append(state.proposal)
                sampled_probs.append(torch.softmax(block, dim=-1))
                sampled_index.append(i)
        if sampled:
            generators = [states[i].seq.generator for i in sampled_index]
            for i, verdict in zip(
                sampled_index, verify_sampled(sampled, sampled_probs, generators), strict=True
            ):
                verdicts[i] = verdict
        return verdicts, sample_logits

    def _record(self, seq_id: int, num_drafts: int, num_accepted: int) -> None:
        """Count one verification in the stats and the acceptance tracker."""
        self.stats.num_verifications += 1
        self.stats.num_draft_tokens += num_drafts
        self.stats.num_accepted_tokens += num_accepted
        self.tracker.update(seq_id, num_drafts, num_accepted)

    def _emit(
        self, state: ProposalState, verdict: Verdict, raw_logits: torch.Tensor
    ) -> StreamDelta:
        """Apply a verdict: truncate KV and tokens, then commit token by token as plain decoding.

        ``state.proposal`` holds the proposal's tokens in cache order (for a tree: the
        accepted path, already moved to consecutive cache slots); ``raw_logits`` the logits
        rows of its drafts and the final token, in order, whose ``log_softmax`` gives the
        logprobs (raw or processed, see ``_judge``)."""
        llm = self.llm
        postprocessor = llm.postprocessor
        seq = state.seq
        proposal = state.proposal
        kept = proposal.token_ids[: verdict.num_kept]
        is_forced = proposal.is_forced[: verdict.num_kept]
        # KV: committed + kept tokens are valid; the rejected tail is released
        llm.block_manager.truncate_inplace(seq, state.committed_len + verdict.num_kept)
        if self.draft is not None:
            self.draft.rollback(seq, state.committed_len + verdict.num_kept)
        del seq.token_ids[state.committed_len :]
        num_top = seq.sampling_params.logprobs
        log_probs = torch.log_softmax(raw_logits, dim=-1) if num_top is not None else None
        sample_index = 0  # which sample row the next non-forced token came from
        now = time.monotonic()
        reason = None
        emitted = list(zip(kept, is_forced, strict=True)) + [(verdict.final_token_id, False)]
        for token_id, forced in emitted:
            self.stats.num_emitted_tokens += 1
            entry = None
            if forced:
                self.stats.num_forced_draft_tokens += 1
            else:
                if num_top is not None:
                    entry = self._logprobs_entry(log_probs[sample_index], token_id, num_top)
                sample_index += 1
            reason = postprocessor.commit_token(
                seq, token_id, is_forced=forced, is_verified=True, logprobs_entry=entry, now=now
            )
            if reason is not None:
                break
        if seq.num_cached_tokens > seq.num_tokens:  # stopped inside the kept tokens
            llm.block_manager.truncate_inplace(seq, seq.num_tokens)
        llm.block_manager.commit_inplace(seq)
        if reason is None and seq.jump_forward:
            reason = postprocessor.jump_forward(seq)
        if reason is not None:
            postprocessor.finish(seq, reason, now)
            if self.draft is not None:
                self.draft.release(seq.seq_id)
            self.tracker.forget(seq.seq_id)
        return postprocessor.delta(seq)

    @staticmethod
    def _logprobs_entry(log_probs: torch.Tensor, token_id: int, num_top: int) -> dict[int, float]:
        """``{token: logprob}`` plus the ``num_top`` most likely tokens of ``log_probs``."""
        entry = {token_id: float(log_probs[token_id])}
        if num_top > 0:
            top = log_probs.topk(min(num_top, log_probs.shape[-1]))
            for top_id, value in zip(top.indices.tolist(), top.values.tolist(), strict=True):
                entry.setdefault(top_id, value)
        return entry
