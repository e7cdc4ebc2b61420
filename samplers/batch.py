"""`SamplingBatch`: the per-row tensors of one sampling step, built once per step.

Dense per-row parameters are ``(B,)`` tensors. Penalties, logit bias and the ``min_tokens``
ban are *sparse*: flat indices ``row * V + token`` into the ``(B, V)`` logits, so a batch of
long histories never allocates a ``(B, V)`` count table. Python flags (``any_top_k`` ...) let
the sampler skip whole stages no row uses.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch

from formcast.errors import SamplingParamsError
from formcast.samplers.inputs import SamplerInputError
from formcast.samplers.params import SamplingParams


def make_generator(
    params: SamplingParams, device: torch.device | str = "cpu"
) -> torch.Generator | None:
    """The request's own generator: seeded from ``params.seed``, or None when unseeded.

    Create it once per request (per completion when ``n > 1``: seed ``seed + index``) and pass
    it to every step's `SamplingBatch.build`, so the request's noise stream is its own.
    """
    if params.seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(params.seed)
    return generator


@dataclass(frozen=True)
class SparseLogitEdit:
    """Edits at flat positions ``row * V + token`` of a ``(B, V)`` logits tensor.

    ``flat_ids`` (N,) int64 are unique; ``row_ids`` (N,) their rows; ``values`` (N,) float32
    are the per-edit operands (bias, count, ...), meaning defined by the user of the edit.
    """

    flat_ids: torch.Tensor
    row_ids: torch.Tensor
    values: torch.Tensor


@dataclass(frozen=True)
class SamplingBatch:
    """Per-row sampling tensors for one step; build with `SamplingBatch.build`.

    Attributes
    ----------
    num_rows, vocab_size : int
        ``B`` and ``V``.
    temperature : torch.Tensor
        (B,) float32; greedy rows hold 1.0 (they are decoded by argmax, see ``is_greedy``).
    is_greedy : torch.Tensor
        (B,) bool.
    top_k : torch.Tensor
        (B,) int64; 0 = off (also when the requested k >= V).
    top_p, min_p, typical_p : torch.Tensor
        (B,) float32; 1.0 / 0.0 / 1.0 = off.
    repetition_penalty : torch.Tensor
        (B,) float32.
    repetition_ids : SparseLogitEdit | None
        Unique (row, token) pairs of prompt + output for rows whose penalty is not 1.
    frequency_edit : SparseLogitEdit | None
        Output (row, token) pairs; ``values`` = ``frequency * count + presence``.
    bias_edit : SparseLogitEdit | None
        ``logit_bias`` entries; ``values`` = the bias.
    banned_ids : SparseLogitEdit | None
        EOS / stop ids masked to -inf for rows below ``min_tokens``.
    generators : tuple[torch.Generator | None, ...]
        Per-row generators; a row with one draws its noise from it alone.
    seeded_rows : tuple[int, ...]
        Rows that own a generator; ``is_seeded`` is the same as a (B,) bool tensor.
    num_logprobs : tuple[int | None, ...]
        Per-row ``params.logprobs``; ``max_num_logprobs`` is their max (None if none asked).
    logprobs_modes : tuple[str | None, ...]
        Per-row ``params.logprobs_mode`` (None: the sampler's default).
    """

    num_rows: int
    vocab_size: int
    device: torch.device
    temperature: torch.Tensor
    is_greedy: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor
    typical_p: torch.Tensor
    repetition_penalty: torch.Tensor
    repetition_ids: SparseLogitEdit | None
    frequency_edit: SparseLogitEdit | None
    bias_edit: SparseLogitEdit | None
    banned_ids: SparseLogitEdit | None
    generators: tuple[torch.Generator | None, ...]
    seeded_rows: tuple[int, ...]
    is_seeded: torch.Tensor
    num_logprobs: tuple[int | None, ...]
    logprobs_modes: tuple[str | None, ...]
    all_greedy: bool
    any_greedy: bool
    any_top_k: bool
    any_top_p: bool
    any_min_p: bool
    any_typical: bool

    @property
    def max_num_logprobs(self) -> int | None:
        """The largest ``logprobs`` any row asked for, or None when no row asked."""
        asked = [n for n in self.num_logprobs if n is not None]
        return max(asked) if asked else None

    @classmethod
    def build(
        cls,
        params: Sequence[SamplingParams],
        prompt_token_ids: Sequence[Sequence[int]],
        output_token_ids: Sequence[Sequence[int]],
        vocab_size: int,
        eos_token_ids: Collection[int],
        generators: Sequence[torch.Generator | None] | None = None,
        device: torch.device | str = "cpu",
    ) -> SamplingBatch:
        """Build the step's tensors for ``B = len(params)`` rows.

        Parameters
        ----------
        params : Sequence[SamplingParams]
            One per row.
        prompt_token_ids, output_token_ids : Sequence[Sequence[int]]
            Per row: the prompt, and the tokens generated so far (lists, tuples, 1-D tensors
            or arrays). Ids outside ``[0, vocab_size)`` are ignored by the penalties.
        vocab_size : int
            ``V``, the logits width.
        eos_token_ids : Collection[int]
            EOS ids masked while a row has fewer than ``min_tokens`` outputs.
        generators : Sequence[torch.Generator | None] | None
            Per-row generators (`make_generator`); None = every row unseeded.
        device : torch.device | str
            Where the tensors live (the logits' device).

        Raises
        ------
        SamplerInputError
            If the per-row sequences disagree in length or ``vocab_size < 1``.
        SamplingParamsError
            If a ``logit_bias`` key is ``>= vocab_size``.
        """
        num_rows = len(params)
        device = torch.device(device)
        if generators is None:
            generators = [None] * num_rows
        for name, seq in (
            ("prompt_token_ids", prompt_token_ids),
            ("output_token_ids", output_token_ids),
            ("generators", generators),
        ):
            if len(seq) != num_rows:
                raise SamplerInputError(f"{name} has {len(seq)} rows, params has {num_rows}")
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise SamplerInputError(f"vocab_size must be an int >= 1, got {vocab_size!r}")

        def column(values: list, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        is_greedy = [p.is_greedy for p in params]
        top_k = [p.top_k if 0 < p.top_k < vocab_size else 0 for p in params]
        for row, p in enumerate(params):
            if p.logit_bias is None:
                continue
            too_big = [t for t in p.logit_bias if t >= vocab_size]
            if too_big:
                raise SamplingParamsError(
                    "logit_bias",
                    dict(p.logit_bias),
                    f"token ids {too_big} of row {row} are >= vocab_size {vocab_size}",
                )
        eos = tuple(int(t) for t in eos_token_ids)
        return cls(
            num_rows=num_rows,
            vocab_size=vocab_size,
            device=device,
            temperature=column(
                [1.0 if g else p.temperature for g, p in zip(is_greedy, params, strict=True)],
                torch.float32,
            ),
            is_greedy=column(is_greedy, torch.bool),
            top_k=column(top_k, torch.int64),
            top_p=column([p.top_p for p in params], torch.float32),
            min_p=column([p.min_p for p in params], torch.float32),
            typical_p=column([p.typical_p for p in params], torch.float32),
            repetition_penalty=column([p.repetition_penalty for p in params], torch.float32),
            repetition_ids=_repetition_ids(
                params, prompt_token_ids, output_token_ids, vocab_size, device
            ),
            frequency_edit=_frequency_edit(params, output_token_ids, vocab_size, device),
            bias_edit=_bias_edit(params, vocab_size, device),
            banned_ids=_banned_ids(params, output_token_ids, eos, vocab_size, device),
            generators=tuple(generators),
            seeded_rows=tuple(r for r, g in enumerate(generators) if g is not None),
            is_seeded=column([g is not None for g in generators], torch.bool),
            num_logprobs=tuple(p.logprobs for p in params),
            logprobs_modes=tuple(p.logprobs_mode for p in params),
            all_greedy=all(is_greedy),
            any_greedy=any(is_greedy),
            any_top_k=any(k > 0 and not g for k, g in zip(top_k, is_greedy, strict=True)),
            any_top_p=any(p.top_p < 1 and not g for g, p in zip(is_greedy, params, strict=True)),
            any_min_p=any(p.min_p > 0 and not g for g, p in zip(is_greedy, params, strict=True)),
            any_typical=any(
                p.typical_p < 1 and not g for g, p in zip(is_greedy, params, strict=True)
            ),
        )


def _flat_token_ids(
    rows: list[int], token_lists: list[Sequence[int]], vocab_size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat ids ``row * V + token`` (N,) of all given tokens and their counts, unique, sorted.

    Tokens outside ``[0, V)`` (padding, ids beyond the logits width) are dropped.
    """
    parts = [torch.as_tensor(ids, dtype=torch.int64).reshape(-1) for ids in token_lists]
    lengths = torch.tensor([len(t) for t in parts], dtype=torch.int64)
    token_ids = torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64)
    row_ids = torch.repeat_interleave(torch.tensor(rows, dtype=torch.int64), lengths)
    in_range = (token_ids >= 0) & (token_ids < vocab_size)
    flat = row_ids[in_range] * vocab_size + token_ids[in_range]
    unique, counts = torch.unique(flat, return_counts=True)
    return unique.to(device), counts.to(device)


def _repetition_ids(params, prompt_token_ids, output_token_ids, vocab_size, device):
    rows = [r for r, p in enumerate(params) if p.repetition_penalty != 1]
    if not rows:
        return None
    token_lists = []
    for r in rows:
        token_lists.append(prompt_token_ids[r])
        token_lists.append(output_token_ids[r])
    flat, _ = _flat_token_ids([r for r in rows for _ in (0, 1)], token_lists, vocab_size, device)
    return SparseLogitEdit(flat, flat // vocab_size, torch.empty(0, device=device))


def _frequency_edit(params, output_token_ids, vocab_size, device):
    rows = [r for r, p in enumerate(params) if p.frequency_penalty or p.presence_penalty]
    if not rows:
        return None
    flat, counts = _flat_token_ids(rows, [output_token_ids[r] for r in rows], vocab_size, device)
    row_ids = flat // vocab_size
    frequency = torch.tensor(
        [p.frequency_penalty for p in params], dtype=torch.float32, device=device
    )
    presence = torch.tensor(
        [p.presence_penalty for p in params], dtype=torch.float32, device=device
    )
    # logit -= frequency * count + presence * (count > 0); counts here are all > 0
    values = frequency[row_ids] * counts.to(torch.float32) + presence[row_ids]
    return SparseLogitEdit(flat, row_ids, values)


def _bias_edit(params, vocab_size, device):
    flat, values = [], []
    for row, p in enumerate(params):
        if p.logit_bias is None:
            continue
        for token_id, bias in p.logit_bias.items():
            flat.append(row * vocab_size + token_id)
            values.append(bias)
    if not flat:
        return None
    flat_ids = torch.tensor(flat, dtype=torch.int64, device=device)
    return SparseLogitEdit(
        flat_ids, flat_ids // vocab_size, torch.tensor(values, dtype=torch.float32, device=device)
    )


def _banned_ids(params, output_token_ids, eos, vocab_size, device):
    flat = []
    for row, p in enumerate(params):
        if len(output_token_ids[row]) >= p.min_tokens:
            continue
        banned = set(p.stop_token_ids) | (set() if p.ignore_eos else set(eos))
        flat.extend(row * vocab_size + t for t in sorted(banned) if 0 <= t < vocab_size)
    if not flat:
        return None
    flat_ids = torch.tensor(flat, dtype=torch.int64, device=device)
    return SparseLogitEdit(flat_ids, flat_ids // vocab_size, torch.empty(0, device=device))
