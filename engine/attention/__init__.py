"""formcast.engine.attention: paged attention, step metadata, torch reference and Triton kernels.

Names resolve lazily, so the CPU path never imports triton.
"""

from __future__ import annotations

from formcast.engine.lazy_exports import lazy_exports

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

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
