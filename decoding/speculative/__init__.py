"""Speculative decoding: proposers (n-gram, self-draft, draft model) and the lossless verifier.

Decoding-level pieces (no engine): `SpeculativeConfig`, prompt lookup (`NgramProposer`), the
adaptive draft count (`AcceptanceTracker`), the chain verifier (`Proposal`, `verify_greedy`,
`verify_sampled`), and for Medusa tree speculation the token trees (`TreeTopology`,
`DraftTree`, `build_tree`) and the tree verifier (`verify_tree_greedy`, exact
`verify_tree_sampled`, lossy `verify_tree_typical`). The engine side (proposing inside steps,
KV rollback, draft-model caches, Medusa heads) lives in ``formcast.engine.speculative``
(chain and tree speculators, draft runner, Medusa heads), tree attention in
``formcast.engine.attention.tree``.
"""

from formcast.decoding.speculative.acceptance import AcceptanceTracker, best_num_drafts
from formcast.decoding.speculative.draft_tree import (
    DEFAULT_TREE_CHOICES,
    DraftTree,
    TreeTopology,
    build_tree,
)
from formcast.decoding.speculative.ngram_proposer import NgramProposer
from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.decoding.speculative.tree_verifier import (
    TreeVerdict,
    recursive_rejection,
    verify_tree_greedy,
    verify_tree_sampled,
    verify_tree_typical,
)
from formcast.decoding.speculative.verifier import (
    Proposal,
    Verdict,
    kept_length,
    verify_greedy,
    verify_sampled,
)

__all__ = [
    "DEFAULT_TREE_CHOICES",
    "AcceptanceTracker",
    "DraftTree",
    "TreeTopology",
    "TreeVerdict",
    "build_tree",
    "recursive_rejection",
    "verify_tree_greedy",
    "verify_tree_sampled",
    "verify_tree_typical",
    "NgramProposer",
    "Proposal",
    "SpeculativeConfig",
    "Verdict",
    "best_num_drafts",
    "kept_length",
    "verify_greedy",
    "verify_sampled",
]
