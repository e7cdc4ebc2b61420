"""Penalties, logit bias and the ``min_tokens`` ban, applied in place on ``(B, V)`` logits.

Order (vLLM's): repetition penalty -> frequency / presence penalties -> logit bias -> ban of
EOS / stop ids below ``min_tokens``. Every edit is sparse (flat ``row * V + token`` indices),
so the cost is proportional to the history length, not to ``B * V``.
"""

from __future__ import annotations

import torch

from formcast.samplers.batch import SamplingBatch


def apply_penalties_inplace(logits: torch.Tensor, batch: SamplingBatch) -> None:
    """Apply the batch's penalties, bias and bans to float32 ``logits`` (B, V) in place."""
    flat = logits.view(-1)  # (B * V,)
    if batch.repetition_ids is not None:
        # CTRL / transformers: l > 0 -> l / penalty, l < 0 -> l * penalty (once per token)
        ids = batch.repetition_ids.flat_ids
        values = flat[ids]
        penalty = batch.repetition_penalty[batch.repetition_ids.row_ids]
        flat[ids] = torch.where(values < 0, values * penalty, values / penalty)
    if batch.frequency_edit is not None:
        flat.index_add_(0, batch.frequency_edit.flat_ids, -batch.frequency_edit.values)
    if batch.bias_edit is not None:
        flat.index_add_(0, batch.bias_edit.flat_ids, batch.bias_edit.values)
    if batch.banned_ids is not None:
        flat[batch.banned_ids.flat_ids] = float("-inf")
