"""Triton kernels for paged attention (GPU path), each with a torch reference of equal signature.

- ``store_kv``: write new K/V rows into their cache slots (ref: ``torch_backend.store_kv_torch``).
- ``paged_decode_attention``: one query per sequence against its paged context, online softmax
  over blocks (ref: ``torch_backend.paged_decode_attention_torch``).
- ``paged_prefill_attention``: ragged query spans against their paged contexts (cached prefix +
  the span itself, already stored), causal with offset ``context_len - query_len``
  (ref: ``torch_backend.paged_prefill_attention_torch``).
- ``paged_tree_attention_varlen``: token trees (each node sees the prefix and its ancestors;
  ref: ``tree.paged_tree_attention_torch``). Same kernel as prefill, with the tree
  mask in place of the causal one.

Cache layout ``(Hkv, num_blocks, block_size, D)``; the slot ``s`` of KV head ``h`` starts at
``h * stride_head + s * D``. Softmax is accumulated in float32: running max ``m``, running sum
``l``, ``acc`` rescaled by ``exp(m_old - m_new)`` at every block.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from formcast.engine.attention.metadata import AttentionMetadata

# Kernels use only builtins plus the combine functions below (no triton.language.standard
# helpers such as tl.sum / tl.max / tl.cdiv), so they also run under TRITON_INTERPRET=1 when
# triton itself was first imported in compiled mode by another module of the process.


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _sum_combine(a, b):
    return a + b


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
def _paged_decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    scale,
    stride_qb,
    stride_qh,
    stride_ob,
    stride_oh,
    stride_bt,
    stride_cache_head,
    GROUP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP
    context_len = tl.load(context_lens_ptr + seq)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < D
    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + d, mask=d_mask, other=0.0)
    q = q.to(tl.float32)
    offs = tl.arange(0, BLOCK_SIZE)
    m_i = tl.full([1], float("-inf"), tl.float32)
    l_i = tl.full([1], 0.0, tl.float32)
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    cache_base = kv_head.to(tl.int64) * stride_cache_head
    for j in range(0, (context_len + BLOCK_SIZE - 1) // BLOCK_SIZE):
        block = tl.load(block_tables_ptr + seq * stride_bt + j).to(tl.int64)
        key_mask = j * BLOCK_SIZE + offs < context_len
        rows = (block * BLOCK_SIZE + offs)[:, None] * D + d[None, :]
        mask2 = key_mask[:, None] & d_mask[None, :]
        k = tl.load(k_cache_ptr + cache_base + rows, mask=mask2, other=0.0).to(tl.float32)
        s = tl.reduce(k * q[None, :], 1, _sum_combine) * scale  # (BLOCK_SIZE,)
        s = tl.where(key_mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.reduce(s, 0, _max_combine))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m_i - m_new)
        v = tl.load(v_cache_ptr + cache_base + rows, mask=mask2, other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.reduce(p, 0, _sum_combine)
        acc = acc * alpha + tl.reduce(p[:, None] * v, 0, _sum_combine)
        m_i = m_new
    out = acc / l_i
    tl.store(
        out_ptr + seq * stride_ob + head * stride_oh + d,
        out.to(out_ptr.dtype.element_ty),
        mask=d_mask,
    )


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of ``q (B, Hq, D)`` (each at its sequence's last position); ``(B, Hq, D)``."""
    num_seqs, num_q_heads, head_dim = q.shape
    num_kv_heads, _, block_size, _ = k_cache.shape
    out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    _paged_decode_kernel[(num_seqs, num_q_heads)](
        q,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        out,
        scale,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        GROUP=num_q_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        D=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
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
    scale,
    stride_qt,
    stride_qh,
    stride_ot,
    stride_oh,
    stride_bt,
    stride_cache_head,
    stride_mask,
    IS_TREE: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # One (span, query head, BLOCK_M-row tile) per program. Causal span (IS_TREE false):
    # ``lens`` are context lengths, row r of a span of L sits at position context_len - L + r
    # and sees keys 0..its position. Token tree (IS_TREE): ``lens`` are prefix lengths, node i
    # is stored at prefix_len + i and sees the prefix plus the nodes of ``node_mask[row]``.
    seq = tl.program_id(0)
    head = tl.program_id(1)
    tile = tl.program_id(2)
    q_start = tl.load(query_start_loc_ptr + seq)
    query_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    if tile * BLOCK_M < query_len:
        if IS_TREE:
            prefix_len = tl.load(lens_ptr + seq)
            context_len = prefix_len + query_len
            last_key = context_len
        else:
            context_len = tl.load(lens_ptr + seq)
            # keys beyond the tile's last query position are masked for every row: stop there
            last_key = tl.minimum(context_len, context_len - query_len + (tile + 1) * BLOCK_M)
        kv_head = head // GROUP
        offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = offs_m < query_len
        d = tl.arange(0, BLOCK_D)
        d_mask = d < D
        q_rows = (q_start + offs_m)[:, None] * stride_qt + head * stride_qh + d[None, :]
        q = tl.load(q_ptr + q_rows, mask=m_mask[:, None] & d_mask[None, :], other=0.0)
        q = q.to(tl.float32)
        q_pos = context_len - query_len + offs_m  # (BLOCK_M,) absolute positions
        mask_rows = (q_start + offs_m).to(tl.int64) * stride_mask
        offs_n = tl.arange(0, BLOCK_SIZE)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.full([BLOCK_M], 0.0, tl.float32)
        acc = tl.full([BLOCK_M, BLOCK_D], 0.0, tl.float32)
        cache_base = kv_head.to(tl.int64) * stride_cache_head
        for j in range(0, (last_key + BLOCK_SIZE - 1) // BLOCK_SIZE):
            block = tl.load(block_tables_ptr + seq * stride_bt + j).to(tl.int64)
            k_pos = j * BLOCK_SIZE + offs_n
            rows = (block * BLOCK_SIZE + offs_n)[:, None] * D + d[None, :]
            kv_mask = (k_pos < context_len)[:, None] & d_mask[None, :]
            k = tl.load(k_cache_ptr + cache_base + rows, mask=kv_mask, other=0.0).to(tl.float32)
            v = tl.load(v_cache_ptr + cache_base + rows, mask=kv_mask, other=0.0).to(tl.float32)
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK_M, BLOCK_SIZE)
            if IS_TREE:
                node = k_pos - prefix_len  # key's node index (negative: a prefix key)
                is_node = (node >= 0) & (node < query_len)
                ancestor = tl.load(
                    node_mask_ptr + mask_rows[:, None] + node[None, :],
                    mask=m_mask[:, None] & is_node[None, :],
                    other=0,
                )
                valid = (k_pos < prefix_len)[None, :] | (ancestor != 0)
            else:
                valid = (k_pos[None, :] <= q_pos[:, None]) & (k_pos[None, :] < context_len)
            s = tl.where(valid, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.reduce(s, 1, _max_combine))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.reduce(p, 1, _sum_combine)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            m_i = m_new
        out = acc / l_i[:, None]
        o_rows = (q_start + offs_m)[:, None] * stride_ot + head * stride_oh + d[None, :]
        tl.store(
            out_ptr + o_rows,
            out.to(out_ptr.dtype.element_ty),
            mask=m_mask[:, None] & d_mask[None, :],
        )


def _launch_span_kernel(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    lens: torch.Tensor,
    node_mask: torch.Tensor | None,
    scale: float,
) -> torch.Tensor:
    num_rows, num_q_heads, head_dim = q.shape
    num_kv_heads, _, block_size, _ = k_cache.shape
    out = torch.empty_like(q)
    if num_rows == 0:
        return out
    block_m = 16
    max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max())
    grid = (lens.shape[0], num_q_heads, triton.cdiv(max_query_len, block_m))
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
        scale,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        node_mask.stride(0) if is_tree else 0,
        IS_TREE=is_tree,
        GROUP=num_q_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        BLOCK_M=block_m,
        D=head_dim,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
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
) -> torch.Tensor:
    """Ragged causal attention of ``q (T, Hq, D)`` over paged contexts; ``(T, Hq, D)``."""
    return _launch_span_kernel(
        q, k_cache, v_cache, block_tables, query_start_loc, context_lens, None, scale
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
    (row's ancestors among its tree's nodes).
    """
    return _launch_span_kernel(
        q, k_cache, v_cache, block_tables, query_start_loc, prefix_lens, node_mask, scale
    )


class TritonAttention:
    """The GPU path: store with Triton, decode kernel for single-token spans, prefill kernel
    for the rest, tree kernel for token-tree rows (``meta.tree``, computed causally by the
    prefill kernel first, then replaced). Same ``forward`` as ``attention.TorchAttention``."""

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
        store_kv(k.contiguous(), v.contiguous(), k_cache, v_cache, meta.slot_mapping)
        num_decode = meta.num_decode_seqs
        out = torch.empty_like(q)
        if num_decode:
            out[:num_decode] = paged_decode_attention(
                q[:num_decode],
                k_cache,
                v_cache,
                meta.block_tables[:num_decode],
                meta.context_lens[:num_decode],
                scale,
            )
        if num_decode < meta.context_lens.shape[0]:
            out[num_decode:] = paged_prefill_attention(
                q[num_decode:],
                k_cache,
                v_cache,
                meta.block_tables[num_decode:],
                meta.query_start_loc[num_decode:] - num_decode,
                meta.context_lens[num_decode:],
                scale,
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
