"""formcast.engine: paged-KV inference engine (continuous batching, prefix cache, chunked prefill).

The loop lives flat in this folder (llm_engine, scheduler, block_manager, sequence, request,
outputs, model_runner, postprocess, structured); ``models/``, ``attention/`` and
``speculative/`` hold our model implementations, the attention backends and the speculators.
``from formcast.engine import LLM`` is resolved lazily, so importing
``formcast.engine.models.loader`` stays light.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "LLM": "formcast.engine.llm_engine",
    "EngineConfig": "formcast.engine.config",
    "RequestOutput": "formcast.engine.outputs",
    "CompletionOutput": "formcast.engine.outputs",
    "StreamDelta": "formcast.engine.outputs",
    "GrammarSpec": "formcast.grammar.spec",
    "EngineStats": "formcast.engine.engine_stats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'formcast.engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
