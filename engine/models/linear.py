"""Linear layers for decode-sized batches: the CPU matmul layout that stays memory-bound.

``y = x @ W.T (+ b)`` for ``x (M, K)``, ``W (N, K)``. On CPU, fp32 ``F.linear`` with
``2 <= M <= 16`` rows takes MKL/oneDNN's packed-GEMM path, which costs 2-3x the one-row GEMV
on this model's shapes, although the weights (the memory traffic that bounds a decode step) are
read once either way. Computing ``(W @ x.T).T`` instead hands the library a tall-skinny
product it runs as a few GEMV-like sweeps over ``W``: for 2-4 rows the decoder layers cost
1.3-1.8x one row instead of 2-3x, and for the LM head (``N`` = vocabulary) 2-11 rows cost
0.6-1.7x one ``F.linear`` row instead of 2.3-3.7x (2-core EPYC, SmolLM2-135M shapes; see
benchmarks/RESULTS.md, "Small-batch matmuls"). The one-row LM head is fastest as ``x @ W_t``
with a contiguous ``(K, N)`` copy of ``W`` (a GEMV that streams ``W_t`` row by row).

bfloat16 on CPU goes through oneDNN with the weight reordered once into its blocked layout
(``mkldnn._reorder_linear_weight``, cached on the weight tensor and rebuilt when the weight
changes): the same products bit for bit, 1.3-2.6x faster than ``F.linear`` on bf16 for 1-8
rows, and 1.0-1.4x for 32-256 rows, the LM head included (the reorder ATen's own bf16 GEMM
redoes every call; "Packed bf16 matmuls" in benchmarks/RESULTS.md). This is what inductor's
weight freezing does on CPU; here it needs no compile.

Results equal ``F.linear`` up to float summation order. On CUDA everything is ``F.linear``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from formcast.engine.opaque_ops import opaque_op

MAX_ROWS_TRANSPOSED = 4  # decoder layers: (W @ x.T).T for 2..4 rows, F.linear otherwise
MAX_ROWS_TRANSPOSED_HEAD = 11  # LM head: (W @ x.T).T for 2..11 rows (slower from 12 on)
_PACKED_ATTR = "_formcast_onednn_bf16"  # (weight version, reordered weight) on the weight


def _has_onednn_bf16() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    except (AttributeError, RuntimeError):
        return False


HAS_ONEDNN_BF16 = _has_onednn_bf16()


def uses_packed_bf16(x: torch.Tensor) -> bool:
    """True when ``x @ W.T`` takes the reordered-weight oneDNN path (bf16 on a capable CPU)."""
    return HAS_ONEDNN_BF16 and x.is_cpu and x.dtype == torch.bfloat16


def packed_bf16_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight (N, K)`` reordered for oneDNN's bf16 GEMM, made once per weight version.

    The reordered tensor is only an argument of ``mkldnn._linear_pointwise``; its elements are
    in oneDNN's blocked order. It is kept on the weight tensor itself, so it lives and dies with
    the model, and an in-place update of the weight (a new ``_version``) rebuilds it.
    """
    cached = getattr(weight, _PACKED_ATTR, None)
    if cached is not None and cached[0] == weight._version:
        return cached[1]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1)
    setattr(weight, _PACKED_ATTR, (weight._version, packed))
    return packed


def _packed_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(
        x.contiguous(), packed_bf16_weight(weight), bias, "none", [], ""
    )


def _cpu_linear_fake(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))


@opaque_op(
    "formcast::cpu_linear", "(Tensor x, Tensor weight, Tensor? bias) -> Tensor", _cpu_linear_fake
)
def _cpu_linear_op(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    # opaque to inductor, whose own lowering of small bf16 GEMMs on CPU is far slower
    # (3.3 ms vs 0.18 ms for a 1 x 576 x 3072 product); contiguous, as its fake says
    return _linear_eager(x, weight, bias).contiguous()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias`` for ``x (M, K)``, ``weight (N, K)``, picking the CPU layout by M.

    Parameters
    ----------
    x : torch.Tensor
        ``(M, K)`` input rows.
    weight : torch.Tensor
        ``(N, K)`` weight, as stored by ``nn.Linear``.
    bias : torch.Tensor or None
        ``(N,)`` bias.

    Returns
    -------
    torch.Tensor
        ``(M, N)``.
    """
    if x.is_cpu and torch.compiler.is_compiling():
        return _cpu_linear_op(x, weight, bias)
    return _linear_eager(x, weight, bias)


def _linear_eager(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    if uses_packed_bf16(x) and weight.dtype == torch.bfloat16 and x.dim() == 2 and x.shape[0]:
        return _packed_linear(x, weight, bias)
    if x.is_cpu and x.dim() == 2 and 2 <= x.shape[0] <= MAX_ROWS_TRANSPOSED:
        out = (weight @ x.T).T
        return out if bias is None else out + bias
    return F.linear(x, weight, bias)


class LMHead:
    """Logits ``hidden @ W.T`` for the vocabulary projection ``W (V, H)`` (see module doc).

    Keeps a contiguous ``(H, V)`` copy of ``W`` on CPU for the one-row case (``H * V`` extra
    elements), built on the first CPU call whatever its row count: after the weights are
    loaded, and at the first request rather than whenever a step first has one row (under
    steady concurrency that can come much later, a one-time +108 MiB for SmolLM2-135M that
    read as a leak in the server soak).
    """

    def __init__(self) -> None:
        self._weight_t: torch.Tensor | None = None
        self._source: torch.Tensor | None = None
        self._version = -1

    def __call__(self, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``(M, H)`` hidden rows -> ``(M, V)`` logits in the weight's dtype."""
        num_rows = hidden.shape[0]
        if not hidden.is_cpu or num_rows == 0:
            return F.linear(hidden, weight)
        if uses_packed_bf16(hidden) and weight.dtype == torch.bfloat16:
            return _packed_linear(hidden, weight, None)
        weight_t = self._transposed(weight)  # (H, V)
        if num_rows == 1:
            return hidden @ weight_t
        if num_rows <= MAX_ROWS_TRANSPOSED_HEAD:
            return (weight @ hidden.T).T
        return F.linear(hidden, weight)

    def _transposed(self, weight: torch.Tensor) -> torch.Tensor:
        # the copy is tied to the weight tensor it was made from (same storage, same version)
        if self._weight_t is None or self._source is not weight or self._version != weight._version:
            self._weight_t = weight.detach().T.contiguous()
            self._source = weight
            self._version = weight._version
        return self._weight_t
