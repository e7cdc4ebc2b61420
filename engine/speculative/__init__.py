"""formcast.engine.speculative: chain and tree speculators, draft runner, Medusa heads.

`Speculator` proposes with an n-gram table, a proposer or a draft model (`DraftModel`);
`TreeSpeculator` proposes Medusa token trees (`MedusaHeads`). Both commit verified tokens
through `formcast.engine.postprocess`. Names resolve lazily.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Speculator": "formcast.engine.speculative.chain_speculator",
    "SpeculatorStats": "formcast.engine.speculative.chain_speculator",
    "TreeSpeculator": "formcast.engine.speculative.tree_speculator",
    "DraftModel": "formcast.engine.speculative.draft_runner",
    "MedusaHeads": "formcast.engine.speculative.medusa_heads",
    "default_medusa_heads_path": "formcast.engine.speculative.medusa_heads",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'formcast.engine.speculative' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
