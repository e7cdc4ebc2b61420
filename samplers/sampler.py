"""`Sampler`: one batched sampling step over ``(B, V)`` logits with per-row parameters.

Stage order (DESIGN): penalties and bias -> grammar bitmask -> temperature -> top-k -> top-p
-> min-p -> typical -> sample. Greedy rows (temperature 0) take the argmax after the bitmask.
Sampled rows use the exponential race ``argmax(p / q)``, ``q ~ Exp(1)``; a row whose kept
tokens all lie in its top-``C`` candidates races over those alone (the common case with any
top-k / top-p), the others race over the full vocabulary. No stage loops over rows in
Python; only the noise of seeded rows is drawn row by row (from each row's own generator).

Log-probabilities, per row (``SamplingParams.logprobs_mode``, or the sampler's
``logprobs_mode`` for rows that leave it None): ``"raw"`` (the default, as vLLM) reports the
model's own distribution, ``log_softmax`` of the input logits before any processing;
``"processed"`` reports the distribution the token was drawn from (penalties, bias, grammar
mask, temperature, truncation; greedy rows at temperature 1, untruncated). Tokens removed by
the processing have log-probability ``-inf`` there; they sort last among the top tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch

from formcast.errors import DeadEndError
from formcast.samplers.batch import SamplingBatch, SparseLogitEdit
from formcast.samplers.filters import NEG_INF, apply_typical_inplace, find_truncation
from formcast.samplers.inputs import SamplerInputError, check_bitmask, check_logits
from formcast.samplers.noise import exponential_noise
from formcast.samplers.params import LOGPROBS_MODES, SamplingParams
from formcast.samplers.penalties import apply_penalties_inplace
from formcast.samplers.reductions import row_logsumexp as row_logsumexp_fast
from formcast.samplers.triton_logits import mask_scale_logits_inplace
from formcast.samplers.triton_race import race_argmax

LogprobsMode = Literal["raw", "processed"]


@dataclass(frozen=True)
class SamplerOutput:
    """Result of one step.

    Attributes
    ----------
    token_ids : torch.Tensor
        (B,) int64 chosen tokens.
    logprobs : torch.Tensor
        (B,) float32 log-probability of the chosen token (each row's distribution per its
        logprobs mode). Always filled, for every row.
    top_logprob_ids, top_logprobs : torch.Tensor | None
        (B, K) int64 / float32, the K most likely tokens, ``K = max(params.logprobs)`` over
        the batch (rows that asked fewer slice their own); None when no row asked K > 0. In
        ``"processed"`` rows, tokens the processing removed come last with ``-inf``.
    """

    token_ids: torch.Tensor
    logprobs: torch.Tensor
    top_logprob_ids: torch.Tensor | None
    top_logprobs: torch.Tensor | None


class Sampler:
    """Batched sampler; call it once per step. Holds a reusable float32 workspace, so one
    instance must not be called from two threads at once.

    Parameters
    ----------
    logprobs_mode : {"raw", "processed"}
        Which distribution `SamplerOutput.logprobs` describes for rows whose
        ``SamplingParams.logprobs_mode`` is None (see module docstring).
    num_candidates : int
        First candidate count for top-k / top-p (raised automatically when needed).
    """

    def __init__(self, logprobs_mode: LogprobsMode = "raw", num_candidates: int = 256) -> None:
        if logprobs_mode not in LOGPROBS_MODES:
            raise SamplerInputError(
                f"logprobs_mode must be 'raw' or 'processed', got {logprobs_mode!r}"
            )
        if not isinstance(num_candidates, int) or num_candidates < 1:
            raise SamplerInputError(f"num_candidates must be an int >= 1, got {num_candidates!r}")
        self.logprobs_mode = logprobs_mode
        self.num_candidates = num_candidates
        self._workspace: torch.Tensor | None = None

    def __call__(
        self,
        logits: torch.Tensor,
        batch: SamplingBatch,
        token_bitmask: torch.Tensor | None = None,
    ) -> SamplerOutput:
        """Sample one token per row.

        Parameters
        ----------
        logits : torch.Tensor
            (B, V) float32 / bf16 / fp16 model logits; not modified.
        batch : SamplingBatch
            The step's per-row parameters.
        token_bitmask : torch.Tensor | None
            (B, ceil(V / 32)) int32 grammar mask; bit ``i % 32`` of word ``i // 32`` set =
            token ``i`` allowed.

        Raises
        ------
        DeadEndError
            If a row has no allowed token left (names the rows).
        SamplerInputError
            On shape / dtype mismatches or NaN logits.
        """
        work = self._load_workspace(logits, batch, token_bitmask)  # (B, V) float32 copy
        row_max, row_logsumexp = _prepare_inplace(work, batch, token_bitmask, logits)

        token_ids = torch.empty(batch.num_rows, dtype=torch.int64, device=work.device)
        if batch.all_greedy:
            token_ids = work.argmax(dim=-1)
        else:
            if batch.any_greedy:
                token_ids[batch.is_greedy] = work[batch.is_greedy].argmax(dim=-1)
            sampled_rows = (~batch.is_greedy).nonzero().squeeze(1)  # (R,)
            token_ids[sampled_rows] = self._sample_rows(
                work, batch, sampled_rows, row_max, row_logsumexp
            )

        num_top = min(batch.max_num_logprobs or 0, batch.vocab_size)
        processed_rows = [
            row
            for row, mode in enumerate(batch.logprobs_modes)
            if (mode or self.logprobs_mode) == "processed"
        ]
        if len(processed_rows) == batch.num_rows:
            processed = self.process_logits(logits, batch, token_bitmask)
            return _logprobs_output(processed, token_ids, num_top)
        # raw: the model's distribution; the input logits were never modified
        raw = logits if logits.dtype == torch.float32 else logits.float()
        raw_logsumexp = row_logsumexp_fast(raw, scratch=work)  # (B,) work is free now
        chosen = raw.gather(1, token_ids.unsqueeze(1)).squeeze(1) - raw_logsumexp
        top_ids = top_values = None
        if num_top > 0:
            top = raw.topk(num_top, dim=-1)
            top_ids, top_values = top.indices, top.values - raw_logsumexp.unsqueeze(1)
        if processed_rows:  # a mixed batch: those rows from the distribution sampled from
            processed = _logprobs_output(
                self.process_logits(logits, batch, token_bitmask), token_ids, num_top
            )
            rows = torch.tensor(processed_rows, dtype=torch.int64, device=chosen.device)
            chosen[rows] = processed.logprobs[rows]
            if top_ids is not None:
                top_ids[rows] = processed.top_logprob_ids[rows]
                top_values[rows] = processed.top_logprobs[rows]
        return SamplerOutput(token_ids, chosen, top_ids, top_values)

    def reports_processed(self, params: SamplingParams) -> bool:
        """True when a row with ``params`` gets ``"processed"`` logprobs from this sampler."""
        return (params.logprobs_mode or self.logprobs_mode) == "processed"

    def process_logits(
        self,
        logits: torch.Tensor,
        batch: SamplingBatch,
        token_bitmask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The logits each row is sampled from: a new float32 (B, V) tensor.

        Sampled rows: penalties, bias, mask, temperature and truncation applied (removed
        tokens are -inf); ``softmax`` of a row is exactly its sampling distribution. Greedy
        rows: penalties, bias and mask only (their token is the argmax).
        """
        check_logits(logits, batch.num_rows, batch.vocab_size)
        work = logits.to(torch.float32, copy=True).contiguous()
        row_max, row_logsumexp = _prepare_inplace(work, batch, token_bitmask, logits)
        if batch.all_greedy:
            return work
        rows = (~batch.is_greedy).nonzero().squeeze(1)
        is_all = rows.numel() == batch.num_rows
        subset = work if is_all else work[rows]
        _truncate_full_inplace(
            subset, batch, rows, row_max[rows], _select(row_logsumexp, rows), self.num_candidates
        )
        if not is_all:
            work[rows] = subset
        return work

    def _load_workspace(
        self, logits: torch.Tensor, batch: SamplingBatch, token_bitmask: torch.Tensor | None
    ) -> torch.Tensor:
        check_logits(logits, batch.num_rows, batch.vocab_size)
        if token_bitmask is not None:
            check_bitmask(token_bitmask, batch.num_rows, batch.vocab_size)
        workspace = self._workspace
        if (
            workspace is None
            or workspace.shape != logits.shape
            or (workspace.device != logits.device)
        ):
            workspace = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
            self._workspace = workspace
        workspace.copy_(logits)  # float32 working copy; the caller's logits stay untouched
        return workspace

    def _sample_rows(
        self,
        work: torch.Tensor,
        batch: SamplingBatch,
        rows: torch.Tensor,
        row_max: torch.Tensor,
        row_logsumexp: torch.Tensor | None,
    ) -> torch.Tensor:
        """Tokens (R,) for the sampled ``rows`` of the prepared ``work`` logits."""
        is_all = rows.numel() == batch.num_rows
        logits = work if is_all else work[rows]  # (R, V)
        num_rows = logits.shape[0]
        token_ids = torch.empty(num_rows, dtype=torch.int64, device=work.device)
        truncation = None
        if batch.any_top_k or batch.any_top_p or batch.any_min_p:
            truncation = find_truncation(
                logits,
                batch.top_k[rows],
                batch.top_p[rows],
                batch.min_p[rows],
                row_max[rows],
                _select(row_logsumexp, rows),
                self.num_candidates,
            )
        typical_p = batch.typical_p[rows]
        is_fast = torch.zeros(num_rows, dtype=torch.bool, device=work.device)
        if truncation is not None:
            is_fast = truncation.is_covered & (typical_p >= 1)

        fast = is_fast.nonzero().squeeze(1)  # rows raced over their candidates only
        if fast.numel() > 0:
            values = truncation.candidate_logits[fast]  # (F, C)
            ids = truncation.candidate_ids[fast]
            values.masked_fill_(values < truncation.threshold[fast].unsqueeze(1), NEG_INF)
            noise = exponential_noise(
                rows[fast], batch.is_seeded, batch.generators, batch.vocab_size, ids
            )
            positions = race_argmax(values, noise)  # (F,)
            token_ids[fast] = ids.gather(1, positions.unsqueeze(1)).squeeze(1)

        slow = (~is_fast).nonzero().squeeze(1)  # rows raced over the whole vocabulary
        if slow.numel() > 0:
            is_all_slow = slow.numel() == num_rows
            subset = logits if is_all_slow else logits[slow]  # (S, V)
            if truncation is not None:
                threshold = truncation.threshold[slow].unsqueeze(1)
                subset.masked_fill_(subset < threshold, NEG_INF)
            if batch.any_typical:
                _typical_rows_inplace(subset, typical_p[slow])
            noise = exponential_noise(
                rows[slow], batch.is_seeded, batch.generators, batch.vocab_size
            )
            token_ids[slow] = race_argmax(subset, noise)
        return token_ids


def _prepare_inplace(
    work: torch.Tensor,
    batch: SamplingBatch,
    token_bitmask: torch.Tensor | None,
    logits: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Penalties, bias, bans, bitmask and temperature on ``work`` (B, V); checks dead ends.

    ``work`` holds a float32 copy of ``logits`` (B, V) on entry. The ``min_tokens`` ban of
    EOS / stop ids yields to the grammar: a row whose bitmask allows nothing but banned ids
    (the constrained output is complete) is prepared again without its ban, so it can end.
    A row holding +inf logits (overflow, e.g. 3e38 / 0.5) becomes its limit distribution,
    uniform over its +inf tokens, instead of NaN.
    """
    if token_bitmask is not None:
        check_bitmask(token_bitmask, batch.num_rows, batch.vocab_size)
    row_max, row_logsumexp = _mask_scale_inplace(work, batch, token_bitmask)
    is_dead = row_max == NEG_INF  # (B,)
    if bool(is_dead.any()) and batch.banned_ids is not None:
        banned = batch.banned_ids
        is_kept = ~is_dead[banned.row_ids]  # (N,) bans of live rows stay
        unbanned = replace(
            batch,
            banned_ids=SparseLogitEdit(
                banned.flat_ids[is_kept], banned.row_ids[is_kept], banned.values
            ),
        )
        work.copy_(logits)
        row_max, row_logsumexp = _mask_scale_inplace(work, unbanned, token_bitmask)
        is_dead = row_max == NEG_INF
    if bool(is_dead.any()):
        dead_rows = is_dead.nonzero().flatten().tolist()
        raise DeadEndError(f"rows {dead_rows} have no token allowed by the grammar bitmask")
    is_infinite = row_max == float("inf")  # (B,) a logit overflowed to +inf
    if bool(is_infinite.any()):
        # the limit distribution is uniform over the +inf tokens: logits 0 there, -inf elsewhere
        rows = is_infinite.nonzero().squeeze(1)
        subset = work[rows]
        is_top = subset == float("inf")
        work[rows] = torch.zeros_like(subset).masked_fill_(~is_top, NEG_INF)
        row_max[rows] = 0.0
        if row_logsumexp is not None:
            row_logsumexp[rows] = is_top.sum(dim=-1).float().log()
    return row_max, row_logsumexp


def _mask_scale_inplace(
    work: torch.Tensor, batch: SamplingBatch, token_bitmask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Penalties, bias, bans, bitmask, temperature; (row_max (B,), row_logsumexp or None)."""
    apply_penalties_inplace(work, batch)
    row_max, row_logsumexp = mask_scale_logits_inplace(
        work, token_bitmask, batch.temperature, need_logsumexp=False
    )  # row_logsumexp: None on CPU, computed later only for rows that need it
    is_nan = torch.isnan(row_max)
    if bool(is_nan.any()):
        raise SamplerInputError(f"logits of rows {is_nan.nonzero().flatten().tolist()} hold NaN")
    return row_max, row_logsumexp


def _select(values: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor | None:
    return None if values is None else values[rows]


def _truncate_full_inplace(
    logits: torch.Tensor,
    batch: SamplingBatch,
    rows: torch.Tensor,
    row_max: torch.Tensor,
    row_logsumexp: torch.Tensor | None,
    num_candidates: int,
) -> None:
    """Materialise top-k / top-p / min-p / typical on full rows (R, V) in place."""
    if batch.any_top_k or batch.any_top_p or batch.any_min_p:
        truncation = find_truncation(
            logits,
            batch.top_k[rows],
            batch.top_p[rows],
            batch.min_p[rows],
            row_max,
            row_logsumexp,
            num_candidates,
        )
        logits.masked_fill_(logits < truncation.threshold.unsqueeze(1), NEG_INF)
    if batch.any_typical:
        _typical_rows_inplace(logits, batch.typical_p[rows])


def _typical_rows_inplace(logits: torch.Tensor, typical_p: torch.Tensor) -> None:
    """Typical filtering on the rows of ``logits`` (S, V) whose ``typical_p`` (S,) is < 1."""
    typical_rows = (typical_p < 1).nonzero().squeeze(1)
    if typical_rows.numel() == 0:
        return
    subset = logits[typical_rows]
    apply_typical_inplace(subset, typical_p[typical_rows])
    logits[typical_rows] = subset


def _logprobs_output(
    processed: torch.Tensor, token_ids: torch.Tensor, num_top: int
) -> SamplerOutput:
    log_probs = torch.log_softmax(processed, dim=-1)  # (B, V)
    chosen = log_probs.gather(1, token_ids.unsqueeze(1)).squeeze(1)
    if num_top <= 0:
        return SamplerOutput(token_ids, chosen, None, None)
    top = log_probs.topk(num_top, dim=-1)
    return SamplerOutput(token_ids, chosen, top.indices, top.values)
