"""The verifier: which proposed tokens a target forward pass keeps, and the token it adds.

A *proposal* continues a sequence with tokens of two kinds: **drafts** (from a proposer, to be
verified) and **forced** tokens (grammar jump-forward text that follows an accepted draft; the
plain decoder would append them without sampling, so they are free drafts that need no
verification). The target computes the whole proposal in one span and returns logits rows
``0 .. m`` (``m`` = proposal length): row ``r`` is the next-token distribution after the
first ``r`` proposal tokens. Only the rows *before each draft* and the last row are used, the
*sample rows* ``[pos(d_1), ..., pos(d_K), m]``.

Greedy: draft ``d_j`` is kept while it equals the argmax of its row; at the first mismatch the
argmax is emitted instead; if every draft matches, the argmax of row ``m`` is the bonus token.
That is exactly what one-token-at-a-time greedy decoding emits.

Sampling: `formcast.samplers.rejection_sample` (Leviathan et al.) over the sample rows, so the
emitted tokens follow the target distribution exactly. A forced token is kept iff the draft
before it was accepted (the plain decoder would have appended it at that point).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.nn.utils.rnn import pad_sequence

from formcast.errors import EngineError
from formcast.samplers import rejection_sample


@dataclass
class Proposal:
    """Tokens proposed after a sequence's committed tokens.

    Attributes
    ----------
    token_ids : list[int]
        Drafts and forced tokens, in order (never starts with a forced token).
    is_forced : list[bool]
        Per token: True for a jump-forward token (kept without verification).
    draft_probs : list[torch.Tensor]
        One ``(V,)`` draft distribution per draft (empty for point-mass proposers).
    """

    token_ids: list[int] = field(default_factory=list)
    is_forced: list[bool] = field(default_factory=list)
    draft_probs: list[torch.Tensor] = field(default_factory=list)

    def append(self, token_id: int, is_forced: bool, probs: torch.Tensor | None = None) -> None:
        """Add one token (``probs``: the draft's distribution it was sampled from)."""
        self.token_ids.append(int(token_id))
        self.is_forced.append(is_forced)
        if probs is not None:
            self.draft_probs.append(probs)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def draft_positions(self) -> list[int]:
        """Indices (into ``token_ids``) of the drafts."""
        return [i for i, forced in enumerate(self.is_forced) if not forced]

    @property
    def num_drafts(self) -> int:
        """Number of drafts ``K`` (forced tokens excluded)."""
        return len(self.is_forced) - sum(self.is_forced)

    @property
    def sample_rows(self) -> list[int]:
        """Logits rows used by verification: one before each draft, then the last (``K + 1``)."""
        return self.draft_positions + [len(self.token_ids)]

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (and the distributions of the drafts among them)."""
        num_drafts = sum(1 for forced in self.is_forced[:length] if not forced)
        del self.token_ids[length:]
        del self.is_forced[length:]
        del self.draft_probs[num_drafts:]


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one proposal.

    Attributes
    ----------
    num_accepted : int
        Drafts accepted (``0 .. K``).
    num_kept : int
        Proposal tokens kept: the accepted drafts and the forced tokens between them.
    final_token_id : int
        The token the target adds after the kept ones (recovery or bonus).
    final_row : int
        Index into ``sample_rows`` of the distribution ``final_token_id`` came from.
    """

    num_accepted: int
    num_kept: int
    final_token_id: int

    @property
    def final_row(self) -> int:
        """Index into the proposal's ``sample_rows`` (equals ``num_accepted``)."""
        return self.num_accepted


def kept_length(proposal: Proposal, num_accepted: int) -> int:
    """Proposal tokens kept when the first ``num_accepted`` drafts are accepted."""
    positions = proposal.draft_positions
    if num_accepted < len(positions):
        return positions[num_accepted]
    return len(proposal.token_ids)


def verify_greedy(proposal: Proposal, target_token_ids: Sequence[int]) -> Verdict:
    """Greedy verification against the target's argmax at each sample row.

    Parameters
    ----------
    proposal : Proposal
        The proposal (``K`` drafts).
    target_token_ids : Sequence[int]
        ``K + 1`` argmax tokens of the processed target logits at ``proposal.sample_rows``.
    """
    positions = proposal.draft_positions
    if len(target_token_ids) != len(positions) + 1:
        raise EngineError(
            f"verify_greedy: {len(target_token_ids)} target tokens for {len(positions)} drafts"
        )
    for j, position in enumerate(positions):
        if int(target_token_ids[j]) != proposal.token_ids[position]:
            return Verdict(j, position, int(target_token_ids[j]))
    return Verdict(len(positions), len(proposal.token_ids), int(target_token_ids[-1]))


def verify_sampled(
    proposals: Sequence[Proposal],
    target_probs: Sequence[torch.Tensor],
    generators: Sequence[torch.Generator | None] | None = None,
) -> list[Verdict]:
    """Exact rejection-sampling verification of a batch of proposals.

    Parameters
    ----------
    proposals : Sequence[Proposal]
        ``B`` proposals with ``K_i >= 1`` drafts each.
    target_probs : Sequence[torch.Tensor]
        Per proposal ``(K_i + 1, V)``: the target's sampling distribution (penalties, mask,
        temperature, truncation applied) at its ``sample_rows``.
    generators : Sequence[torch.Generator | None] | None
        Per-proposal generators (seeded requests).

    Returns
    -------
    list[Verdict]
        Per proposal; the emitted tokens (kept proposal tokens, then the final token) follow
        the target's distribution exactly.
    """
    if len(proposals) != len(target_probs):
        raise EngineError(
            f"verify_sampled: {len(target_probs)} target rows for {len(proposals)} proposals"
        )
    if not proposals:
        return []
    num_drafts = [p.num_drafts for p in proposals]
    vocab_size = target_probs[0].shape[-1]
    device = target_probs[0].device
    dtype = target_probs[0].dtype
    for b, (k, probs) in enumerate(zip(num_drafts, target_probs, strict=True)):
        if k < 1 or tuple(probs.shape) != (k + 1, vocab_size):
            raise EngineError(
                f"verify_sampled: proposal {b} has {k} drafts but target rows {tuple(probs.shape)}"
            )
    # rows past a proposal's K_i + 1 are zero padding: a draft id of -1 at K_i is never
    # accepted, so num_accepted <= K_i and only rows 0 .. K_i are ever read
    target = pad_sequence(list(target_probs), batch_first=True)  # (B, Kmax + 1, V)
    draft_lists = [
        torch.tensor([p.token_ids[i] for i in p.draft_positions], dtype=torch.int64)
        for p in proposals
    ]
    ids = pad_sequence(draft_lists, batch_first=True, padding_value=-1).to(device)  # (B, Kmax)
    draft = None
    if any(p.draft_probs for p in proposals):
        rows = []
        for proposal, drafts in zip(proposals, draft_lists, strict=True):
            if proposal.draft_probs:
                rows.append(torch.stack(proposal.draft_probs).to(device=device, dtype=dtype))
            else:  # a point-mass proposal among model drafts: q = onehot(draft)
                onehot = torch.zeros((len(drafts), vocab_size), dtype=dtype, device=device)
                onehot[torch.arange(len(drafts)), drafts.to(device)] = 1.0
                rows.append(onehot)
        draft = pad_sequence(rows, batch_first=True)  # (B, Kmax, V)
    output, num_accepted = rejection_sample(target, draft, ids, generators)
    verdicts = []
    for b, proposal in enumerate(proposals):
        accepted = int(num_accepted[b])
        final = int(output[b, accepted])
        verdicts.append(Verdict(accepted, kept_length(proposal, accepted), final))
    return verdicts
