"""Exponential-race argmax, Triton kernel and torch reference.

With ``q_i ~ Exp(1)`` i.i.d., ``argmax_i p_i / q_i`` is distributed as ``p``; in log space
``argmax_i (logit_i - log q_i)`` with unnormalised logits (the softmax constant cancels). A
token whose logit is -inf never wins. ``q`` is clamped below at the smallest normal float so
``log q`` is finite (torch's ``exponential_`` may return exactly 0 with probability 2**-24 per
draw; unclamped, that turns a banned token's -inf - (-inf) into NaN, which argmax would pick).
Ties go to the smallest index, as torch.argmax does.

``race_argmax(logits, noise) -> token_ids`` dispatches by device: CUDA -> Triton.
"""

from __future__ import annotations

import torch

try:  # triton is optional on platforms without it; CPU never needs it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

TINY = torch.finfo(torch.float32).tiny


def race_argmax_torch(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Torch reference. ``logits`` (B, V) float32, ``noise`` (B, V) Exp(1) draws, consumed
    (overwritten as scratch). Returns int64 (B,) = argmax(logits - log(max(noise, tiny)))."""
    scores = noise.clamp_min_(TINY).log_()  # (B, V) log q
    torch.sub(logits, scores, out=scores)  # logit - log q; -inf stays -inf
    return scores.argmax(dim=-1)


if triton is not None:

    @triton.jit
    def _race_kernel(
        logits_ptr,
        noise_ptr,
        out_ptr,
        vocab_size,
        logits_stride,
        noise_stride,
        BLOCK: tl.constexpr,
    ):
        row = tl.program_id(0)
        best_score = tl.full([BLOCK], float("-inf"), tl.float32)  # per lane
        best_index = tl.full([BLOCK], 2147483647, tl.int32)
        for start in range(0, vocab_size, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            in_vocab = offsets < vocab_size
            x = tl.load(
                logits_ptr + row * logits_stride + offsets, mask=in_vocab, other=float("-inf")
            )
            q = tl.load(noise_ptr + row * noise_stride + offsets, mask=in_vocab, other=1.0)
            score = x - tl.log(tl.maximum(q, 1.1754943508222875e-38))
            # strict > keeps the earlier (smaller) index of a lane on ties
            is_better = score > best_score
            best_score = tl.where(is_better, score, best_score)
            best_index = tl.where(is_better, offsets, best_index)
        top = tl.max(best_score, axis=0)
        index = tl.min(tl.where(best_score == top, best_index, 2147483647), axis=0)
        tl.store(out_ptr + row, index.to(tl.int64))


def race_argmax_triton(
    logits: torch.Tensor, noise: torch.Tensor, block: int = 16384
) -> torch.Tensor:
    """Triton kernel, same contract as `race_argmax_torch` (noise is not modified)."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    num_rows, vocab_size = logits.shape
    token_ids = torch.empty(num_rows, dtype=torch.int64, device=logits.device)
    if num_rows == 0:
        return token_ids
    block = min(block, triton.next_power_of_2(vocab_size))
    _race_kernel[(num_rows,)](
        logits, noise, token_ids, vocab_size, logits.stride(0), noise.stride(0), BLOCK=block
    )
    return token_ids


def race_argmax(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Dispatch by device: CUDA with triton -> kernel, otherwise the torch reference."""
    if logits.is_cuda and triton is not None:
        return race_argmax_triton(logits, noise)
    return race_argmax_torch(logits, noise)
