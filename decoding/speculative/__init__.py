"""Speculative decoding: proposers (n-gram, self-draft, draft model) and the lossless verifier.

Decoding-level pieces (no engine): `SpeculativeConfig`, prompt lookup (`NgramProposer`), the
adaptive draft count (`AcceptanceTracker`) and the verifier (`Proposal`, `verify_greedy`,
`verify_sampled`). The engine side (proposing inside steps, KV rollback, draft-model caches)
lives in ``formcast.engine.speculator`` and ``formcast.engine.draft_runner``. Medusa heads
are not implemented yet.
"""

from formcast.decoding.speculative.acceptance import AcceptanceTracker, best_num_drafts
from formcast.decoding.speculative.ngram_proposer import NgramProposer
from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.decoding.speculative.verifier import (
    Proposal,
    Verdict,
    kept_length,
    verify_greedy,
    verify_sampled,
)

__all__ = [
    "AcceptanceTracker",
    "NgramProposer",
    "Proposal",
    "SpeculativeConfig",
    "Verdict",
    "best_num_drafts",
    "kept_length",
    "verify_greedy",
    "verify_sampled",
]
