"""Scheduler: continuous batching with a token budget, chunked prefill and preemption.

Each step gives every scheduled sequence a span of its not-yet-cached tokens (a decode is a
span of one). Running sequences are served first, oldest first; a sequence that cannot get a
block preempts the newest running sequence (its blocks are freed; it is recomputed later,
mostly from the prefix cache). Waiting sequences are admitted oldest first while the budget,
the sequence limit and the free blocks (above the watermark) allow, and never past a waiting
sequence that does not fit, so nothing starves. A preempted sequence rejoins the front of
the queue. Nothing new is admitted in a step that preempted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.sequence import Sequence, SequenceStatus


@dataclass
class ScheduledSeq:
    """A sequence and the span of its tokens this step computes."""

    seq: Sequence
    num_new_tokens: int
    num_logits: int  # logits wanted for the span's last num_logits positions (0: mid-prefill)
    is_verification: bool = False  # a speculative span: the engine's speculator samples it


@dataclass
class SchedulerOutput:
    """One step's work."""

    scheduled: list[ScheduledSeq]
    preempted: list[Sequence]
    num_batched_tokens: int

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to compute."""
        return not self.scheduled


class Scheduler:
    """Decides, step by step, which token spans of which sequences are computed."""

    def __init__(self, config: EngineConfig, block_manager: BlockManager) -> None:
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        """Queue a new sequence."""
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    @property
    def has_unfinished(self) -> bool:
        """True while any sequence waits or runs."""
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        """Plan the next step (allocating blocks, preempting if needed)."""
        budget = self.config.max_num_batched_tokens
        bm = self.block_manager
        scheduled: list[ScheduledSeq] = []
        preempted: list[Sequence] = []
        index = 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            num_new = min(seq.num_uncached_tokens, budget)
            while not bm.can_grow(seq, num_new):
                victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    break
            if seq.status is not SequenceStatus.RUNNING:
                break  # seq preempted itself: everything after it is gone too
            bm.grow_inplace(seq, num_new)
            scheduled.append(self._span(seq, num_new))
            budget -= num_new
            index += 1
        while self.waiting and budget > 0 and not preempted:
            seq = self.waiting[0]
            num_seqs = 1 + seq.num_pending_forks + seq.num_reserved_seqs
            if len(self.running) + num_seqs > self.config.max_num_seqs:
                break
            hit_ids = bm.match_prefix(seq)
            if seq.score is not None:  # its rows from score.start on must be computed
                del hit_ids[seq.score.start // bm.block_size :]
            num_new = seq.num_tokens - len(hit_ids) * bm.block_size
            if num_new > budget:
                if not self.config.enable_chunked_prefill:
                    break
                num_new = budget
            if not bm.can_admit(seq, hit_ids, num_new):
                break
            self.waiting.popleft()
            bm.admit_inplace(seq, hit_ids)
            bm.grow_inplace(seq, num_new)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            scheduled.append(self._span(seq, num_new))
            budget -= num_new
        num_tokens = self.config.max_num_batched_tokens - budget
        return SchedulerOutput(scheduled, preempted, num_tokens)

    @staticmethod
    def _span(seq: Sequence, num_new: int) -> ScheduledSeq:
        end = seq.num_cached_tokens + num_new
        if seq.score is not None:  # a score request reads every row from score.start on
            return ScheduledSeq(
                seq, num_new, max(0, end - max(seq.num_cached_tokens, seq.score.start))
            )
        return ScheduledSeq(seq, num_new, 1 if end == seq.num_tokens else 0)

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.free_inplace(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def insert_running_after(self, anchor: Sequence, seqs: list[Sequence]) -> None:
        """Put forked sequences into the running list right after their parent."""
        position = self.running.index(anchor) + 1
        for seq in seqs:
            seq.status = SequenceStatus.RUNNING
        self.running[position:position] = seqs

    def finish(self, seq: Sequence, reason: str) -> None:
        """Retire a sequence: free its blocks and drop it from the queues."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        self.block_manager.free_inplace(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
