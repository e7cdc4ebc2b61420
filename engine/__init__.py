"""formcast.engine: paged-KV inference engine (continuous batching, prefix cache, chunked prefill).

The loop lives flat in this folder (llm_engine, scheduler, block_manager, sequence, request,
outputs, model_runner, postprocess, structured); ``models/``, ``attention/`` and
``speculative/`` hold our model implementations, the attention backends and the speculators.
``from formcast.engine import LLM`` is resolved lazily, so importing
``formcast.engine.models.loader`` stays light.
"""

from __future__ import annotations

from formcast.engine.lazy_exports import lazy_exports

_EXPORTS = {
    "LLM": "formcast.engine.llm_engine",
    "EngineConfig": "formcast.engine.config",
    "RequestOutput": "formcast.engine.outputs",
    "CompletionOutput": "formcast.engine.outputs",
    "StreamDelta": "formcast.engine.outputs",
    "GrammarSpec": "formcast.grammar.spec",
    "EngineStats": "formcast.engine.engine_stats",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
