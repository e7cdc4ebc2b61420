"""formcast.engine.models: our model implementations (Llama, Qwen2, Qwen3), weights and loading.

Names resolve lazily, so ``formcast.engine.models.loader`` imports without torch models.
"""

from __future__ import annotations

from formcast.engine.lazy_exports import lazy_exports

_EXPORTS = {
    "LlamaForCausalLM": "formcast.engine.models.llama",
    "Qwen2ForCausalLM": "formcast.engine.models.qwen",
    "Qwen3ForCausalLM": "formcast.engine.models.qwen",
    "ModelConfig": "formcast.engine.models.config",
    "build_model": "formcast.engine.models.weights",
    "load_weights": "formcast.engine.models.weights",
    "RotaryEmbedding": "formcast.engine.models.rotary",
    "LMHead": "formcast.engine.models.linear",
    "DEFAULT_MODEL": "formcast.engine.models.loader",
    "resolve_model_path": "formcast.engine.models.loader",
    "load_tokenizer": "formcast.engine.models.loader",
    "load_hf_model": "formcast.engine.models.loader",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
