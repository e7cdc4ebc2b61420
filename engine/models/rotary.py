"""Rotary position embedding (RoPE), with the linear and Llama-3 frequency scalings.

``inv_freq[i] = theta^(-2i/d)``; a token at position ``p`` rotates the pair
``(x[i], x[i + d/2])`` by the angle ``p * inv_freq[i]`` (the "rotate half" layout that
transformers uses for Llama and Qwen). Cos/sin tables are precomputed in float32 for every
position up to the model's context length and indexed by position each step.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from formcast.errors import ModelLoadError


def rope_inv_freq(head_dim: int, theta: float, scaling: dict[str, Any]) -> torch.Tensor:
    """Inverse frequencies ``(head_dim // 2,)`` in float32, after the configured scaling."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rope_type = scaling.get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / float(scaling["factor"])
    if rope_type == "llama3":
        return _llama3_inv_freq(inv_freq, scaling)
    raise ModelLoadError(f"rope_type {rope_type!r} is not supported (default, linear, llama3)")


def _llama3_inv_freq(inv_freq: torch.Tensor, scaling: dict[str, Any]) -> torch.Tensor:
    # Llama 3.1: long wavelengths are divided by `factor`, short ones kept, the band in
    # between interpolated smoothly in 1/wavelength.
    factor = float(scaling["factor"])
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context_len = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding:
    """Precomputed float32 cos/sin tables ``(P, D)``; calling it rotates q and k.

    A plain object (not a module) so a model built on the meta device gets real tables.
    """

    def __init__(
        self,
        head_dim: int,
        max_positions: int,
        theta: float,
        scaling: dict[str, Any],
        device: torch.device | str = "cpu",
    ) -> None:
        inv_freq = rope_inv_freq(head_dim, theta, scaling)
        positions = torch.arange(max_positions, dtype=torch.float32)
        freqs = positions[:, None] * inv_freq[None, :]  # (P, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (P, D)
        self.cos_table = emb.cos().to(device)
        self.sin_table = emb.sin().to(device)

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cos and sin ``(T, 1, D)`` for token ``positions (T,)``, computed once per step."""
        cos = self.cos_table[positions].to(dtype)[:, None, :]
        sin = self.sin_table[positions].to(dtype)[:, None, :]
        return cos, sin


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every head of ``x (T, H, D)``: ``x * cos + rotate_half(x) * sin``.

    The attention rotates its queries and keys in one call (``H = Hq + Hkv``): half the
    operations of rotating them apart, which at batch 1 on CPU are as many as the matmuls.
    """
    return x * cos + _rotate_half(x) * sin


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
