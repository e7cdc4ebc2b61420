"""Score requests: the log-probability of given continuations of a prompt, read off the
forward pass instead of sampled (``LLM.add_score_request``).

A score request scores ``K`` continuations (token ids) of one prompt; completion ``k`` of its
output is continuation ``k`` with ``logprobs`` (``{token_id: log-prob}`` per token, under the
model given the prompt and the continuation's earlier tokens), ``cumulative_logprob`` (their
sum) and ``stop_logprob`` (log-probability that the model stops right after it: the summed
probability of the engine's EOS tokens). The prompt is computed once:

1. The request's sequence prefills the prompt. The step that computes the prompt's last
   position reads that row (the distribution of every continuation's first token) and forks
   the sequence into ``K`` sequences that share the prompt's KV blocks (copy-on-write), each
   appending its continuation.
2. The next step computes the ``K`` continuation spans on the cached prompt and reads every
   row: each next continuation token's log-probability and, on the last row, the stop term.
   Nothing is sampled; a sequence whose rows are all read finishes with ``"stop"``.

Rows are read by position (`ScoreState.start` onward): a preempted sequence that computes
them again writes the same values again. The values are the model's own distribution,
``log_softmax`` of the float32 logits: no temperature, penalty, bias or grammar mask.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.engine.outputs import StreamDelta
from formcast.engine.sequence import Sequence
from formcast.errors import EngineError

if TYPE_CHECKING:
    from formcast.engine.block_manager import BlockManager
    from formcast.engine.postprocess import Postprocessor
    from formcast.engine.request import Request
    from formcast.engine.scheduler import Scheduler


@dataclass(eq=False)
class ScoreState:
    """What a score request's sequence reads instead of sampling.

    The request's first sequence holds every continuation in ``pending`` until its prompt is
    computed; then it and its forks each hold one continuation in ``token_ids``.
    """

    start: int  # position of the first row read: the prompt's last token
    pending: list[list[int]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # per token of token_ids; NaN: unread
    stop_logprob: float = math.nan

    @property
    def num_rows(self) -> int:
        """Rows this sequence reads: one per continuation token, and the stop row."""
        return len(self.token_ids) + 1

    @property
    def cumulative_logprob(self) -> float:
        """Sum of the continuation tokens' log-probabilities (NaN while a row is unread)."""
        return math.fsum(self.logprobs)


class ScoreReader:
    """Reads the rows of score requests from a step's logits; forks and finishes their
    sequences.

    Parameters
    ----------
    requests : dict[str, Request]
        The engine's requests (shared, not copied).
    scheduler : Scheduler
        Forked sequences join its running list.
    block_manager : BlockManager
        Forks share the prompt's blocks.
    postprocessor : Postprocessor
        Retires finished sequences and builds their deltas.
    tokenizer : Any
        For the completions' text.
    eos_token_ids : tuple[int, ...]
        The tokens whose summed probability is the stop term.
    """

    def __init__(
        self,
        requests: dict[str, Request],
        scheduler: Scheduler,
        block_manager: BlockManager,
        postprocessor: Postprocessor,
        tokenizer: object,
        eos_token_ids: tuple[int, ...],
    ) -> None:
        self.requests = requests
        self.scheduler = scheduler
        self.block_manager = block_manager
        self.postprocessor = postprocessor
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids

    def read(
        self, items: list[tuple[Sequence, int, int]], logits: torch.Tensor
    ) -> list[StreamDelta]:
        """Read the step's rows of score requests; return the deltas of finished sequences.

        ``items``: ``(seq, first_row, num_rows)`` per scheduled span of a score request whose
        cache already counts the span, ``first_row`` indexing ``logits`` (the span's last
        ``num_rows`` positions).
        """
        rows: list[int] = []
        columns: list[int] = []  # a token row's target, -1 on a stop row
        places: list[tuple[Sequence, int]] = []  # (seq, offset into its reads) per entry
        for seq, first_row, num_rows in items:
            state = seq.score
            first_offset = seq.num_cached_tokens - num_rows - state.start
            for j in range(num_rows):
                offset = first_offset + j
                if state.pending:  # the prompt's last row: every continuation's first token
                    if offset != 0 or num_rows != 1:
                        raise EngineError(
                            f"score request {seq.request_id!r}: the prompt span asked for "
                            f"{num_rows} rows at offset {offset}"
                        )
                    for token_ids in state.pending:
                        rows.append(first_row)
                        columns.append(token_ids[0])
                    places.append((seq, 0))
                    continue
                if not 0 <= offset < state.num_rows:
                    raise EngineError(
                        f"score request {seq.request_id!r}: row offset {offset} outside "
                        f"[0, {state.num_rows})"
                    )
                rows.append(first_row + j)
                columns.append(state.token_ids[offset] if offset < len(state.token_ids) else -1)
                places.append((seq, offset))
        values = self._values(logits, rows, columns)
        deltas: list[StreamDelta] = []
        position = 0
        now = time.monotonic()
        for seq, offset in places:
            state = seq.score
            if state.pending:
                count = len(state.pending)
                self._fork(seq, values[position : position + count])
                position += count
                continue
            if offset < len(state.token_ids):
                state.logprobs[offset] = values[position]
            else:
                state.stop_logprob = values[position]
            position += 1
        for seq, _, _ in items:
            if not seq.score.pending and seq.num_cached_tokens == seq.num_tokens:
                deltas.append(self._finish(seq, now))
        return deltas

    def _values(self, logits: torch.Tensor, rows: list[int], columns: list[int]) -> list[float]:
        """Per entry: the log-probability of its column's token, or of any EOS token (-1)."""
        if not rows:
            return []
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        logprobs = torch.log_softmax(logits.index_select(0, index).float(), dim=-1)
        target = torch.tensor(columns, dtype=torch.long, device=logits.device)
        token_values = logprobs.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
        eos = torch.tensor(self.eos_token_ids, dtype=torch.long, device=logits.device)
        stop_values = torch.logsumexp(logprobs.index_select(1, eos), dim=-1)
        return torch.where(target >= 0, token_values, stop_values).tolist()

    def _fork(self, parent: Sequence, first_logprobs: list[float]) -> None:
        """Give ``parent`` the first continuation and fork one sequence per other one."""
        request = self.requests[parent.request_id]
        continuations, parent.score.pending = parent.score.pending, []
        start = parent.score.start
        children: list[Sequence] = []
        for index, (token_ids, first) in enumerate(zip(continuations, first_logprobs, strict=True)):
            if index == 0:
                seq = parent
            else:
                seq = Sequence(
                    parent.request_id,
                    parent.prompt_token_ids,
                    parent.sampling_params,
                    arrival_time=parent.arrival_time,
                    index=index,
                )
                self.block_manager.fork_inplace(parent, seq)
                request.seqs.append(seq)
                request.detokenizers[seq.seq_id] = IncrementalDetokenizer(
                    self.tokenizer, request.prompt_token_ids
                )
                children.append(seq)
            seq.score = ScoreState(
                start,
                token_ids=list(token_ids),
                logprobs=[first] + [math.nan] * (len(token_ids) - 1),
            )
        for seq, token_ids in zip([parent, *children], continuations, strict=True):
            seq.token_ids.extend(token_ids)
        parent.num_pending_forks = 0
        self.scheduler.insert_running_after(parent, children)

    def _finish(self, seq: Sequence, now: float) -> StreamDelta:
        """Retire a sequence whose rows are all read; its delta carries the whole output."""
        state = seq.score
        seq.logprobs = [
            {token_id: value}
            for token_id, value in zip(state.token_ids, state.logprobs, strict=True)
        ]
        detokenizer = self.requests[seq.request_id].detokenizers[seq.seq_id]
        for token_id in state.token_ids:
            detokenizer.append(token_id, check_stop=False)
        detokenizer.flush()
        self.postprocessor.finish(seq, "stop", now)
        return self.postprocessor.delta(seq)
