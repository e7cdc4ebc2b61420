"""Test helper: record the logits an LLM computes, per (request, completion, position)."""

from __future__ import annotations

import torch


class LogitRecorder:
    """Wrap ``llm``'s scheduler and runner to keep every logits row the engine computes.

    With ``all_positions`` every new token's position gets a logits row (the runner's
    multi-position path, as speculative verification uses it), not only the span's last.
    ``records`` is a list of ``(request_id, completion index, position, logits (V,))``;
    position ``p``'s row predicts token ``p + 1`` from tokens ``0..p``.
    """

    def __init__(self, llm, all_positions: bool = False) -> None:
        self.records: list[tuple[str, int, int, torch.Tensor]] = []
        schedule = llm.scheduler.schedule
        execute = llm.runner.execute

        def recording_schedule():
            plan = schedule()
            if all_positions:
                for item in plan.scheduled:
                    item.num_logits = item.num_new_tokens
            return plan

        def recording_execute(scheduled, copies=()):
            logits = execute(scheduled, copies)
            row = 0
            for item in scheduled:
                seq = item.seq
                first = seq.num_cached_tokens + item.num_new_tokens - item.num_logits
                for k in range(item.num_logits):
                    self.records.append((seq.request_id, seq.index, first + k, logits[row].clone()))
                    row += 1
            return logits

        llm.scheduler.schedule = recording_schedule
        llm.runner.execute = recording_execute

    def max_abs_diff(self, outputs, hf_model) -> float:
        """Largest |ours - transformers| over all records (reference: one forward per text)."""
        sequences = {}
        for out in outputs:
            for completion in out.outputs:
                sequences[(out.request_id, completion.index)] = (
                    out.prompt_token_ids + completion.token_ids
                )
        worst = 0.0
        by_seq: dict[tuple[str, int], list[tuple[int, torch.Tensor]]] = {}
        for request_id, index, position, row in self.records:
            by_seq.setdefault((request_id, index), []).append((position, row))
        with torch.no_grad():
            for key, rows in by_seq.items():
                ids = torch.tensor([sequences[key]])
                reference = hf_model(ids).logits[0]
                for position, row in rows:
                    diff = (row - reference[position]).abs().max().item()
                    worst = max(worst, diff)
        return worst
