"""`Sampler`: one batched sampling step over ``(B, V)`` logits with per-row parameters.

Stage order (DESIGN): penalties and bias -> grammar bitmask -> temperature -> top-k -> top-p
-> min-p -> typical -> sample. Greedy rows (temperature 0) take the argmax after the bitmask.
Sampled rows use the exponential race ``argmax(p / q)``, ``q ~ Exp(1)``. No stage loops over
rows in Python; only the noise of seeded rows is drawn row by row (from each row's own
generator).

One step, one synchronisation: the sampler chooses its stages and row subsets from host
knowledge (`SamplingBatch`'s flags and row lists), never by reading a device value, and
brings back the chosen tokens, their logprobs and the per-row error flags (a row with no
allowed token, NaN logits) in a single device-to-host copy at the end (`SamplerOutput.host`);
errors are raised after that copy. Two ways to sample the rows with top-k / top-p, equal in
result (a seeded row draws the same token by both):

- the general path (``sync_free=True``, the default on GPUs): exact thresholds from the
  sorted logits (`filters.find_truncation`), then a race over the full vocabulary;
- the CPU fast path (``sync_free=False``, the default on the CPU): the top ``C`` candidates
  only, widened while a row's kept tokens may lie outside them, and a race over those
  candidates alone (`filters.find_truncation_adaptive_cpu`, `_sample_rows_adaptive_cpu`).
  Its decisions read device values, which costs nothing where the device is the host.

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

import numpy as np
import torch

from formcast.errors import DeadEndError
from formcast.samplers.batch import SamplingBatch, SparseLogitEdit, to_device
from formcast.samplers.filters import (
    NEG_INF,
    TruncatedRows,
    Truncation,
    apply_typical_inplace,
    find_truncation,
    find_truncation_adaptive_cpu,
)
from formcast.samplers.inputs import SamplerInputError, check_bitmask, check_logits
from formcast.samplers.noise import exponential_noise_for
from formcast.samplers.params import LOGPROBS_MODES, SamplingParams
from formcast.samplers.penalties import apply_penalties_inplace
from formcast.samplers.reductions import row_logsumexp as row_logsumexp_fast
from formcast.samplers.triton_logits import mask_scale_logits_inplace
from formcast.samplers.triton_race import race_argmax

LogprobsMode = Literal["raw", "processed"]

# per-row error flags, computed on the device and read back with the tokens
_IS_DEAD = 1  # no token allowed (grammar bitmask, bias, bans)
_HAS_NAN = 2  # the row's logits hold NaN


@dataclass(frozen=True)
class HostSamples:
    """A step's results on the host, read by the step's one device-to-host copy.

    Attributes
    ----------
    token_ids : np.ndarray
        (B,) int64.
    logprobs : np.ndarray
        (B,) float32.
    top_logprob_ids, top_logprobs : np.ndarray | None
        (B, K) int64 / float32, or None (as `SamplerOutput`).
    """

    token_ids: np.ndarray
    logprobs: np.ndarray
    top_logprob_ids: np.ndarray | None
    top_logprobs: np.ndarray | None


@dataclass(frozen=True)
class SamplerOutput:
    """Result of one step.

    Attributes
    ----------
    token_ids : torch.Tensor
        (B,) int64 chosen tokens (on the logits' device).
    logprobs : torch.Tensor
        (B,) float32 log-probability of the chosen token (each row's distribution per its
        logprobs mode). Always filled, for every row.
    top_logprob_ids, top_logprobs : torch.Tensor | None
        (B, K) int64 / float32, the K most likely tokens, ``K = max(params.logprobs)`` over
        the batch (rows that asked fewer slice their own); None when no row asked K > 0. In
        ``"processed"`` rows, tokens the processing removed come last with ``-inf``.
    host : HostSamples | None
        The same values on the host, already read by the sampler (None: not read yet;
        `on_host` reads them).
    """

    token_ids: torch.Tensor
    logprobs: torch.Tensor
    top_logprob_ids: torch.Tensor | None
    top_logprobs: torch.Tensor | None
    host: HostSamples | None = None

    def on_host(self) -> HostSamples:
        """The results as host arrays: ``host`` when the sampler read them, else read now."""
        if self.host is not None:
            return self.host
        top_ids = top_values = None
        if self.top_logprob_ids is not None and self.top_logprobs is not None:
            top_ids = self.top_logprob_ids.cpu().numpy()
            top_values = self.top_logprobs.cpu().numpy()
        return HostSamples(
            self.token_ids.cpu().numpy(), self.logprobs.cpu().numpy(), top_ids, top_values
        )


class Sampler:
    """Batched sampler; call it once per step. Holds a reusable float32 workspace, so one
    instance must not be called from two threads at once.

    Parameters
    ----------
    logprobs_mode : {"raw", "processed"}
        Which distribution `SamplerOutput.logprobs` describes for rows whose
        ``SamplingParams.logprobs_mode`` is None (see module docstring).
    num_candidates : int
        First candidate count for top-k / top-p on the CPU fast path (raised automatically
        when needed).
    sync_free : bool | None
        True: the general path, which reads no device value before the step's one copy back
        (what a GPU needs); False: the CPU fast path (adaptive candidates, reads device
        values); None: by the logits' device (the CPU fast path on the CPU only).
    """

    def __init__(
        self,
        logprobs_mode: LogprobsMode = "raw",
        num_candidates: int = 256,
        sync_free: bool | None = None,
    ) -> None:
        if logprobs_mode not in LOGPROBS_MODES:
            raise SamplerInputError(
                f"logprobs_mode must be 'raw' or 'processed', got {logprobs_mode!r}"
            )
        if not isinstance(num_candidates, int) or num_candidates < 1:
            raise SamplerInputError(f"num_candidates must be an int >= 1, got {num_candidates!r}")
        if sync_free not in (None, True, False):
            raise SamplerInputError(f"sync_free must be None, True or False, got {sync_free!r}")
        self.logprobs_mode = logprobs_mode
        self.num_candidates = num_candidates
        self.sync_free = sync_free
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
            token ``i`` allowed. A host bitmask is moved to the logits' device by a
            non-blocking copy.

        Raises
        ------
        DeadEndError
            If a row has no allowed token left (names the rows).
        SamplerInputError
            On shape / dtype mismatches or NaN logits.
        """
        check_logits(logits, batch.num_rows, batch.vocab_size)
        bitmask = _bitmask_on(token_bitmask, batch, logits.device)
        work = self._load_workspace(logits)  # (B, V) float32 copy
        row_max, flags = _prepare_inplace(work, batch, bitmask)
        token_ids = self._choose_tokens(work, batch, row_max)

        num_top = min(batch.max_num_logprobs or 0, batch.vocab_size)
        processed_rows = [
            row
            for row, mode in enumerate(batch.logprobs_modes)
            if (mode or self.logprobs_mode) == "processed"
        ]
        if len(processed_rows) == batch.num_rows:
            processed = self._process(logits, batch, bitmask)[0]
            return _read_back(_logprobs_output(processed, token_ids, num_top), flags)
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
                self._process(logits, batch, bitmask)[0], token_ids, num_top
            )
            (rows,) = to_device([np.asarray(processed_rows, dtype=np.int64)], chosen.device)
            chosen[rows] = processed.logprobs[rows]
            if top_ids is not None:
                top_ids[rows] = processed.top_logprob_ids[rows]
                top_values[rows] = processed.top_logprobs[rows]
        return _read_back(SamplerOutput(token_ids, chosen, top_ids, top_values), flags)

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
        rows: penalties, bias and mask only (their token is the argmax). Checking for dead
        rows and NaN reads one small flags tensor back from the device.
        """
        check_logits(logits, batch.num_rows, batch.vocab_size)
        bitmask = _bitmask_on(token_bitmask, batch, logits.device)
        work, flags = self._process(logits, batch, bitmask)
        _raise_on_flags(flags.cpu().numpy())
        return work

    def _is_adaptive(self, device: torch.device) -> bool:
        """Whether the CPU fast path runs (see ``sync_free``)."""
        return self.sync_free is False or (self.sync_free is None and device.type == "cpu")

    def _process(
        self, logits: torch.Tensor, batch: SamplingBatch, bitmask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`process_logits` without reading its flags back: ``(work (B, V), flags (B,))``."""
        work = logits.to(torch.float32, copy=True).contiguous()
        row_max, flags = _prepare_inplace(work, batch, bitmask)
        row_max = _fix_overflow_inplace(work, row_max)
        if batch.all_greedy:
            return work, flags
        rows = batch.sampled_row_ids
        is_all = len(batch.sampled_rows) == batch.num_rows
        subset = work if is_all else work[rows]  # (R, V)
        num_candidates = self.num_candidates if self._is_adaptive(work.device) else None
        _truncate_inplace(subset, batch, row_max if is_all else row_max[rows], num_candidates)
        if not is_all:
            work[rows] = subset
        return work, flags

    def _load_workspace(self, logits: torch.Tensor) -> torch.Tensor:
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

    def _choose_tokens(
        self, work: torch.Tensor, batch: SamplingBatch, row_max: torch.Tensor
    ) -> torch.Tensor:
        """Tokens (B,) of the prepared ``work`` logits (B, V): argmax or race, per row."""
        if batch.all_greedy:
            return work.argmax(dim=-1)
        token_ids = torch.empty(batch.num_rows, dtype=torch.int64, device=work.device)
        if batch.any_greedy:
            greedy = batch.greedy_row_ids
            token_ids[greedy] = work[greedy].argmax(dim=-1)
        rows = batch.sampled_row_ids
        is_all = len(batch.sampled_rows) == batch.num_rows
        logits = work if is_all else work[rows]  # (R, V)
        subset_max = row_max if is_all else row_max[rows]
        if self._is_adaptive(work.device):
            sampled = _sample_rows_adaptive_cpu(logits, batch, subset_max, self.num_candidates)
        else:
            sampled = _sample_rows(logits, batch, subset_max)
        if is_all:
            return sampled
        token_ids[rows] = sampled
        return token_ids


def _bitmask_on(
    token_bitmask: torch.Tensor | None, batch: SamplingBatch, device: torch.device
) -> torch.Tensor | None:
    """The checked bitmask on ``device`` (a host bitmask by a non-blocking copy)."""
    if token_bitmask is None:
        return None
    check_bitmask(token_bitmask, batch.num_rows, batch.vocab_size)
    if token_bitmask.device.type == "cpu" and device.type != "cpu":
        (token_bitmask,) = to_device([token_bitmask], device)
    return token_bitmask


def _prepare_inplace(
    work: torch.Tensor, batch: SamplingBatch, token_bitmask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Penalties, bias, bitmask, temperature and bans on ``work`` (B, V), in place.

    ``work`` holds a float32 copy of the logits (B, V) on entry. Returns the row maxima (B,)
    and the error flags (B,) int64 (``_IS_DEAD``, ``_HAS_NAN``), both left on the device.
    The ``min_tokens`` ban of EOS / stop ids yields to the grammar: a row whose bitmask
    allows nothing but banned ids (the constrained output is complete) keeps them.
    """
    banned = batch.banned_ids
    apply_penalties_inplace(work, batch if banned is None else replace(batch, banned_ids=None))
    # row_logsumexp, when a kernel returns it, is not used: the overflow fix and the bans
    # change rows after it; truncation computes the normaliser it needs itself
    row_max, _ = mask_scale_logits_inplace(
        work, token_bitmask, batch.temperature, need_logsumexp=False
    )
    if banned is not None:  # host knowledge: only a step with bans pays for them
        row_max = _ban_unless_dead_inplace(work, row_max, banned)
    flags = (row_max == NEG_INF).to(torch.int64) * _IS_DEAD
    flags += torch.isnan(row_max).to(torch.int64) * _HAS_NAN
    return row_max, flags


def _ban_unless_dead_inplace(
    work: torch.Tensor, row_max: torch.Tensor, banned: SparseLogitEdit
) -> torch.Tensor:
    """Mask the banned ids of ``work`` (B, V) to -inf except in rows the bans would leave
    with no token; returns the new row maxima (B,). Bans commute with the mask and the
    temperature (both keep -inf), so applying them last equals applying them first."""
    flat = work.view(-1)
    values = flat[banned.flat_ids]  # (N,) the banned logits as prepared
    flat[banned.flat_ids] = NEG_INF
    banned_max = work.amax(dim=-1)  # (B,)
    is_dead = banned_max == NEG_INF  # only banned ids (or nothing) were allowed
    flat[banned.flat_ids] = torch.where(is_dead[banned.row_ids], values, NEG_INF)
    return torch.where(is_dead, row_max, banned_max)


def _fix_overflow_inplace(logits: torch.Tensor, row_max: torch.Tensor) -> torch.Tensor:
    """Rows of ``logits`` (R, V) holding +inf (an overflow, e.g. 3e38 / 0.5) become their
    limit distribution, uniform over their +inf tokens (0 there, -inf elsewhere), instead
    of NaN; returns the new row maxima (R,). Branch-free: two passes, no device read."""
    is_infinite = row_max == float("inf")  # (R,)
    shift = torch.where(is_infinite, float("inf"), 0.0)  # (R,)
    # x - inf = -inf for finite and -inf logits; +inf - inf = NaN, then 0. Rows without +inf
    # are unchanged (x - 0), except NaN, which turns 0 in rows already flagged _HAS_NAN
    logits.sub_(shift.unsqueeze(1)).nan_to_num_(nan=0.0, posinf=float("inf"), neginf=NEG_INF)
    return torch.where(is_infinite, 0.0, row_max)


def _truncated_rows(batch: SamplingBatch) -> TruncatedRows:
    return TruncatedRows(
        batch.truncated_positions,
        batch.truncated_position_ids,
        batch.max_top_k,
        batch.any_top_p,
        batch.needs_row_logsumexp,
    )


def _sampled_column(batch: SamplingBatch, column: torch.Tensor) -> torch.Tensor:
    """``column`` (B,) at the sampled rows (R,)."""
    return column if len(batch.sampled_rows) == batch.num_rows else column[batch.sampled_row_ids]


def _find_truncation(
    logits: torch.Tensor, batch: SamplingBatch, row_max: torch.Tensor, num_candidates: int | None
) -> Truncation:
    """Thresholds of the sampled rows ``logits`` (R, V); adaptive when ``num_candidates``."""
    args = (
        logits,
        _sampled_column(batch, batch.top_k),
        _sampled_column(batch, batch.top_p),
        _sampled_column(batch, batch.min_p),
        row_max,
        _truncated_rows(batch),
    )
    if num_candidates is None:
        return find_truncation(*args)
    return find_truncation_adaptive_cpu(*args, num_candidates)


def _truncate_inplace(
    logits: torch.Tensor, batch: SamplingBatch, row_max: torch.Tensor, num_candidates: int | None
) -> None:
    """Materialise top-k / top-p / min-p / typical on the sampled rows (R, V) in place."""
    if batch.any_top_k or batch.any_top_p or batch.any_min_p:
        truncation = _find_truncation(logits, batch, row_max, num_candidates)
        logits.masked_fill_(logits < truncation.threshold.unsqueeze(1), NEG_INF)
    if batch.any_typical:
        _typical_inplace(logits, batch)


def _typical_inplace(logits: torch.Tensor, batch: SamplingBatch) -> None:
    """Typical filtering on the sampled rows ``logits`` (R, V) whose ``typical_p`` is < 1."""
    rows = batch.typical_position_ids
    is_all = len(batch.typical_positions) == logits.shape[0]
    subset = logits if is_all else logits[rows]  # (T, V)
    typical_p = _sampled_column(batch, batch.typical_p)
    apply_typical_inplace(subset, typical_p if is_all else typical_p[rows])
    if not is_all:
        logits[rows] = subset


def _sample_rows(logits: torch.Tensor, batch: SamplingBatch, row_max: torch.Tensor) -> torch.Tensor:
    """Tokens (R,) of the sampled rows ``logits`` (R, V), modified in place (general path:
    exact truncation, then a race over the whole vocabulary; reads no device value)."""
    row_max = _fix_overflow_inplace(logits, row_max)
    _truncate_inplace(logits, batch, row_max, None)
    noise = exponential_noise_for(
        logits.shape[0], batch.vocab_size, logits.device, batch.sampled_seeded
    )
    return race_argmax(logits, noise)


def _sample_rows_adaptive_cpu(
    logits: torch.Tensor, batch: SamplingBatch, row_max: torch.Tensor, num_candidates: int
) -> torch.Tensor:
    """`_sample_rows` on the CPU fast path: a row whose kept tokens all lie in its top-``C``
    candidates (the common case with any top-k / top-p) races over those alone, the others
    over the full vocabulary. Splitting the rows reads device values (free on the CPU)."""
    row_max = _fix_overflow_inplace(logits, row_max)
    num_rows = logits.shape[0]
    token_ids = torch.empty(num_rows, dtype=torch.int64, device=logits.device)
    truncation = None
    if batch.any_top_k or batch.any_top_p or batch.any_min_p:
        truncation = _find_truncation(logits, batch, row_max, num_candidates)
    typical_p = _sampled_column(batch, batch.typical_p)
    is_fast = torch.zeros(num_rows, dtype=torch.bool, device=logits.device)
    if truncation is not None:
        is_fast = truncation.is_covered & (typical_p >= 1)
    generator_of = dict(batch.sampled_seeded)

    def seeded(rows: list[int]) -> list[tuple[int, torch.Generator]]:
        return [(i, generator_of[row]) for i, row in enumerate(rows) if row in generator_of]

    fast = is_fast.nonzero().squeeze(1)  # rows raced over their candidates only
    if fast.numel() > 0:
        values = truncation.candidate_logits[fast]  # (F, C)
        ids = truncation.candidate_ids[fast]
        values.masked_fill_(values < truncation.threshold[fast].unsqueeze(1), NEG_INF)
        noise = exponential_noise_for(
            fast.numel(), batch.vocab_size, logits.device, seeded(fast.tolist()), ids
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
            slow_typical_p = typical_p[slow]
            typical_rows = (slow_typical_p < 1).nonzero().squeeze(1)
            if typical_rows.numel() > 0:
                typical_subset = subset[typical_rows]
                apply_typical_inplace(typical_subset, slow_typical_p[typical_rows])
                subset[typical_rows] = typical_subset
        noise = exponential_noise_for(
            slow.numel(), batch.vocab_size, logits.device, seeded(slow.tolist())
        )
        token_ids[slow] = race_argmax(subset, noise)
    return token_ids


def _read_back(output: SamplerOutput, flags: torch.Tensor) -> SamplerOutput:
    """The step's one device-to-host copy: tokens, logprobs, top logprobs and the error
    flags in one int64 tensor; raises the flagged errors, else returns ``output`` with its
    ``host`` arrays."""
    num_rows = output.token_ids.shape[0]
    parts = [output.token_ids, flags, _float_bits(output.logprobs)]
    has_top = output.top_logprob_ids is not None and output.top_logprobs is not None
    if has_top:
        parts += [output.top_logprob_ids.reshape(-1), _float_bits(output.top_logprobs)]
    packed = torch.cat(parts)
    if packed.device.type != "cpu":
        packed = packed.cpu()  # the synchronisation of the step
    host = packed.numpy()
    _raise_on_flags(host[num_rows : 2 * num_rows])
    top_ids = top_values = None
    if has_top:
        num_top = output.top_logprob_ids.shape[1]
        start = 3 * num_rows
        top_ids = host[start : start + num_rows * num_top].reshape(num_rows, num_top)
        top_values = _bits_float(host[start + num_rows * num_top :]).reshape(num_rows, num_top)
    samples = HostSamples(
        host[:num_rows], _bits_float(host[2 * num_rows : 3 * num_rows]), top_ids, top_values
    )
    return replace(output, host=samples)


def _float_bits(values: torch.Tensor) -> torch.Tensor:
    """float32 ``values`` as int64 holding their bit patterns (flattened), for one copy."""
    return values.contiguous().view(torch.int32).to(torch.int64).reshape(-1)


def _bits_float(bits: np.ndarray) -> np.ndarray:
    """Inverse of `_float_bits` on the host."""
    return bits.astype(np.int32).view(np.float32)


def _raise_on_flags(flags: np.ndarray) -> None:
    """Raise the error of the first flagged kind (NaN before dead ends), naming the rows."""
    nan_rows = np.flatnonzero(flags & _HAS_NAN).tolist()
    if nan_rows:
        raise SamplerInputError(f"logits of rows {nan_rows} hold NaN")
    dead_rows = np.flatnonzero(flags & _IS_DEAD).tolist()
    if dead_rows:
        raise DeadEndError(f"rows {dead_rows} have no token allowed by the grammar bitmask")


def _logprobs_output(
    processed: torch.Tensor, token_ids: torch.Tensor, num_top: int
) -> SamplerOutput:
    log_probs = torch.log_softmax(processed, dim=-1)  # (B, V)
    chosen = log_probs.gather(1, token_ids.unsqueeze(1)).squeeze(1)
    if num_top <= 0:
        return SamplerOutput(token_ids, chosen, None, None)
    top = log_probs.topk(num_top, dim=-1)
    return SamplerOutput(token_ids, chosen, top.indices, top.values)
