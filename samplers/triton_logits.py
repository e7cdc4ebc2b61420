"""Fused grammar bitmask + temperature + row statistics, Triton kernel and torch reference.

``mask_scale_logits_inplace(logits, bitmask, temperature, need_logsumexp) -> (row_max,
row_logsumexp)``:

    logits[b, i] = (logits[b, i] if bit i of row b is set else -inf) / temperature[b]

then returns ``max_i logits[b, i]`` and ``logsumexp_i logits[b, i]`` (both -inf for a row left
with no token). The torch reference skips the log-sum-exp pass (returns None) when
``need_logsumexp`` is False; the kernel computes it for free in the same pass. One read and one write of the logits instead of four passes. The Triton
kernel runs one program per row and streams the vocabulary in ``BLOCK`` chunks with an online
(max, sum-exp) per lane; the torch reference is the oracle. `mask_scale_logits_inplace`
dispatches by device: CUDA -> Triton, CPU -> the numba bitmask kernel of `formcast.bitmask`
with the reference's scale and reductions, otherwise torch.
"""

from __future__ import annotations

import torch

from formcast.bitmask import apply_token_bitmask_inplace_cpu, apply_token_bitmask_inplace_torch

try:  # triton is optional on platforms without it; CPU never needs it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None


def mask_scale_logits_inplace_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor | None,
    temperature: torch.Tensor,
    need_logsumexp: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Torch reference; ``logits`` (B, V) float32 contiguous, ``bitmask`` (B, ceil(V/32)) int32
    or None, ``temperature`` (B,) float32 > 0. Returns ``(row_max, row_logsumexp)``, (B,)
    each (``row_logsumexp`` None unless ``need_logsumexp``)."""
    if bitmask is not None:
        apply_token_bitmask_inplace_torch(logits, bitmask)
    return _scale_reduce_inplace(logits, temperature, need_logsumexp)


def mask_scale_logits_inplace_cpu(
    logits: torch.Tensor,
    bitmask: torch.Tensor | None,
    temperature: torch.Tensor,
    need_logsumexp: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """CPU fast path: the mask by formcast's numba kernel, then the reference's scale and
    reductions; same contract as `mask_scale_logits_inplace_torch`."""
    if bitmask is not None:
        apply_token_bitmask_inplace_cpu(logits, bitmask)
    return _scale_reduce_inplace(logits, temperature, need_logsumexp)


def _scale_reduce_inplace(
    logits: torch.Tensor, temperature: torch.Tensor, need_logsumexp: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits.div_(temperature[:, None])
    row_max = logits.amax(dim=-1)  # (B,)
    return row_max, torch.logsumexp(logits, dim=-1) if need_logsumexp else None


if triton is not None:

    @triton.jit
    def _mask_scale_kernel(
        logits_ptr,
        bitmask_ptr,
        temperature_ptr,
        row_max_ptr,
        row_lse_ptr,
        vocab_size,
        logits_stride,
        bitmask_stride,
        HAS_BITMASK: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        row = tl.program_id(0)
        temperature = tl.load(temperature_ptr + row)
        lane_max = tl.full([BLOCK], float("-inf"), tl.float32)  # running max per lane
        lane_sum = tl.zeros([BLOCK], tl.float32)  # sum exp(x - lane_max) per lane
        for start in range(0, vocab_size, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            in_vocab = offsets < vocab_size
            x = tl.load(
                logits_ptr + row * logits_stride + offsets, mask=in_vocab, other=float("-inf")
            )
            if HAS_BITMASK:
                words = tl.load(
                    bitmask_ptr + row * bitmask_stride + offsets // 32, mask=in_vocab, other=0
                )
                is_allowed = ((words >> (offsets % 32)) & 1) != 0
                x = tl.where(is_allowed, x, float("-inf"))
            x = x / temperature
            tl.store(logits_ptr + row * logits_stride + offsets, x, mask=in_vocab)
            new_max = tl.maximum(lane_max, x)
            # rescale the old sum to the new max; a lane still at -inf contributes 0
            safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
            lane_sum = lane_sum * tl.exp(lane_max - safe_max) + tl.exp(x - safe_max)
            lane_max = new_max
        row_max = tl.max(lane_max, axis=0)
        safe_row_max = tl.where(row_max == float("-inf"), 0.0, row_max)
        total = tl.sum(lane_sum * tl.exp(lane_max - safe_row_max), axis=0)
        tl.store(row_max_ptr + row, row_max)
        tl.store(row_lse_ptr + row, safe_row_max + tl.log(total))


def mask_scale_logits_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor | None,
    temperature: torch.Tensor,
    need_logsumexp: bool = True,
    block: int = 16384,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton kernel, same contract as `mask_scale_logits_inplace_torch` (always returns the
    log-sum-exp: it comes from the same pass)."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    num_rows, vocab_size = logits.shape
    row_max = torch.empty(num_rows, dtype=torch.float32, device=logits.device)
    row_lse = torch.empty(num_rows, dtype=torch.float32, device=logits.device)
    if num_rows == 0:
        return row_max, row_lse
    block = min(block, triton.next_power_of_2(vocab_size))
    has_bitmask = bitmask is not None
    temperature = temperature.to(torch.float32).contiguous()  # (B,) read with stride 1
    _mask_scale_kernel[(num_rows,)](
        logits,
        bitmask if has_bitmask else logits,
        temperature,
        row_max,
        row_lse,
        vocab_size,
        logits.stride(0),
        bitmask.stride(0) if has_bitmask else 0,
        HAS_BITMASK=has_bitmask,
        BLOCK=block,
    )
    return row_max, row_lse


def mask_scale_logits_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor | None,
    temperature: torch.Tensor,
    need_logsumexp: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Dispatch by device: CUDA with triton -> kernel, CPU -> the numba mask, otherwise the
    torch reference."""
    if logits.is_cuda and triton is not None:
        return mask_scale_logits_inplace_triton(logits, bitmask, temperature)
    if logits.device.type == "cpu":
        return mask_scale_logits_inplace_cpu(logits, bitmask, temperature, need_logsumexp)
    return mask_scale_logits_inplace_torch(logits, bitmask, temperature, need_logsumexp)
