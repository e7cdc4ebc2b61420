"""`SamplingBatch`: the per-row tensors of one sampling step, built once per step.

Dense per-row parameters are ``(B,)`` tensors. Penalties, logit bias and the ``min_tokens``
ban are *sparse*: flat indices ``row * V + token`` into the ``(B, V)`` logits, so a batch of
long histories never allocates a ``(B, V)`` count table. Python flags (``any_top_k`` ...) and
row lists (``greedy_rows``, ``sampled_rows`` ...) are the host's knowledge of the step: the
sampler chooses its stages and row subsets from them, never by reading a device value.

Everything is computed on the host (numpy) and reaches the device through `to_device`, the one
host-to-device path of a step: one packed, pinned, ``non_blocking`` copy, so building a batch
never waits for the device.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from formcast.errors import SamplingParamsError
from formcast.samplers.inputs import SamplerInputError
from formcast.samplers.params import SamplingParams

_ALIGN = 8  # bytes: each segment of a packed transfer starts aligned for 8-byte dtypes


def to_device(
    arrays: Sequence[np.ndarray | torch.Tensor], device: torch.device | str
) -> list[torch.Tensor]:
    """Host ``arrays`` as tensors on ``device``: every host-to-device copy of a step goes here.

    On the CPU the tensors share the arrays' memory (no copy). On another device the arrays
    are packed into one fresh host buffer (pinned when the device is CUDA) and sent by a single
    ``non_blocking=True`` copy, so the host never waits for the device; the results are views
    of one device buffer, with the arrays' dtypes and shapes. The pinned buffer comes from
    torch's caching host allocator, which hands it out again only once the copy has completed,
    so callers may overwrite their arrays (a reused bitmask buffer) at once.

    Parameters
    ----------
    arrays : Sequence[np.ndarray | torch.Tensor]
        numpy arrays or CPU tensors; a tensor already on ``device`` is returned as it is.
    device : torch.device | str
        The target device.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return [
            a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
            for a in arrays
        ]
    results: list[torch.Tensor | None] = [None] * len(arrays)
    host_positions = []
    for position, a in enumerate(arrays):
        if isinstance(a, torch.Tensor) and a.device == device:
            results[position] = a
        else:
            host_positions.append(position)
    if host_positions:
        host, layout = pack_host_arrays(
            [arrays[i] for i in host_positions], pin=device.type == "cuda"
        )
        packed = host.to(device, non_blocking=True)
        for position, tensor in zip(host_positions, unpack_arrays(packed, layout), strict=True):
            results[position] = tensor
    return results  # type: ignore[return-value]  # every slot is filled above


def pack_host_arrays(
    arrays: Sequence[np.ndarray | torch.Tensor], pin: bool = False
) -> tuple[torch.Tensor, list[tuple[int, torch.dtype, tuple[int, ...]]]]:
    """One uint8 host buffer holding ``arrays`` back to back, and its layout.

    Each array starts at an offset aligned to 8 bytes, so any of its views by dtype is legal.
    Returns ``(buffer (N,) uint8, [(offset, dtype, shape), ...])``; `unpack_arrays` inverts it.
    """
    host_arrays = [_host_array(a) for a in arrays]
    layout = []
    total = 0
    for a in host_arrays:
        total = -(-total // _ALIGN) * _ALIGN
        layout.append((total, torch.from_numpy(np.empty(0, dtype=a.dtype)).dtype, a.shape))
        total += a.nbytes
    total = -(-total // _ALIGN) * _ALIGN  # an empty last array's offset stays inside
    buffer = torch.empty(total, dtype=torch.uint8, pin_memory=pin)
    words = buffer.numpy()  # shares memory with the buffer
    for a, (offset, _, _) in zip(host_arrays, layout, strict=True):
        words[offset : offset + a.nbytes] = a.reshape(-1).view(np.uint8)
    return buffer, layout


def unpack_arrays(
    buffer: torch.Tensor, layout: list[tuple[int, torch.dtype, tuple[int, ...]]]
) -> list[torch.Tensor]:
    """Views of a packed uint8 ``buffer`` (any device) as the arrays of ``layout``."""
    views = []
    for offset, dtype, shape in layout:
        nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()
        views.append(buffer[offset : offset + nbytes].view(dtype).view(shape))
    return views


def _host_array(a: np.ndarray | torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy array of host data (a CPU tensor shares its memory)."""
    if isinstance(a, torch.Tensor):
        if a.device.type != "cpu":
            raise SamplerInputError(f"to_device takes host data, got a tensor on {a.device}")
        a = a.numpy()
    return np.ascontiguousarray(a)


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
    greedy_rows, sampled_rows : tuple[int, ...]
        The rows decoded by argmax and the others, ascending (host); ``greedy_row_ids`` and
        ``sampled_row_ids`` are the same as (G,) / (R,) int64 tensors.
    truncated_positions : tuple[int, ...]
        Positions *within* ``sampled_rows`` of the rows with top-k or top-p (their threshold
        needs the sorted logits); ``truncated_position_ids`` is the same as a tensor.
    typical_positions : tuple[int, ...]
        Positions within ``sampled_rows`` of the rows with ``typical_p < 1``;
        ``typical_position_ids`` is the same as a tensor.
    sampled_seeded : tuple[tuple[int, torch.Generator], ...]
        ``(position within sampled_rows, generator)`` of the seeded sampled rows.
    max_top_k : int
        The largest top-k of a sampled row (0: none has top-k).
    needs_row_logsumexp : bool
        Some sampled row has top-p without top-k (its top-p normalises over the whole row).
    all_greedy, any_greedy, any_top_k, any_top_p, any_min_p, any_typical : bool
        Host flags over the rows (the ``any_*`` over sampled rows only).
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
    greedy_rows: tuple[int, ...]
    sampled_rows: tuple[int, ...]
    greedy_row_ids: torch.Tensor
    sampled_row_ids: torch.Tensor
    truncated_positions: tuple[int, ...]
    truncated_position_ids: torch.Tensor
    typical_positions: tuple[int, ...]
    typical_position_ids: torch.Tensor
    sampled_seeded: tuple[tuple[int, torch.Generator], ...]
    max_top_k: int
    needs_row_logsumexp: bool
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

        All tensors are computed on the host and sent by one `to_device` call (one
        non-blocking copy): building a batch never waits for the device.

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
        greedy_rows = tuple(r for r in range(num_rows) if is_greedy[r])
        sampled_rows = tuple(r for r in range(num_rows) if not is_greedy[r])
        truncated_positions = tuple(
            i for i, r in enumerate(sampled_rows) if top_k[r] > 0 or params[r].top_p < 1
        )
        typical_positions = tuple(i for i, r in enumerate(sampled_rows) if params[r].typical_p < 1)
        sampled_seeded = tuple(
            (i, generators[r]) for i, r in enumerate(sampled_rows) if generators[r] is not None
        )

        # (5, B) float32 columns, then every int64 / bool array: one transfer for the batch
        columns = np.array(
            [
                [1.0 if g else p.temperature for g, p in zip(is_greedy, params, strict=True)],
                [p.top_p for p in params],
                [p.min_p for p in params],
                [p.typical_p for p in params],
                [p.repetition_penalty for p in params],
            ],
            dtype=np.float32,
        ).reshape(5, num_rows)
        edits = [
            _repetition_ids(params, prompt_token_ids, output_token_ids, vocab_size),
            _frequency_edit(params, output_token_ids, vocab_size),
            _bias_edit(params, vocab_size),
            _banned_ids(params, output_token_ids, eos, vocab_size),
        ]
        arrays = [
            columns,
            np.asarray(top_k, dtype=np.int64),
            np.asarray(is_greedy, dtype=np.bool_),
            np.asarray([g is not None for g in generators], dtype=np.bool_),
            np.asarray(greedy_rows, dtype=np.int64),
            np.asarray(sampled_rows, dtype=np.int64),
            np.asarray(truncated_positions, dtype=np.int64),
            np.asarray(typical_positions, dtype=np.int64),
        ]
        num_dense = len(arrays)
        for edit in edits:
            if edit is not None:
                arrays.extend(edit)
        tensors = to_device(arrays, device)
        (
            dense,
            top_k_ids,
            is_greedy_mask,
            is_seeded_mask,
            greedy_ids,
            sampled_ids,
            truncated_ids,
            typical_ids,
        ) = tensors[:num_dense]
        device_edits: list[SparseLogitEdit | None] = []
        position = num_dense
        for edit in edits:
            if edit is None:
                device_edits.append(None)
            else:
                device_edits.append(SparseLogitEdit(*tensors[position : position + 3]))
                position += 3
        return cls(
            num_rows=num_rows,
            vocab_size=vocab_size,
            device=device,
            temperature=dense[0],
            is_greedy=is_greedy_mask,
            top_k=top_k_ids,
            top_p=dense[1],
            min_p=dense[2],
            typical_p=dense[3],
            repetition_penalty=dense[4],
            repetition_ids=device_edits[0],
            frequency_edit=device_edits[1],
            bias_edit=device_edits[2],
            banned_ids=device_edits[3],
            generators=tuple(generators),
            seeded_rows=tuple(r for r, g in enumerate(generators) if g is not None),
            is_seeded=is_seeded_mask,
            num_logprobs=tuple(p.logprobs for p in params),
            logprobs_modes=tuple(p.logprobs_mode for p in params),
            greedy_rows=greedy_rows,
            sampled_rows=sampled_rows,
            greedy_row_ids=greedy_ids,
            sampled_row_ids=sampled_ids,
            truncated_positions=truncated_positions,
            truncated_position_ids=truncated_ids,
            typical_positions=typical_positions,
            typical_position_ids=typical_ids,
            sampled_seeded=sampled_seeded,
            max_top_k=max((top_k[r] for r in sampled_rows), default=0),
            needs_row_logsumexp=any(top_k[r] == 0 and params[r].top_p < 1 for r in sampled_rows),
            all_greedy=all(is_greedy),
            any_greedy=any(is_greedy),
            any_top_k=any(k > 0 and not g for k, g in zip(top_k, is_greedy, strict=True)),
            any_top_p=any(p.top_p < 1 and not g for g, p in zip(is_greedy, params, strict=True)),
            any_min_p=any(p.min_p > 0 and not g for g, p in zip(is_greedy, params, strict=True)),
            any_typical=bool(typical_positions),
        )


# a sparse edit on the host: (flat_ids (N,) int64, row_ids (N,) int64, values float32)
HostEdit = tuple[np.ndarray, np.ndarray, np.ndarray]
_NO_VALUES = np.empty(0, dtype=np.float32)


def _token_array(ids: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(ids, torch.Tensor):
        return ids.detach().reshape(-1).to("cpu", torch.int64).numpy()
    return np.asarray(ids, dtype=np.int64).reshape(-1)


def _flat_token_ids(
    rows: list[int], token_lists: list[Sequence[int]], vocab_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids ``row * V + token`` (N,) of all given tokens and their counts, unique, sorted.

    Tokens outside ``[0, V)`` (padding, ids beyond the logits width) are dropped.
    """
    parts = [_token_array(ids) for ids in token_lists]
    lengths = np.array([len(t) for t in parts], dtype=np.int64)
    token_ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    row_ids = np.repeat(np.asarray(rows, dtype=np.int64), lengths)
    in_range = (token_ids >= 0) & (token_ids < vocab_size)
    flat = row_ids[in_range] * vocab_size + token_ids[in_range]
    unique, counts = np.unique(flat, return_counts=True)
    return unique.astype(np.int64), counts


def _repetition_ids(params, prompt_token_ids, output_token_ids, vocab_size) -> HostEdit | None:
    rows = [r for r, p in enumerate(params) if p.repetition_penalty != 1]
    if not rows:
        return None
    token_lists = []
    for r in rows:
        token_lists.append(prompt_token_ids[r])
        token_lists.append(output_token_ids[r])
    flat, _ = _flat_token_ids([r for r in rows for _ in (0, 1)], token_lists, vocab_size)
    return flat, flat // vocab_size, _NO_VALUES


def _frequency_edit(params, output_token_ids, vocab_size) -> HostEdit | None:
    rows = [r for r, p in enumerate(params) if p.frequency_penalty or p.presence_penalty]
    if not rows:
        return None
    flat, counts = _flat_token_ids(rows, [output_token_ids[r] for r in rows], vocab_size)
    row_ids = flat // vocab_size
    frequency = np.array([p.frequency_penalty for p in params], dtype=np.float32)
    presence = np.array([p.presence_penalty for p in params], dtype=np.float32)
    # logit -= frequency * count + presence * (count > 0); counts here are all > 0
    values = frequency[row_ids] * counts.astype(np.float32) + presence[row_ids]
    return flat, row_ids, values.astype(np.float32)


def _bias_edit(params, vocab_size) -> HostEdit | None:
    flat, values = [], []
    for row, p in enumerate(params):
        if p.logit_bias is None:
            continue
        for token_id, bias in p.logit_bias.items():
            flat.append(row * vocab_size + token_id)
            values.append(bias)
    if not flat:
        return None
    flat_ids = np.asarray(flat, dtype=np.int64)
    return flat_ids, flat_ids // vocab_size, np.asarray(values, dtype=np.float32)


def _banned_ids(params, output_token_ids, eos, vocab_size) -> HostEdit | None:
    flat = []
    for row, p in enumerate(params):
        if p.min_tokens <= 0 or len(output_token_ids[row]) >= p.min_tokens:
            continue
        banned = set(p.stop_token_ids) | (set() if p.ignore_eos else set(eos))
        flat.extend(row * vocab_size + t for t in sorted(banned) if 0 <= t < vocab_size)
    if not flat:
        return None
    flat_ids = np.asarray(flat, dtype=np.int64)
    return flat_ids, flat_ids // vocab_size, _NO_VALUES
