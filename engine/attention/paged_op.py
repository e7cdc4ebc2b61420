"""``formcast::paged_attention``: a step's paged attention as one opaque op, for forwards that
are compiled (inductor) or captured (CUDA graphs).

Such a forward sees only tensors with fixed shapes: ``q (T, Hq, D)``, ``k, v (T, Hkv, D)`` and
the layer's index. The step's `AttentionMetadata` and the layers (their caches, backend and
scale) are set around the call by `attention_step` (thread-local, so a draft model's step in
another thread cannot see them). Rows past the step's real tokens (``meta.slot_mapping``'s
length) are padding of a batch-size bucket: they are neither stored nor attended, and their
output is zero. The op writes the KV cache, which is not among its arguments: nothing can
reorder it across layers, since each layer's input depends on the previous layer's output.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import torch

from formcast.engine.attention.metadata import AttentionMetadata
from formcast.engine.opaque_ops import opaque_op
from formcast.errors import EngineError


class AttentionLayer(Protocol):
    """What the op reads of a layer: its cache views, backend and softmax scale."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    scale: float
    backend: object


class _Step(threading.local):
    def __init__(self) -> None:
        self.meta: AttentionMetadata | None = None
        self.layers: Sequence[AttentionLayer] = ()


_STEP = _Step()


@contextmanager
def attention_step(meta: AttentionMetadata, layers: Sequence[AttentionLayer]) -> Iterator[None]:
    """Make ``meta`` and ``layers`` the step that `paged_attention` calls of this thread read."""
    saved = _STEP.meta, _STEP.layers
    _STEP.meta, _STEP.layers = meta, layers
    try:
        yield
    finally:
        _STEP.meta, _STEP.layers = saved


def _paged_attention_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_index: int
) -> torch.Tensor:
    return q.new_empty(q.shape)


@opaque_op(
    "formcast::paged_attention",
    "(Tensor q, Tensor k, Tensor v, int layer_index) -> Tensor",
    _paged_attention_fake,
)
def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_index: int
) -> torch.Tensor:
    """Attention output ``(T, Hq, D)`` of layer ``layer_index`` in the current `attention_step`;
    stores the step's new K/V first. Rows past the step's tokens are zero."""
    meta = _STEP.meta
    if meta is None:
        raise EngineError("formcast::paged_attention was called outside attention_step()")
    layer = _STEP.layers[layer_index]
    num_tokens = meta.slot_mapping.shape[0]
    out = layer.backend.forward(
        q[:num_tokens],
        k[:num_tokens],
        v[:num_tokens],
        layer.k_cache,
        layer.v_cache,
        meta,
        layer.scale,
    )
    if num_tokens == q.shape[0]:
        return out.contiguous()
    padded = q.new_zeros(q.shape)
    padded[:num_tokens] = out
    return padded
