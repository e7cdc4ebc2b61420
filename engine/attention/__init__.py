"""formcast.engine.attention: paged attention, step metadata, torch reference and Triton kernels.

Names resolve lazily, so the CPU path never imports triton.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "AttentionMetadata": "formcast.engine.attention.metadata",
    "DecodeGroup": "formcast.engine.attention.metadata",
    "PrefillSegment": "formcast.engine.attention.metadata",
    "TreeMetadata": "formcast.engine.attention.metadata",
    "is_decode_like": "formcast.engine.attention.metadata",
    "TorchAttention": "formcast.engine.attention.torch_backend",
    "TritonAttention": "formcast.engine.attention.triton_backend",
    "paged_tree_attention": "formcast.engine.attention.tree",
    "paged_tree_attention_torch": "formcast.engine.attention.tree",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'formcast.engine.attention' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
