"""Triton kernels for paged attention (GPU path), each with a torch reference of equal signature.

- ``store_kv``: write new K/V rows into their cache slots (ref: ``torch_backend.store_kv_torch``).
- ``paged_decode_attention``: one query per sequence against its paged context
  (ref: ``torch_backend.paged_decode_attention_torch``). Split-KV (flash-decoding): when the
  batch does not fill the GPU, each sequence's context is cut into ``num_splits`` ranges of
  key tiles, one program each writes a partial ``(max, sum, acc)``, and a second kernel
  combines them (`decode_num_splits` picks the count).
- ``paged_prefill_attention``: ragged query spans against their paged contexts (cached prefix +
  the span itself, already stored), causal with offset ``context_len - query_len``
  (ref: ``torch_backend.paged_prefill_attention_torch``).
- ``paged_tree_attention_varlen``: token trees (each node sees the prefix and its ancestors;
  ref: ``tree.paged_tree_attention_torch``). Same kernel as prefill, with the tree
  mask in place of the causal one.

Cache layout ``(Hkv, num_blocks, block_size, D)``; the slot ``s`` of KV head ``h`` starts at
``h * stride_head + s * D``; position ``p`` of a sequence lives in slot ``bt[p // block_size] *
block_size + p % block_size``. Every attention program owns one KV head and the ``GROUP = Hq /
Hkv`` query heads reading it (query head ``h`` reads KV head ``h // GROUP``), so a K/V tile is
loaded once per group. A program's query rows (tokens x group heads, padded to at least 16 rows
for ``tl.dot``) meet a tile of consecutive key positions at a time (``KV_TILE``; fewer for fp32
caches), gathered from their pages, so any power-of-two ``block_size >= 16`` works: ``S = Q
K^T`` and ``P V`` are ``tl.dot`` products on operands in the cache dtype (bf16 / fp16 on tensor
cores; fp32 caches multiply in IEEE fp32) with fp32 accumulation. Softmax is online, in base 2:
running max ``m``, running sum ``l``, ``acc`` rescaled by ``2^(m_old - m_new)`` at every tile.
`TritonAttention.forward` reads nothing from the device (grids come from host-side bounds).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from formcast.engine.attention.metadata import AttentionMetadata
from formcast.errors import EngineConfigError, EngineError

# Kernels use only builtins plus the helpers of this file, so they also run under
# TRITON_INTERPRET=1 when triton itself was first imported in compiled mode by another module of
# the process (no triton.language.standard helpers such as tl.sum / tl.max / tl.cdiv, which
# are then compiled-mode functions the interpreter cannot call). The reductions combine with
# standard's own combine functions: compiled, they are what tl.max / tl.sum lower to; the
# interpreter recognises them by identity and runs a numpy reduction without calling them
# (its generic path calls the combine function once per element).
_max_combine = tl.standard._elementwise_max
_sum_combine = tl.standard._sum_combine

DEFAULT_TARGET_PROGRAMS = 132  # H100 SXM's SM count: decode programs to aim for (split-KV)
MIN_BLOCK_SIZE = 16  # tl.dot needs every dimension >= 16 (EngineConfig enforces the same)
KV_TILE = 64  # key positions per inner-loop step (gathered from their pages)
SPAN_ROWS = 64  # query rows (tokens x group heads) per prefill / tree program
SPAN_WARPS = 8  # warps of a prefill / tree program (with 4, its 64 x 64 tiles spill on sm_80)
DECODE_WARPS = 4
# fp32 caches: IEEE fp32 products run on the FMA units, smaller tiles keep them in registers
FP32_KV_TILE = 32
FP32_SPAN_ROWS = 32
MIN_DOT_ROWS = 16  # decode programs pad their group's query rows to this
MAX_SPLITS = 64  # split-KV partitions per sequence at most
LOG2E = 1.4426950408889634


@triton.jit
def _mma(a, b, acc, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    # acc + a @ b in fp32. UPCAST: the interpreter multiplies bf16 operands as raw uint16 bits
    # (triton 3.9), so there they are widened first: products of bf16 values are exact in
    # fp32 and summed in fp32, as on the tensor cores.
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _store_kv_kernel(
    k_ptr,
    v_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_ptr,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_cache_head,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0)
    head = tl.program_id(1)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < D
    dst = head * stride_cache_head + slot * D + d
    k = tl.load(k_ptr + token * stride_kt + head * stride_kh + d, mask=d_mask)
    v = tl.load(v_ptr + token * stride_vt + head * stride_vh + d, mask=d_mask)
    tl.store(k_cache_ptr + dst, k, mask=d_mask)
    tl.store(v_cache_ptr + dst, v, mask=d_mask)


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write ``k, v (T, Hkv, D)`` into ``k_cache, v_cache (Hkv, N, bs, D)`` at ``slot_mapping``."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    _store_kv_kernel[(num_tokens, num_kv_heads)](
        k,
        v,
        k_cache,
        v_cache,
        slot_mapping,
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        k_cache.stride(0),
        D=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
    )


@triton.jit
def _attend_tile(
    q,
    k_cache_ptr,
    v_cache_ptr,
    bt_row_ptr,
    cache_base,
    tile,
    context_len,
    d,
    d_mask,
    qk_scale,
    BLOCK_SIZE: tl.constexpr,
    KV_TILE: tl.constexpr,
    D: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # Key positions tile * KV_TILE + [0, KV_TILE) of one sequence: gather their slots, load
    # K/V (KV_TILE, BLOCK_D) in the cache dtype, return S = (q K^T) * scale * log2(e) (rows x
    # KV_TILE, fp32, -inf beyond context_len) and V; the caller masks S further and folds it in.
    pos = tile * KV_TILE + tl.arange(0, KV_TILE)
    key_mask = pos < context_len
    page = tl.load(bt_row_ptr + pos // BLOCK_SIZE, mask=key_mask, other=0).to(tl.int64)
    slots = page * BLOCK_SIZE + pos % BLOCK_SIZE
    rows = cache_base + slots[:, None] * D + d[None, :]
    kv_mask = key_mask[:, None] & d_mask[None, :]
    k = tl.load(k_cache_ptr + rows, mask=kv_mask, other=0.0)
    v = tl.load(v_cache_ptr + rows, mask=kv_mask, other=0.0)
    zero = tl.full([q.shape[0], KV_TILE], 0.0, tl.float32)
    s = _mma(q, tl.trans(k), zero, PRECISION, UPCAST) * qk_scale
    s = tl.where(key_mask[None, :], s, float("-inf"))
    return pos, s, v


@triton.jit
def _online_softmax_step(s, v, m_i, l_i, acc, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    # Fold the masked log2-domain scores s (rows, KV_TILE) and values v into (m, l, acc):
    # m' = max(m, max_j s_j), l' = l 2^(m - m') + sum_j 2^(s_j - m'), acc' = acc 2^(m - m') +
    # P V. Every row sees at least one key of the first tile it meets, so m' is finite.
    m_new = tl.maximum(m_i, tl.reduce(s, 1, _max_combine))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.reduce(p, 1, _sum_combine)
    acc = _mma(p.to(v.dtype), v, acc * alpha[:, None], PRECISION, UPCAST)
    return m_new, l_i, acc


@triton.jit
def _paged_decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    m_part_ptr,
    l_part_ptr,
    acc_part_ptr,
    qk_scale,
    stride_qb,
    stride_qh,
    stride_ob,
    stride_oh,
    stride_bt,
    stride_cache_head,
    stride_part_b,
    stride_part_h,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    KV_TILE: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    SPLIT_KV: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # One (sequence, KV head, split) per program; rows g < GROUP of the (BLOCK_G, BLOCK_D) query
    # tile are query heads kv_head * GROUP + g, the rest is padding (zeros, never stored).
    # Split s of S covers key tiles [s * per, min((s + 1) * per, n)) with n = cdiv(context_len,
    # KV_TILE) and per = cdiv(n, S): any S gives the same result, an empty split writes
    # (m, l, acc) = (-inf, 0, 0). SPLIT_KV false: S = 1 and the output is written directly.
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)
    context_len = tl.load(context_lens_ptr + seq)
    g = tl.arange(0, BLOCK_G)
    g_mask = g < GROUP
    head = kv_head * GROUP + g  # (BLOCK_G,)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < D
    q_mask = g_mask[:, None] & d_mask[None, :]
    q_rows = seq.to(tl.int64) * stride_qb + head[:, None] * stride_qh + d[None, :]
    q = tl.load(q_ptr + q_rows, mask=q_mask, other=0.0).to(k_cache_ptr.dtype.element_ty)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_G], 0.0, tl.float32)
    acc = tl.full([BLOCK_G, BLOCK_D], 0.0, tl.float32)
    num_tiles = (context_len + KV_TILE - 1) // KV_TILE
    per_split = (num_tiles + num_splits - 1) // num_splits
    tile_end = tl.minimum((split + 1) * per_split, num_tiles)
    cache_base = kv_head.to(tl.int64) * stride_cache_head
    bt_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_bt
    for tile in range(split * per_split, tile_end):
        pos, s, v = _attend_tile(
            q,
            k_cache_ptr,
            v_cache_ptr,
            bt_row_ptr,
            cache_base,
            tile,
            context_len,
            d,
            d_mask,
            qk_scale,
            BLOCK_SIZE,
            KV_TILE,
            D,
            PRECISION,
            UPCAST,
        )
        m_i, l_i, acc = _online_softmax_step(s, v, m_i, l_i, acc, PRECISION, UPCAST)
    if SPLIT_KV:
        # partials (B, Hq, S) and (B, Hq, S, D), fp32, unnormalised
        part = seq.to(tl.int64) * stride_part_b + head * stride_part_h + split  # (BLOCK_G,)
        tl.store(m_part_ptr + part, m_i, mask=g_mask)
        tl.store(l_part_ptr + part, l_i, mask=g_mask)
        tl.store(acc_part_ptr + part[:, None] * D + d[None, :], acc, mask=q_mask)
    else:
        out = acc / l_i[:, None]
        o_rows = seq.to(tl.int64) * stride_ob + head[:, None] * stride_oh + d[None, :]
        tl.store(out_ptr + o_rows, out.to(out_ptr.dtype.element_ty), mask=q_mask)


@triton.jit
def _split_kv_reduce_kernel(
    out_ptr,
    m_part_ptr,
    l_part_ptr,
    acc_part_ptr,
    num_splits,
    stride_part_b,
    stride_part_h,
    stride_ob,
    stride_oh,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    # One (sequence, query head) per program: with M = max_s m_s and w_s = 2^(m_s - M),
    # out = sum_s w_s acc_s / sum_s w_s l_s (an empty split has m_s = -inf: w_s = 0). Split 0
    # holds the first key, so M is finite.
    seq = tl.program_id(0)
    head = tl.program_id(1)
    s = tl.arange(0, BLOCK_S)
    s_mask = s < num_splits
    d = tl.arange(0, BLOCK_D)
    d_mask = d < D
    part = seq.to(tl.int64) * stride_part_b + head * stride_part_h + s  # (BLOCK_S,)
    m = tl.load(m_part_ptr + part, mask=s_mask, other=float("-inf"))
    l_s = tl.load(l_part_ptr + part, mask=s_mask, other=0.0)
    acc_mask = s_mask[:, None] & d_mask[None, :]
    acc = tl.load(acc_part_ptr + part[:, None] * D + d[None, :], mask=acc_mask, other=0.0)
    w = tl.exp2(m - tl.reduce(m, 0, _max_combine))  # (BLOCK_S,)
    total = tl.reduce(l_s * w, 0, _sum_combine)
    out = tl.reduce(acc * w[:, None], 0, _sum_combine) / total  # (BLOCK_D,)
    o_rows = seq.to(tl.int64) * stride_ob + head * stride_oh + d
    tl.store(out_ptr + o_rows, out.to(out_ptr.dtype.element_ty), mask=d_mask)


def decode_num_splits(
    num_seqs: int,
    num_kv_heads: int,
    max_context_len: int,
    target_programs: int = DEFAULT_TARGET_PROGRAMS,
    kv_tile: int = KV_TILE,
) -> int:
    """How many split-KV partitions the decode kernel uses per sequence.

    One decode program per (sequence, KV head) already fills the machine when there are at
    least ``target_programs`` of them: 1 split. Otherwise enough splits to reach the target,
    at most one per ``KV_TILE`` keys of the longest context and at most ``MAX_SPLITS``.

    Parameters
    ----------
    num_seqs, num_kv_heads : int
        Batch size and KV heads of the layer.
    max_context_len : int
        An upper bound of the batch's context lengths (the kernel partitions each sequence by
        its own length, so any bound is correct; a tight one wastes fewer programs).
    target_programs : int
        Programs to aim for, about the GPU's SM count.
    kv_tile : int
        Key positions per tile of the kernel (`KV_TILE`; `FP32_KV_TILE` for fp32 caches).

    Returns
    -------
    int
        The number of splits, ``>= 1``.
    """
    programs = max(1, num_seqs * num_kv_heads)
    if programs >= target_programs:
        return 1
    by_occupancy = triton.cdiv(target_programs, programs)
    by_length = triton.cdiv(max(1, max_context_len), kv_tile)
    return max(1, min(by_occupancy, by_length, MAX_SPLITS))


def _tiles(dtype: torch.dtype) -> tuple[int, int]:
    """(key positions per tile, prefill / tree query rows per program) for a cache dtype."""
    if dtype == torch.float32:
        return FP32_KV_TILE, FP32_SPAN_ROWS
    return KV_TILE, SPAN_ROWS


def _interpreted() -> bool:
    return type(_paged_decode_kernel).__name__ == "InterpretedFunction"


def _check_layout(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> int:
    """Validate the cache against what the kernels support; the GQA group size."""
    num_kv_heads, _, block_size, head_dim = k_cache.shape
    if block_size < MIN_BLOCK_SIZE or block_size & (block_size - 1):
        raise EngineConfigError(
            f"block_size={block_size} is not supported by the Triton attention kernels: it must "
            f"be a power of two >= {MIN_BLOCK_SIZE} (tl.dot tiles need dimensions >= 16)"
        )
    if v_cache.shape != k_cache.shape or v_cache.dtype != k_cache.dtype:
        raise EngineError(
            f"k_cache {tuple(k_cache.shape)} {k_cache.dtype} and v_cache "
            f"{tuple(v_cache.shape)} {v_cache.dtype} differ"
        )
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise EngineError("the Triton attention kernels need contiguous KV caches")
    if k_cache.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise EngineError(f"KV cache dtype {k_cache.dtype} is not supported by the kernels")
    num_q_heads = q.shape[1]
    if q.shape[2] != head_dim or num_q_heads % num_kv_heads:
        raise EngineError(
            f"queries {tuple(q.shape)} do not fit the cache {tuple(k_cache.shape)}: need the same "
            "head dim and a multiple of the KV heads"
        )
    if q.stride(2) != 1:
        raise EngineError("the Triton attention kernels need queries with a unit last stride")
    return num_q_heads // num_kv_heads


def _dot_flags(k_cache: torch.Tensor) -> dict[str, object]:
    """tl.dot settings: fp32 caches multiply in IEEE fp32 (no TF32 rounding); 16-bit ones on
    tensor cores; bf16 widened under the interpreter (see `_mma`)."""
    is_fp32 = k_cache.dtype == torch.float32
    return {
        "PRECISION": "ieee" if is_fp32 else "tf32",
        "UPCAST": k_cache.dtype == torch.bfloat16 and _interpreted(),
    }


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    *,
    target_programs: int = DEFAULT_TARGET_PROGRAMS,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q (B, Hq, D)``, each at its sequence's last position; ``(B, Hq, D)``.

    Parameters
    ----------
    q : torch.Tensor
        ``(B, Hq, D)`` queries (unit last stride).
    k_cache, v_cache : torch.Tensor
        ``(Hkv, num_blocks, block_size, D)`` contiguous; ``block_size`` a power of two >= 16.
    block_tables : torch.Tensor
        ``(B, M)`` int32 block ids (rows padded); ``M * block_size`` bounds every context.
    context_lens : torch.Tensor
        ``(B,)`` int32, each >= 1.
    scale : float
        Softmax scale.
    target_programs : int
        Programs to aim for when choosing the split-KV count (`decode_num_splits`).
    out : torch.Tensor, optional
        ``(B, Hq, D)`` to write into (a view is fine); a new tensor otherwise.

    Returns
    -------
    torch.Tensor
        ``out``. Needs no host-device synchronisation.
    """
    group = _check_layout(q, k_cache, v_cache)
    num_seqs, num_q_heads, head_dim = q.shape
    num_kv_heads, _, block_size, _ = k_cache.shape
    if out is None:
        out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    kv_tile, _ = _tiles(k_cache.dtype)
    # the table's width bounds the contexts without reading context_lens on the host
    max_context_len = block_tables.shape[1] * block_size
    num_splits = decode_num_splits(
        num_seqs, num_kv_heads, max_context_len, target_programs, kv_tile
    )
    block_d = max(16, triton.next_power_of_2(head_dim))
    if num_splits > 1:
        part_shape = (num_seqs, num_q_heads, num_splits)
        m_part = torch.empty(part_shape, dtype=torch.float32, device=q.device)
        l_part = torch.empty_like(m_part)
        acc_part = torch.empty((*part_shape, head_dim), dtype=torch.float32, device=q.device)
    else:  # unread without SPLIT_KV
        m_part = l_part = acc_part = out
    _paged_decode_kernel[(num_seqs, num_kv_heads, num_splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        out,
        m_part,
        l_part,
        acc_part,
        scale * LOG2E,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        num_q_heads * num_splits,
        num_splits,
        GROUP=group,
        BLOCK_G=max(MIN_DOT_ROWS, triton.next_power_of_2(group)),
        BLOCK_SIZE=block_size,
        KV_TILE=kv_tile,
        D=head_dim,
        BLOCK_D=block_d,
        SPLIT_KV=num_splits > 1,
        **_dot_flags(k_cache),
        num_warps=DECODE_WARPS,
    )
    if num_splits > 1:
        _split_kv_reduce_kernel[(num_seqs, num_q_heads)](
            out,
            m_part,
            l_part,
            acc_part,
            num_splits,
            num_q_heads * num_splits,
            num_splits,
            out.stride(0),
            out.stride(1),
            D=head_dim,
            BLOCK_D=block_d,
            BLOCK_S=triton.next_power_of_2(num_splits),
        )
    return out


@triton.jit
def _paged_span_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    query_start_loc_ptr,
    lens_ptr,
    node_mask_ptr,
    out_ptr,
    qk_scale,
    stride_qt,
    stride_qh,
    stride_ot,
    stride_oh,
    stride_bt,
    stride_cache_head,
    stride_mask,
    IS_TREE: tl.constexpr,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    TOKENS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    KV_TILE: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # One (span, KV head, tile of TOKENS = BLOCK_M / GROUP_PAD tokens) per program; row r of the
    # (BLOCK_M, BLOCK_D) query tile is token tile * TOKENS + r // GROUP_PAD of the span and
    # query head kv_head * GROUP + r % GROUP_PAD (rows past the span or past GROUP are padding).
    # Causal span (IS_TREE false): ``lens`` are context lengths, token t of a span of L sits at
    # position context_len - L + t and sees keys 0..its position. Token tree (IS_TREE): ``lens``
    # are prefix lengths, node i is stored at prefix_len + i and sees the prefix plus the nodes
    # of ``node_mask[row]``.
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    tile = tl.program_id(2)
    q_start = tl.load(query_start_loc_ptr + seq)
    query_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    if tile * TOKENS < query_len:
        if IS_TREE:
            prefix_len = tl.load(lens_ptr + seq)
            context_len = prefix_len + query_len
        else:
            context_len = tl.load(lens_ptr + seq)
            prefix_len = context_len - query_len
        # keys beyond the tile's last query position are masked for every row (a node's
        # ancestors precede it): stop there
        last_key = tl.minimum(context_len, prefix_len + (tile + 1) * TOKENS)
        r = tl.arange(0, BLOCK_M)
        t = tile * TOKENS + r // GROUP_PAD  # (BLOCK_M,) token of the span
        g = r % GROUP_PAD
        row_mask = (t < query_len) & (g < GROUP)
        head = kv_head * GROUP + g
        d = tl.arange(0, BLOCK_D)
        d_mask = d < D
        io_mask = row_mask[:, None] & d_mask[None, :]
        token_rows = (q_start + t).to(tl.int64)
        q_rows = token_rows[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :]
        q = tl.load(q_ptr + q_rows, mask=io_mask, other=0.0).to(k_cache_ptr.dtype.element_ty)
        q_pos = prefix_len + t  # (BLOCK_M,) absolute positions
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.full([BLOCK_M], 0.0, tl.float32)
        acc = tl.full([BLOCK_M, BLOCK_D], 0.0, tl.float32)
        cache_base = kv_head.to(tl.int64) * stride_cache_head
        bt_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_bt
        for key_tile in range(0, (last_key + KV_TILE - 1) // KV_TILE):
            k_pos, s, v = _attend_tile(
                q,
                k_cache_ptr,
                v_cache_ptr,
                bt_row_ptr,
                cache_base,
                key_tile,
                context_len,
                d,
                d_mask,
                qk_scale,
                BLOCK_SIZE,
                KV_TILE,
                D,
                PRECISION,
                UPCAST,
            )
            if IS_TREE:
                node = k_pos - prefix_len  # key's node index (negative: a prefix key)
                is_node = (node >= 0) & (node < query_len)
                ancestor = tl.load(
                    node_mask_ptr + token_rows[:, None] * stride_mask + node[None, :],
                    mask=row_mask[:, None] & is_node[None, :],
                    other=0,
                )
                valid = (k_pos < prefix_len)[None, :] | (ancestor != 0)
            else:
                valid = k_pos[None, :] <= q_pos[:, None]
            s = tl.where(valid, s, float("-inf"))
            m_i, l_i, acc = _online_softmax_step(s, v, m_i, l_i, acc, PRECISION, UPCAST)
        out = acc / l_i[:, None]
        o_rows = token_rows[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :]
        tl.store(out_ptr + o_rows, out.to(out_ptr.dtype.element_ty), mask=io_mask)


def _launch_span_kernel(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    lens: torch.Tensor,
    node_mask: torch.Tensor | None,
    scale: float,
    max_query_len: int | None,
    out: torch.Tensor | None,
) -> torch.Tensor:
    group = _check_layout(q, k_cache, v_cache)
    num_rows, num_q_heads, head_dim = q.shape
    num_kv_heads, _, block_size, _ = k_cache.shape
    if out is None:
        out = torch.empty_like(q)
    if num_rows == 0:
        return out
    if max_query_len is None:  # reads the device: callers with the number at hand pass it
        max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max())
    kv_tile, span_rows = _tiles(k_cache.dtype)
    group_pad = triton.next_power_of_2(group)
    tokens = max(1, span_rows // group_pad)  # tokens per program: rows = tokens x group_pad
    grid = (lens.shape[0], num_kv_heads, triton.cdiv(max_query_len, tokens))
    is_tree = node_mask is not None
    _paged_span_kernel[grid](
        q,
        k_cache,
        v_cache,
        block_tables,
        query_start_loc,
        lens,
        node_mask if is_tree else lens,  # unread without IS_TREE
        out,
        scale * LOG2E,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        node_mask.stride(0) if is_tree else 0,
        IS_TREE=is_tree,
        GROUP=group,
        GROUP_PAD=group_pad,
        TOKENS=tokens,
        BLOCK_SIZE=block_size,
        BLOCK_M=tokens * group_pad,
        KV_TILE=kv_tile,
        D=head_dim,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        **_dot_flags(k_cache),
        num_warps=SPAN_WARPS,
    )
    return out


def paged_prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    *,
    max_query_len: int | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Ragged causal attention of ``q (T, Hq, D)`` over paged contexts; ``(T, Hq, D)``.

    Parameters
    ----------
    q : torch.Tensor
        ``(T, Hq, D)``; sequence ``i`` owns rows ``query_start_loc[i] .. query_start_loc[i+1]``
        at the last positions of its context.
    k_cache, v_cache : torch.Tensor
        ``(Hkv, num_blocks, block_size, D)``, already holding the new tokens.
    block_tables : torch.Tensor
        ``(B, M)`` int32.
    query_start_loc : torch.Tensor
        ``(B + 1,)`` int32.
    context_lens : torch.Tensor
        ``(B,)`` int32 cached + new tokens.
    scale : float
        Softmax scale.
    max_query_len : int, optional
        An upper bound of the spans' lengths (sizes the grid); read from the device if absent.
    out : torch.Tensor, optional
        ``(T, Hq, D)`` to write into; a new tensor otherwise.

    Returns
    -------
    torch.Tensor
        ``out``.
    """
    return _launch_span_kernel(
        q,
        k_cache,
        v_cache,
        block_tables,
        query_start_loc,
        context_lens,
        None,
        scale,
        max_query_len,
        out,
    )


def paged_tree_attention_varlen(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    prefix_lens: torch.Tensor,
    node_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Tree attention of several token trees at once; ``(R, Hq, D)`` for ``q (R, Hq, D)``.

    Rows ``query_start_loc[b] .. query_start_loc[b + 1]`` of ``q`` are tree ``b``'s nodes
    (see `formcast.engine.attention.tree`). ``block_tables (B, M)`` int32, ``query_start_loc
    (B + 1,)`` int32, ``prefix_lens (B,)`` int32 (each >= 1), ``node_mask (R, Nmax)`` uint8
    (row's ancestors among its tree's nodes; ``Nmax`` bounds the trees' sizes, so the launch
    reads nothing from the device).
    """
    return _launch_span_kernel(
        q,
        k_cache,
        v_cache,
        block_tables,
        query_start_loc,
        prefix_lens,
        node_mask,
        scale,
        node_mask.shape[1],
        None,
    )


class TritonAttention:
    """The GPU path: store with Triton, decode kernel for single-token spans, prefill kernel
    for the rest, tree kernel for token-tree rows (``meta.tree``, computed causally by the
    prefill kernel first, then replaced). Same ``forward`` as ``attention.TorchAttention``.

    ``target_programs``: decode programs to aim for with split-KV; by default the SM count of
    the queries' CUDA device (read once), `DEFAULT_TARGET_PROGRAMS` elsewhere. A step launches
    without reading anything from the device.
    """

    def __init__(self, target_programs: int | None = None) -> None:
        self.target_programs = target_programs

    def _target_programs(self, device: torch.device) -> int:
        if self.target_programs is None:
            if device.type == "cuda":
                props = torch.cuda.get_device_properties(device)
                self.target_programs = int(props.multi_processor_count)
            else:
                self.target_programs = DEFAULT_TARGET_PROGRAMS
        return self.target_programs

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        """Attention output ``(T, Hq, D)``; writes the new ``k, v`` into the cache first."""
        if q.stride(2) != 1:  # CPU matmuls of 2-4 rows come out transposed (models/linear.py)
            q = q.contiguous()
        store_kv(k.contiguous(), v.contiguous(), k_cache, v_cache, meta.slot_mapping)
        num_decode = meta.num_decode_seqs
        out = torch.empty_like(q)
        if num_decode:
            paged_decode_attention(
                q[:num_decode],
                k_cache,
                v_cache,
                meta.block_tables[:num_decode],
                meta.context_lens[:num_decode],
                scale,
                target_programs=self._target_programs(q.device),
                out=out[:num_decode],
            )
        if num_decode < meta.context_lens.shape[0]:
            paged_prefill_attention(
                q[num_decode:],
                k_cache,
                v_cache,
                meta.block_tables[num_decode:],
                meta.query_start_loc[num_decode:] - num_decode,
                meta.context_lens[num_decode:],
                scale,
                max_query_len=meta.max_query_len,
                out=out[num_decode:],
            )
        tree = meta.tree
        if tree is not None:
            out[tree.rows] = paged_tree_attention_varlen(
                q[tree.rows],
                k_cache,
                v_cache,
                tree.block_tables,
                tree.query_start_loc,
                tree.prefix_lens,
                tree.node_mask,
                scale,
            )
        return out
