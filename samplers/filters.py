"""Truncation filters with per-row parameters: top-k -> top-p -> min-p, then typical.

Semantics are transformers' warpers applied in that order, each on the distribution the
previous one left (renormalised), with one deliberate difference: ties with the last kept
token are always kept (transformers' top-p keeps an arbitrary, sort-order dependent subset
of a tie at the cut; its top-k, min-p and typical already keep ties).

top-k, top-p and min-p each keep a *prefix* of the tokens sorted by logit, so together they
are one per-row threshold: keep ``logit >= threshold``. min-p is a closed form on the row max:
``p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p)``. Typical sampling is not a prefix;
it runs afterwards on full rows (sort), as transformers.

Two ways to find the top-k / top-p threshold, with equal results:

- exact (`find_truncation`, the general path): top-k rows read their top ``max_top_k``
  logits, top-p rows the whole sorted row. Fixed shapes, chosen from host knowledge: no
  device value is read, so a GPU step never waits here.
- adaptive (`find_truncation_adaptive_cpu`, the CPU fast path): the top ``C`` logits only
  (``torch.topk``, much cheaper than a full sort on a CPU); a row whose kept prefix is not
  provably inside its candidates (flat distribution, ties at the end) is retried with ``8 C``
  candidates, up to ``V``. Deciding to retry reads a device value, which costs nothing on a
  CPU and a synchronisation on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from formcast.samplers.reductions import row_logsumexp as row_logsumexp_fast

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Truncation:
    """Per-row result of top-k / top-p / min-p on ``R`` rows.

    ``threshold`` (R,): keep tokens with ``logit >= threshold`` (-inf keeps every token).
    ``candidate_logits`` / ``candidate_ids`` (R, C): the top ``C`` logits, sorted descending
    (adaptive path only, else None).
    ``is_covered`` (R,): every kept token is among the candidates, so a row can be sampled
    from its candidates alone. Rows without top-k / top-p are never covered (adaptive path
    only, else None).
    """

    threshold: torch.Tensor
    candidate_logits: torch.Tensor | None
    candidate_ids: torch.Tensor | None
    is_covered: torch.Tensor | None


@dataclass(frozen=True)
class TruncatedRows:
    """Host knowledge of which of ``R`` rows need the sorted logits (top-k or top-p).

    ``positions`` (host) and ``position_ids`` ((P,) int64, same values) index the rows;
    ``max_top_k`` is their largest top-k (0: none); ``any_top_p`` / ``needs_row_logsumexp``:
    some row has top-p / top-p without top-k (normalised over its whole row).
    """

    positions: Sequence[int]
    position_ids: torch.Tensor
    max_top_k: int
    any_top_p: bool
    needs_row_logsumexp: bool


def find_truncation(
    logits: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    row_max: torch.Tensor,
    truncated: TruncatedRows,
) -> Truncation:
    """Exact thresholds of top-k -> top-p -> min-p for temperature-scaled ``logits`` (R, V),
    reading no device value (the general path).

    Parameters
    ----------
    logits : torch.Tensor
        (R, V) float32, after penalties, mask and temperature; every row has a finite entry.
    top_k : torch.Tensor
        (R,) int64, 0 = off (values must be < V).
    top_p, min_p : torch.Tensor
        (R,) float32; 1.0 / 0.0 = off.
    row_max : torch.Tensor
        (R,) float32 row maxima of ``logits``.
    truncated : TruncatedRows
        The rows with top-k or top-p.
    """
    num_rows, vocab_size = logits.shape
    threshold = torch.full((num_rows,), NEG_INF, dtype=torch.float32, device=logits.device)
    if truncated.positions:
        rows = truncated.position_ids
        is_all = len(truncated.positions) == num_rows
        subset = logits if is_all else logits[rows]  # (P, V)
        row_top_k = top_k if is_all else top_k[rows]
        row_top_p = top_p if is_all else top_p[rows]
        row_logsumexp = _row_normaliser(subset, row_max if is_all else row_max[rows], truncated)
        # top-p needs the whole sorted row; top-k alone its first max_top_k values (ties with
        # the k-th are kept by the threshold itself)
        width = vocab_size if truncated.any_top_p else min(vocab_size, truncated.max_top_k)
        if width == vocab_size:
            values = subset.sort(dim=-1, descending=True).values  # (P, V)
        else:
            values = subset.topk(width, dim=-1, sorted=True).values  # (P, K) descending
        row_threshold, _ = _prefix_threshold(
            values, row_top_k, row_top_p, row_logsumexp, width == vocab_size
        )
        if is_all:
            threshold = row_threshold
        else:
            threshold[rows] = row_threshold
    return Truncation(_with_min_p(threshold, row_max, min_p), None, None, None)


def find_truncation_adaptive_cpu(
    logits: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    row_max: torch.Tensor,
    truncated: TruncatedRows,
    num_candidates: int = 256,
) -> Truncation:
    """`find_truncation` from the top ``C`` candidates, widened while a row is not covered
    (the CPU fast path: it reads device values, free on a CPU); also returns the candidates.

    ``num_candidates`` is the first ``C`` (raised to ``max_top_k + 1``).
    """
    num_rows, vocab_size = logits.shape
    device = logits.device
    threshold = torch.full((num_rows,), NEG_INF, dtype=torch.float32, device=device)
    is_covered = torch.zeros(num_rows, dtype=torch.bool, device=device)
    candidate_logits = candidate_ids = None
    if truncated.positions:
        rows = truncated.position_ids  # (S,)
        is_all = len(truncated.positions) == num_rows
        row_logsumexp = torch.zeros(num_rows, dtype=torch.float32, device=device)
        if truncated.needs_row_logsumexp:
            subset = logits if is_all else logits[rows]
            row_logsumexp[rows] = row_logsumexp_fast(subset, row_max[rows])
        width = min(vocab_size, max(num_candidates, truncated.max_top_k + 1))
        while True:
            subset = logits if is_all else logits[rows]  # (S, V)
            values, ids = subset.topk(width, dim=-1, sorted=True)  # (S, C) descending
            row_threshold, row_covered = _prefix_threshold(
                values, top_k[rows], top_p[rows], row_logsumexp[rows], width == vocab_size
            )
            threshold[rows] = row_threshold
            if candidate_logits is None:  # the first, common width serves the fast path
                candidate_logits = torch.full(
                    (num_rows, width), NEG_INF, dtype=torch.float32, device=device
                )
                candidate_ids = torch.zeros((num_rows, width), dtype=torch.int64, device=device)
                candidate_logits[rows] = values
                candidate_ids[rows] = ids
                is_covered[rows] = row_covered
            if bool(row_covered.all()):  # a device read: free on the CPU
                break
            rows = rows[~row_covered]
            is_all = False
            width = min(vocab_size, width * 8)
    threshold = _with_min_p(threshold, row_max, min_p)
    return Truncation(threshold, candidate_logits, candidate_ids, is_covered)


def _row_normaliser(
    logits: torch.Tensor, row_max: torch.Tensor, truncated: TruncatedRows
) -> torch.Tensor:
    """``logsumexp`` of each row of ``logits`` (P, V) when some row's top-p needs it, else 0."""
    if truncated.needs_row_logsumexp:
        return row_logsumexp_fast(logits, row_max)
    return torch.zeros(logits.shape[0], dtype=torch.float32, device=logits.device)


def _with_min_p(
    threshold: torch.Tensor, row_max: torch.Tensor, min_p: torch.Tensor
) -> torch.Tensor:
    # min-p keeps the max, so it composes with the prefix threshold by max()
    min_p_threshold = row_max + torch.log(min_p)  # (R,); min_p = 0 -> -inf
    return torch.maximum(threshold, min_p_threshold)


def _prefix_threshold(
    values: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    row_logsumexp: torch.Tensor,
    is_whole_vocab: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Threshold and coverage of top-k then top-p from the sorted top ``C`` values (S, C)."""
    has_k = top_k > 0  # (S,)
    kth_value = values.gather(1, (top_k.clamp(min=1) - 1).unsqueeze(1))  # (S, 1)
    in_top_k = (values >= kth_value) | ~has_k.unsqueeze(1)  # (S, C), ties with the k-th kept
    # top-p sees the distribution top-k left: renormalise over the top-k set, else the row
    top_k_logsumexp = torch.logsumexp(values.masked_fill(~in_top_k, NEG_INF), dim=-1)
    normaliser = torch.where(has_k, top_k_logsumexp, row_logsumexp)  # (S,)
    probs = (values - normaliser.unsqueeze(1)).exp() * in_top_k  # (S, C)
    # mass strictly before each position; cat keeps it exactly non-decreasing
    mass_before = torch.cat(
        [torch.zeros_like(probs[:, :1]), probs.cumsum(dim=-1)[:, :-1]], dim=-1
    )  # (S, C)
    # transformers removes cum_ascending <= 1 - p, i.e. mass_before >= p
    in_top_p = (mass_before < top_p.unsqueeze(1)) | (top_p >= 1).unsqueeze(1)
    is_kept = in_top_k & in_top_p & (values > NEG_INF)
    is_kept[:, 0] = True
    num_kept = is_kept.sum(dim=-1, keepdim=True)  # (S, 1) a prefix, since values descend
    threshold = values.gather(1, num_kept - 1).squeeze(1)  # (S,)
    # covered: the last candidate is strictly below the threshold, so nothing kept is outside
    is_covered = values[:, -1] < threshold
    if is_whole_vocab:
        is_covered = torch.ones_like(is_covered)
    return threshold, is_covered


def apply_typical_inplace(logits: torch.Tensor, typical_p: torch.Tensor) -> None:
    """Locally typical filtering of transformers' `TypicalLogitsWarper`, per row, in place.

    ``logits`` (R, V) float32 (already truncated: -inf = removed); ``typical_p`` (R,) in (0, 1].
    Keeps the tokens whose surprisal is closest to the entropy until their mass reaches
    ``typical_p`` (ties with the last kept one kept, and always at least one token).
    """
    log_probs = torch.log_softmax(logits, dim=-1)  # (R, V)
    probs = log_probs.exp()
    entropy = -(log_probs * probs).nansum(dim=-1, keepdim=True)  # (R, 1); 0 * -inf ignored
    distance = (-log_probs - entropy).abs()  # (R, V); removed tokens -> +inf
    sorted_distance, order = distance.sort(dim=-1)
    cumulative = logits.gather(1, order).softmax(dim=-1).cumsum(dim=-1)  # (R, V)
    last = (cumulative < typical_p.unsqueeze(1)).sum(dim=1, keepdim=True)
    last.clamp_(max=logits.shape[-1] - 1)
    is_removed_sorted = sorted_distance > sorted_distance.gather(1, last)
    is_removed_sorted[:, 0] = False
    is_removed = is_removed_sorted.scatter(1, order, is_removed_sorted)
    logits.masked_fill_(is_removed, NEG_INF)
