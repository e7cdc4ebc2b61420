"""`SamplerInputError` and the shape / dtype checks of tensors handed to the sampler.

Bad tensors come from the caller's code (engine, decoding loop), not from a user's parameters,
so they get their own error, still a `FormcastError` and a `ValueError`.
"""

from __future__ import annotations

import torch

from formcast.errors import FormcastError


class SamplerInputError(FormcastError, ValueError):
    """A tensor passed to the sampler has the wrong shape, dtype or values; says which."""


def check_logits(logits: torch.Tensor, num_rows: int, vocab_size: int) -> None:
    """Require floating logits of shape ``(num_rows, vocab_size)``."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise SamplerInputError(f"logits must be a floating torch.Tensor, got {type(logits)!r}")
    if tuple(logits.shape) != (num_rows, vocab_size):
        raise SamplerInputError(
            f"logits shape {tuple(logits.shape)} does not match the batch "
            f"({num_rows} rows, vocab_size {vocab_size})"
        )


def check_bitmask(bitmask: torch.Tensor, num_rows: int, vocab_size: int) -> None:
    """Require an int32 bitmask of shape ``(num_rows, ceil(vocab_size / 32))``."""
    num_words = (vocab_size + 31) // 32
    if not isinstance(bitmask, torch.Tensor) or bitmask.dtype != torch.int32:
        raise SamplerInputError(
            f"token_bitmask must be an int32 torch.Tensor, got "
            f"{getattr(bitmask, 'dtype', type(bitmask))!r}"
        )
    if tuple(bitmask.shape) != (num_rows, num_words):
        raise SamplerInputError(
            f"token_bitmask shape {tuple(bitmask.shape)} must be ({num_rows}, {num_words}) "
            f"= (rows, ceil(vocab_size / 32)) for vocab_size {vocab_size}"
        )
