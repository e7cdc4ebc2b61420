"""Lossless speculative-decoding verification (Leviathan et al. 2023, Chen et al. 2023).

For draft position ``j`` with proposed token ``x ~ q_j``: accept with probability
``min(1, p_j(x) / q_j(x))``; at the first rejection emit a token from the recovery
distribution ``norm(max(0, p_j - q_j))`` and stop; if all ``K`` drafts are accepted emit a
bonus token from ``p_K``. Then ``P(emit a at j | prefix) = min(p, q)(a) + max(0, p - q)(a) =
p_j(a)``: the output follows the target exactly. A point-mass draft (n-gram, greedy proposers;
``draft_probs=None``) is ``q_j = onehot(x)``: accept with ``p_j(x)``, recover from ``p_j``
without ``x``. A draft id of -1 marks a missing proposal (rows with fewer drafts): that
position is never accepted and samples from ``p_j`` directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from formcast.samplers.inputs import SamplerInputError
from formcast.samplers.noise import exponential_noise
from formcast.samplers.triton_race import race_argmax


def rejection_probabilities(
    target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_token_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact acceptance probabilities and recovery distributions at every draft position.

    Parameters
    ----------
    target_probs : torch.Tensor
        (B, K + 1, V) target probabilities (the last position is the bonus distribution).
    draft_probs : torch.Tensor | None
        (B, K, V) draft probabilities, or None for a point-mass draft.
    draft_token_ids : torch.Tensor
        (B, K) int64 proposals in ``[0, V)``, or -1 for "no proposal".

    Returns
    -------
    accept_probs : torch.Tensor
        (B, K) ``min(1, p(x) / q(x))`` (0 where the id is -1).
    recovery_probs : torch.Tensor
        (B, K, V) normalised ``max(0, p - q)`` (``p`` itself where that is all zero or the id
        is -1).
    """
    num_rows, num_draft, vocab_size = _check_shapes(target_probs, draft_probs, draft_token_ids)
    flat_target = _as_float(target_probs[:, :num_draft].reshape(-1, vocab_size))
    flat_draft = None if draft_probs is None else _as_float(draft_probs.reshape(-1, vocab_size))
    flat_ids = draft_token_ids.reshape(-1)
    accept = _accept_probs(flat_target, flat_draft, flat_ids)
    recovery = _recovery_probs(flat_target, flat_draft, flat_ids)
    return accept.view(num_rows, num_draft), recovery.view(num_rows, num_draft, vocab_size)


def rejection_sample(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    generators: Sequence[torch.Generator | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify ``K`` draft tokens per row; the emitted tokens follow the target exactly.

    Parameters
    ----------
    target_probs : torch.Tensor
        (B, K + 1, V) target probabilities at the ``K`` draft positions plus the bonus one.
    draft_probs : torch.Tensor | None
        (B, K, V) the draft's probabilities, or None for a point-mass draft.
    draft_token_ids : torch.Tensor
        (B, K) int64 proposals (-1 = no proposal at this position).
    generators : Sequence[torch.Generator | None] | None
        Per-row generators; a seeded row draws its K uniforms then V race noises from its own.

    Returns
    -------
    output_token_ids : torch.Tensor
        (B, K + 1) int64: accepted drafts, then the recovered or bonus token, then -1.
    num_accepted : torch.Tensor
        (B,) int64 accepted drafts per row; the row emits ``num_accepted + 1`` tokens.
    """
    num_rows, num_draft, vocab_size = _check_shapes(target_probs, draft_probs, draft_token_ids)
    device = target_probs.device
    if generators is None:
        generators = [None] * num_rows
    if len(generators) != num_rows:
        raise SamplerInputError(f"generators has {len(generators)} rows, expected {num_rows}")
    target = _as_float(target_probs)
    draft = None if draft_probs is None else _as_float(draft_probs)
    ids = draft_token_ids.to(device=device, dtype=torch.int64)

    uniforms = torch.rand((num_rows, num_draft), device=device, dtype=target.dtype)  # (B, K)
    for row, generator in enumerate(generators):
        if generator is not None:
            uniforms[row] = torch.rand(num_draft, device=device, generator=generator)
    accept = _accept_probs(
        target[:, :num_draft].reshape(-1, vocab_size),
        None if draft is None else draft.reshape(-1, vocab_size),
        ids.reshape(-1),
    ).view(num_rows, num_draft)
    is_accepted = uniforms < accept  # (B, K); P(u < a) = a for u ~ U[0, 1)
    num_accepted = is_accepted.long().cumprod(dim=1).sum(dim=1)  # (B,) leading run

    # one sample per row: recovery at the first rejection, or the bonus after K accepts
    rows = torch.arange(num_rows, device=device)
    position = num_accepted.clamp(max=max(num_draft - 1, 0))
    final_probs = target[rows, num_accepted]  # (B, V)
    if num_draft > 0:
        recovery = _recovery_probs(
            target[rows, position],
            None if draft is None else draft[rows, position],
            ids[rows, position],
        )
        is_rejected = (num_accepted < num_draft).unsqueeze(1)
        final_probs = torch.where(is_rejected, recovery, final_probs)
    is_seeded = torch.tensor([g is not None for g in generators], device=device)
    noise = exponential_noise(rows, is_seeded, generators, vocab_size)
    final_ids = race_argmax(final_probs.log().float(), noise)  # (B,) exact draw from final_probs

    columns = torch.arange(num_draft + 1, device=device)
    padded_ids = torch.cat([ids, torch.full_like(ids[:, :1], -1)], dim=1)  # (B, K + 1)
    output = torch.where(columns < num_accepted.unsqueeze(1), padded_ids, -1)
    output.scatter_(1, num_accepted.unsqueeze(1), final_ids.unsqueeze(1))
    return output, num_accepted


def _as_float(probs: torch.Tensor) -> torch.Tensor:
    """float64 stays float64 (exact tests), everything else computes in float32."""
    return probs if probs.dtype == torch.float64 else probs.float()


def _accept_probs(
    target: torch.Tensor, draft: torch.Tensor | None, ids: torch.Tensor
) -> torch.Tensor:
    """(N,) ``min(1, p(x) / q(x))`` for rows (N, V); 0 for id -1; ``q(x) = 0 < p(x)`` -> 1."""
    is_proposed = ids >= 0
    safe_ids = ids.clamp(min=0).unsqueeze(1)
    p_x = target.gather(1, safe_ids).squeeze(1)
    if draft is None:
        ratio = p_x.clamp(max=1.0)  # q(x) = 1
    else:
        q_x = draft.gather(1, safe_ids).squeeze(1)
        ratio = torch.where(q_x > 0, (p_x / q_x.clamp(min=1e-38)).clamp(max=1.0), (p_x > 0).to(p_x))
    return torch.where(is_proposed, ratio, torch.zeros_like(ratio))


def _recovery_probs(
    target: torch.Tensor, draft: torch.Tensor | None, ids: torch.Tensor
) -> torch.Tensor:
    """(N, V) normalised ``max(0, p - q)``; ``p`` where that has no mass or id is -1."""
    is_proposed = (ids >= 0).unsqueeze(1)
    if draft is None:
        residual = target.scatter(1, ids.clamp(min=0).unsqueeze(1), 0.0)  # p - onehot(x), > 0
    else:
        residual = (target - draft).clamp(min=0.0)
    mass = residual.sum(dim=1, keepdim=True)  # (N, 1)
    usable = is_proposed & (mass > 0)
    return torch.where(usable, residual / mass.clamp(min=1e-38), target)


def _check_shapes(
    target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_token_ids: torch.Tensor
) -> tuple[int, int, int]:
    if target_probs.dim() != 3:
        raise SamplerInputError(
            f"target_probs must be (B, K + 1, V), got shape {tuple(target_probs.shape)}"
        )
    num_rows, num_positions, vocab_size = target_probs.shape
    num_draft = num_positions - 1
    if tuple(draft_token_ids.shape) != (num_rows, num_draft):
        raise SamplerInputError(
            f"draft_token_ids shape {tuple(draft_token_ids.shape)} must be ({num_rows}, "
            f"{num_draft}) to match target_probs {tuple(target_probs.shape)}"
        )
    if draft_probs is not None and tuple(draft_probs.shape) != (num_rows, num_draft, vocab_size):
        raise SamplerInputError(
            f"draft_probs shape {tuple(draft_probs.shape)} must be ({num_rows}, {num_draft}, "
            f"{vocab_size})"
        )
    if draft_token_ids.numel() and (
        int(draft_token_ids.min()) < -1 or int(draft_token_ids.max()) >= vocab_size
    ):
        raise SamplerInputError(
            f"draft_token_ids must lie in [0, {vocab_size}) or be -1 (no proposal)"
        )
    return num_rows, num_draft, vocab_size
