"""formcast.training: offline work that drives the engine (Medusa head training).

`train_medusa` runs the whole pipeline (prompts, self-generated text, hidden states, heads);
``formcast train-medusa`` is its command line. Names resolve lazily.
"""

from __future__ import annotations

from formcast.engine.lazy_exports import lazy_exports

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

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
