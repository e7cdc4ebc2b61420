"""Grammar token bitmask application (torch), mirroring grammar's ``apply_token_bitmask_inplace``.

Bitmask layout (the DESIGN contract): int32 ``(B, ceil(V / 32))``; bit ``i % 32`` of word
``i // 32`` set means token ``i`` is allowed. Bits past ``V`` are ignored. samplers/ may not
import grammar/, so the unpacking lives here too; the fused Triton path is in `triton_logits`.
"""

from __future__ import annotations

import torch

_BIT_SHIFTS_CACHE: dict[torch.device, torch.Tensor] = {}


def _bit_shifts(device: torch.device) -> torch.Tensor:
    shifts = _BIT_SHIFTS_CACHE.get(device)
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=device)  # (32,)
        _BIT_SHIFTS_CACHE[device] = shifts
    return shifts


def unpack_token_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool ``(B, V)`` allowed-token table from an int32 ``(B, ceil(V / 32))`` bitmask."""
    # (B, W, 1) >> (32,) -> (B, W, 32); arithmetic shift is fine since we keep bit 0 only
    bits = (bitmask.unsqueeze(-1) >> _bit_shifts(bitmask.device)) & 1
    return bits.view(bitmask.shape[0], -1)[:, :vocab_size].bool()


def apply_token_bitmask_inplace_torch(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set ``logits[b, i] = -inf`` wherever bit ``i`` of row ``b`` is clear; (B, V) in place."""
    is_allowed = unpack_token_bitmask(bitmask, logits.shape[-1])  # (B, V)
    logits.masked_fill_(~is_allowed, float("-inf"))
