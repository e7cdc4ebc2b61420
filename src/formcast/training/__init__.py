"""formcast.training: offline work that drives the engine (Medusa head training).

`train_medusa` runs the whole pipeline (prompts, self-generated text, hidden states, heads);
``formcast train-medusa`` is its command line. Names resolve lazily.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "train_medusa": "formcast.training.medusa",
    "train_heads": "formcast.training.medusa",
    "evaluate_heads": "formcast.training.medusa",
    "GeneratedText": "formcast.training.medusa_corpus",
    "HiddenCorpus": "formcast.training.medusa_corpus",
    "HiddenRecorder": "formcast.training.medusa_corpus",
    "generate_text": "formcast.training.medusa_corpus",
    "teacher_force": "formcast.training.medusa_corpus",
    "training_prompts": "formcast.training.medusa_prompts",
    "heldout_prompts": "formcast.training.medusa_prompts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'formcast.training' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
