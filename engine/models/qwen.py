"""Qwen2 and Qwen3: the Llama block with Q/K/V bias (Qwen2) or per-head Q/K RMSNorm (Qwen3).

Both differences are switched on by ``ModelConfig`` (``qkv_bias``, ``qk_norm``), read from the
checkpoint's ``model_type``; the classes exist so the registry names the architecture.
"""

from __future__ import annotations

from formcast.engine.models.config import ModelConfig
from formcast.engine.models.llama import LlamaForCausalLM
from formcast.errors import ModelLoadError


class Qwen2ForCausalLM(LlamaForCausalLM):
    """Qwen2 / Qwen2.5: bias on the Q, K and V projections, none on the output projection."""

    def __init__(self, config: ModelConfig) -> None:
        if not config.qkv_bias:
            raise ModelLoadError("Qwen2 expects Q/K/V projection biases (qkv_bias=True)")
        super().__init__(config)


class Qwen3ForCausalLM(LlamaForCausalLM):
    """Qwen3 (dense): RMSNorm over each head of q and k, applied before RoPE."""

    def __init__(self, config: ModelConfig) -> None:
        if not config.qk_norm:
            raise ModelLoadError("Qwen3 expects per-head Q/K RMSNorm (qk_norm=True)")
        super().__init__(config)
