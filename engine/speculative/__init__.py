"""formcast.engine.speculative: chain and tree speculators, draft runner, Medusa heads.

`Speculator` proposes with an n-gram table, a proposer or a draft model (`DraftModel`);
`TreeSpeculator` proposes Medusa token trees (`MedusaHeads`). Both commit verified tokens
through `formcast.engine.postprocess`. Names resolve lazily.
"""

from __future__ import annotations

from formcast.engine.lazy_exports import lazy_exports

_EXPORTS = {
    "Speculator": "formcast.engine.speculative.chain_speculator",
    "SpeculatorStats": "formcast.engine.speculative.chain_speculator",
    "TreeSpeculator": "formcast.engine.speculative.tree_speculator",
    "DraftModel": "formcast.engine.speculative.draft_runner",
    "MedusaHeads": "formcast.engine.speculative.medusa_heads",
    "default_medusa_heads_path": "formcast.engine.speculative.medusa_heads",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
