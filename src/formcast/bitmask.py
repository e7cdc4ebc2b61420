"""Token bitmasks, the ground floor every layer shares: the format, allocation, application.

One home for the mask format (grammar fills masks, samplers and the engine apply them; both
import this module and nothing above the ground floor).

Layout (shared with xgrammar): int32 ``(batch, ceil(V/32))``; bit ``i % 32`` of word ``i // 32``
set = token ``i`` allowed. Applying a mask writes ``-inf`` into every disallowed logit.

Width mismatch follows xgrammar exactly: the mask covers ``vocab_size = min(logits.shape[-1],
bitmask.shape[-1] * 32)`` columns (or the ``vocab_size`` given, which must not exceed that);
logits beyond it are left untouched (a warning is logged when the bitmask is narrower than the
logits, since those ids are then unconstrained; allocate the bitmask for the full logits width).
With ``indices``, only rows ``indices`` are masked, each with the bitmask row of the same index.

The Triton kernel runs when the logits are on CUDA; on CPU a numba kernel
(`apply_token_bitmask_inplace_cpu`, float32 / bfloat16 / float16 logits; it writes the
``-inf`` bit pattern word by word, skipping all-allowed words, about 5x less time than the
torch path's unpacking at a batch of 32); the torch path everywhere else. A row with
no allowed token is not repaired here: it becomes all ``-inf`` and the sampler must treat it as
a dead end (:class:`~formcast.errors.DeadEndError`), never as NaN probabilities.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from formcast.errors import GrammarError

logger = logging.getLogger(__name__)

_BLOCK_SIZE = 4096  # logits per Triton program; a multiple of 32


def allocate_token_bitmask(batch: int, vocab_size: int) -> torch.Tensor:
    """An int32 ``(batch, ceil(vocab_size / 32))`` bitmask with every token allowed (all ones).

    The tensor lives in CPU memory (pinned if CUDA is available) so matchers can fill it with
    a memcpy; move it to the logits' device before applying it.
    """
    if batch < 1 or vocab_size < 1:
        raise GrammarError(
            f"bitmask needs batch >= 1 and vocab_size >= 1, got {batch}, {vocab_size}"
        )
    pin = torch.cuda.is_available()
    return torch.full((batch, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=pin)


def check_bitmask(bitmask: torch.Tensor, num_words: int, vocab_size: int | None = None) -> None:
    """Raise ``GrammarError`` unless ``bitmask`` is an int32 ``(W,)`` or ``(B, W)`` tensor with
    ``W >= num_words`` (what a matcher needs to write one packed row)."""
    if bitmask.dtype != torch.int32:
        raise GrammarError(f"bitmask must be int32, got {bitmask.dtype}")
    if bitmask.dim() not in (1, 2) or bitmask.shape[-1] < num_words:
        size = "" if vocab_size is None else f" (vocab_size={vocab_size})"
        raise GrammarError(
            f"bitmask of shape {tuple(bitmask.shape)} cannot hold {num_words} words per row"
            f"{size}; use allocate_token_bitmask"
        )


# the last bitmask any matcher prepared: (tensor, data_ptr, num_words, numpy rows or None)
_last_prepared: tuple | None = None


def prepared_rows(
    bitmask: torch.Tensor, num_words: int, vocab_size: int | None = None
) -> np.ndarray | None:
    """Check ``bitmask`` (:func:`check_bitmask`) and return its ``(B, W)`` numpy view when rows
    can be filled by a numpy copy (CPU, 2-D, contiguous rows of exactly ``num_words`` words),
    else None. The last answer is kept process-wide, so the many matchers of one batch prepare
    the shared bitmask once, not once each (a numpy view costs tens of microseconds)."""
    global _last_prepared
    ptr = bitmask.data_ptr()
    shared = _last_prepared
    if shared is not None and shared[0] is bitmask and shared[1] == ptr and shared[2] == num_words:
        return shared[3]
    check_bitmask(bitmask, num_words, vocab_size)
    is_fast = (
        bitmask.device.type == "cpu"
        and bitmask.dim() == 2
        and bitmask.shape[1] == num_words
        and bitmask.stride(1) == 1
    )
    rows = bitmask.numpy() if is_fast else None
    _last_prepared = (bitmask, ptr, num_words, rows)  # the tensor keeps the view's memory alive
    return rows


def bitmask_row(bitmask: torch.Tensor, row: int) -> torch.Tensor:
    """The 1-D row ``row`` of a checked bitmask (the bitmask itself when it is 1-D)."""
    if bitmask.dim() == 1:
        return bitmask
    if not -bitmask.shape[0] <= row < bitmask.shape[0]:
        raise GrammarError(f"row {row} is out of range for a bitmask of {bitmask.shape[0]}")
    return bitmask[row]


def pack_row(is_allowed: np.ndarray) -> np.ndarray:
    """``(V,)`` bool -> its packed ``(ceil(V/32),)`` uint32 row: bit ``i % 32`` of word
    ``i // 32`` is token ``i``."""
    num_words = (len(is_allowed) + 31) // 32
    packed = np.zeros(4 * num_words, dtype=np.uint8)
    bits = np.packbits(is_allowed, bitorder="little")
    packed[: bits.size] = bits
    return packed.view(np.uint32)


def row_token_ids(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Ascending int64 ids of the tokens set in a packed row (ids below ``vocab_size``)."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


def copy_packed_row(target: torch.Tensor, words: np.ndarray) -> None:
    """Write packed words into a 1-D bitmask row (any device), zeroing the columns beyond."""
    num_words = len(words)
    if not (words.flags.writeable and words.flags.c_contiguous):
        words = np.array(words)  # memoised rows are read-only; torch.from_numpy wants writable
    target[:num_words].copy_(torch.from_numpy(words), non_blocking=True)
    if target.shape[0] > num_words:
        target[num_words:].zero_()


def allow_only_inplace(bitmask: torch.Tensor, row: int, token_ids: Sequence[int]) -> None:
    """Set bitmask row ``row`` to allow exactly ``token_ids`` (e.g. EOS after a finished text)."""
    target = bitmask_row(bitmask, row)
    words = np.zeros(target.shape[0], dtype=np.uint32)
    for token_id in token_ids:
        if not 0 <= token_id < 32 * len(words):
            raise GrammarError(f"token id {token_id} is outside a bitmask of {len(words)} words")
        words[token_id // 32] |= np.uint32(1 << (token_id % 32))
    target.copy_(torch.from_numpy(words.view(np.int32)))


_BIT_SHIFTS: dict[torch.device, torch.Tensor] = {}


def unpack_token_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool ``(B, vocab_size)`` allowed-token table from an int32 ``(B, ceil(V / 32))`` bitmask."""
    shifts = _BIT_SHIFTS.get(bitmask.device)
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)  # (32,)
        _BIT_SHIFTS[bitmask.device] = shifts
    # (B, W, 1) >> (32,) -> (B, W, 32); an arithmetic shift is fine since bit 0 alone is kept
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return bits.view(bitmask.shape[0], -1)[:, :vocab_size].bool()


def _mask_width(logits: torch.Tensor, bitmask: torch.Tensor, vocab_size: int | None) -> int:
    if bitmask.dtype != torch.int32:
        raise GrammarError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.device != bitmask.device:
        raise GrammarError(
            f"logits are on {logits.device} but the bitmask is on {bitmask.device}; "
            "move the bitmask first"
        )
    detected = min(logits.shape[-1], bitmask.shape[-1] * 32)
    if bitmask.shape[-1] * 32 < logits.shape[-1]:
        logger.warning(
            "bitmask covers %d tokens but logits have %d: the trailing logits are not masked",
            bitmask.shape[-1] * 32,
            logits.shape[-1],
        )
    if vocab_size is None:
        return detected
    if vocab_size > detected:
        raise GrammarError(f"vocab_size={vocab_size} exceeds the detected width {detected}")
    return vocab_size


def _row_indices(
    logits: torch.Tensor, indices: Sequence[int] | torch.Tensor | None
) -> torch.Tensor | None:
    if indices is None:
        return None
    rows = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
    num_rows = logits.shape[0] if logits.dim() == 2 else 1
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= num_rows):
        raise GrammarError(f"indices {rows.tolist()} out of range for {num_rows} logits rows")
    return rows


def apply_token_bitmask_inplace_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
) -> None:
    """Reference implementation (any device): disallowed logits become ``-inf`` in place."""
    width = _mask_width(logits, bitmask, vocab_size)
    rows = _row_indices(logits, indices)
    logits_2d = logits if logits.dim() == 2 else logits.unsqueeze(0)
    mask_2d = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    num_words = (width + 31) // 32
    if rows is not None:
        mask_2d = mask_2d[rows.to(mask_2d.device)]
    allowed = unpack_token_bitmask(mask_2d[:, :num_words], width)  # (R, width)
    if rows is None:
        logits_2d[:, :width].masked_fill_(~allowed, float("-inf"))
    else:
        target_rows = rows.to(logits.device)
        block = logits_2d[target_rows, :width]
        logits_2d[target_rows, :width] = block.masked_fill(~allowed, float("-inf"))


# -inf of each float dtype as the signed integer of the same width (IEEE 754 / bfloat16)
_NEG_INF_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float32: (torch.int32, -(1 << 23)),  # 0xFF800000
    torch.bfloat16: (torch.int16, -(1 << 7)),  # 0xFF80
    torch.float16: (torch.int16, -(1 << 10)),  # 0xFC00
}
_cpu_kernel_fn = None


def _cpu_kernel():  # built on first use: importing this module never needs numba
    global _cpu_kernel_fn
    if _cpu_kernel_fn is None:
        import numba

        @numba.njit(nogil=True, cache=True)
        def mask_rows_kernel(values, words, rows, width, neg_inf):  # pragma: no cover - numba
            # values (B, V) integer view of the logits; words (B, W) int32; rows (R,) int64
            num_words = (width + 31) // 32
            for k in range(rows.shape[0]):
                row = rows[k]
                for w in range(num_words):
                    word = words[row, w]
                    if word == -1:
                        continue  # all 32 allowed
                    base = w * 32
                    for bit in range(min(32, width - base)):
                        if (word >> bit) & 1 == 0:
                            values[row, base + bit] = neg_inf

        _cpu_kernel_fn = mask_rows_kernel
    return _cpu_kernel_fn


def apply_token_bitmask_inplace_cpu(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
) -> None:
    """CPU fast path (numba), same contract as :func:`apply_token_bitmask_inplace_torch` for
    float32 / bfloat16 / float16 logits whose last dimension is contiguous."""
    width = _mask_width(logits, bitmask, vocab_size)
    rows = _row_indices(logits, indices)
    logits_2d = logits if logits.dim() == 2 else logits.unsqueeze(0)
    mask_2d = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    if rows is None:
        rows = torch.arange(logits_2d.shape[0], dtype=torch.int64)
    int_dtype, neg_inf = _NEG_INF_BITS[logits.dtype]
    values = logits_2d.view(int_dtype).numpy()  # shares memory with the logits
    _cpu_kernel()(values, mask_2d.numpy(), rows.numpy(), width, neg_inf)


def _triton_kernel():  # built on first use so importing this module never needs triton
    import triton
    import triton.language as tl

    @triton.jit
    def apply_token_bitmask_kernel(
        logits_ptr,
        bitmask_ptr,
        indices_ptr,
        vocab_size,
        logits_row_stride,
        bitmask_row_stride,
        HAS_INDICES: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
    ):
        # grid = (num_rows, cdiv(vocab_size, BLOCK_SIZE)); one program masks BLOCK_SIZE logits
        row_id = tl.program_id(0)
        block_start = tl.program_id(1) * BLOCK_SIZE
        if HAS_INDICES:
            batch_id = tl.load(indices_ptr + row_id).to(tl.int64)
        else:
            batch_id = row_id.to(tl.int64)
        word_offsets = block_start // 32 + tl.arange(0, BLOCK_SIZE // 32)
        num_words = tl.cdiv(vocab_size, 32)
        words = tl.load(
            bitmask_ptr + batch_id * bitmask_row_stride + word_offsets,
            mask=word_offsets < num_words,
            other=0,
        )
        # (W, 32) bit b of word w = token block_start + 32 w + b
        is_banned = ((words[:, None] >> tl.arange(0, 32)[None, :]) & 1) == 0
        is_banned = tl.reshape(is_banned, (BLOCK_SIZE,))
        offsets = block_start + tl.arange(0, BLOCK_SIZE)
        tl.store(
            logits_ptr + batch_id * logits_row_stride + offsets,
            -float("inf"),
            mask=is_banned & (offsets < vocab_size),
        )

    return apply_token_bitmask_kernel


_KERNEL = None


def apply_token_bitmask_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
) -> None:
    """Triton implementation, same contract as :func:`apply_token_bitmask_inplace_torch`.

    Requires unit stride along the vocabulary; rows may be strided. Runs on CUDA, or on CPU
    tensors under ``TRITON_INTERPRET=1`` (how the tests exercise it).
    """
    global _KERNEL
    width = _mask_width(logits, bitmask, vocab_size)
    rows = _row_indices(logits, indices)
    logits_2d = logits if logits.dim() == 2 else logits.unsqueeze(0)
    mask_2d = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    if logits_2d.stride(1) != 1 or mask_2d.stride(1) != 1:
        raise GrammarError("the Triton bitmask kernel needs unit stride along the vocabulary")
    if _KERNEL is None:
        _KERNEL = _triton_kernel()
    num_rows = logits_2d.shape[0] if rows is None else len(rows)
    if num_rows == 0 or width == 0:
        return
    index_tensor = (
        rows.to(device=logits.device, dtype=torch.int32)
        if rows is not None
        else torch.zeros(1, dtype=torch.int32, device=logits.device)
    )
    grid = (num_rows, (width + _BLOCK_SIZE - 1) // _BLOCK_SIZE)
    _KERNEL[grid](
        logits_2d,
        mask_2d,
        index_tensor,
        width,
        logits_2d.stride(0),
        mask_2d.stride(0),
        HAS_INDICES=rows is not None,
        BLOCK_SIZE=_BLOCK_SIZE,
    )


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
) -> None:
    """Set every disallowed logit to ``-inf`` in place.

    Parameters
    ----------
    logits:
        ``(B, V)`` or ``(V,)`` float tensor.
    bitmask:
        int32 ``(B, ceil(V/32))`` (or ``(W,)``) on the same device as ``logits``.
    indices:
        Rows to mask (each with the bitmask row of the same index); all rows if ``None``.
    vocab_size:
        Columns to mask; defaults to ``min(V, bitmask.shape[-1] * 32)``.

    Dispatch: the Triton kernel for CUDA tensors, the numba kernel for CPU float32 / bfloat16
    / float16 logits, the torch path otherwise.
    """
    is_unit_stride = logits.stride(-1) == 1 and bitmask.stride(-1) == 1
    if logits.is_cuda and is_unit_stride:
        apply_token_bitmask_inplace_triton(logits, bitmask, indices, vocab_size=vocab_size)
    elif logits.device.type == "cpu" and is_unit_stride and logits.dtype in _NEG_INF_BITS:
        apply_token_bitmask_inplace_cpu(logits, bitmask, indices, vocab_size=vocab_size)
    else:
        apply_token_bitmask_inplace_torch(logits, bitmask, indices, vocab_size=vocab_size)
