"""Tree attention over a paged KV cache: a torch reference and a Triton kernel (same math).

A token tree of ``N`` nodes (`formcast.decoding.speculative.draft_tree.DraftTree`) is
computed in one forward pass. Its K/V are stored at positions ``prefix_len .. prefix_len + N
- 1`` of the sequence's paged cache (node ``i`` at ``prefix_len + i``); node ``i`` attends to
every prefix key ``0 .. prefix_len - 1`` and to the nodes ``j`` with ``ancestor_mask[i, j]``
(its ancestors and itself), so each node sees exactly the context of its own root path.
Grouped-query attention as in ``attention.py``: query head ``h`` reads KV head ``h // (Hq /
Hkv)``. The rotary positions of the nodes (``prefix_len - 1 + depth``) are the model's
business; attention only needs where the keys are stored.

- `paged_tree_attention_torch` / `paged_tree_attention`: one tree, ``q (N, Hq, D)``.
- `paged_tree_attention_varlen` (Triton): many trees in one launch (the GPU backend's path);
  rows ``query_start_loc[b] .. query_start_loc[b + 1]`` of ``q`` are tree ``b``'s nodes and
  ``node_mask (R, Nmax)`` uint8 holds each row's ancestor row (column ``j`` = node ``j`` of
  its own tree).

The engine's torch path does not call these: tree rows run inside its batched decode rows
with the same key mask (``attention.AttentionMetadata.build(trees=...)``); the functions here
are its reference in tests and the Triton backend's kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


def paged_tree_attention_torch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    prefix_len: int,
    ancestor_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Reference tree attention of ``q (N, Hq, D)``; returns ``(N, Hq, D)``.

    Parameters
    ----------
    q : torch.Tensor
        Queries of the ``N`` tree nodes.
    k_cache, v_cache : torch.Tensor
        ``(Hkv, num_blocks, block_size, D)``, already holding the nodes' K/V.
    block_table : torch.Tensor
        ``(M,)`` block ids of the sequence.
    prefix_len : int
        Committed tokens before the tree (node ``i`` is stored at ``prefix_len + i``).
    ancestor_mask : torch.Tensor
        ``(N, N)`` bool, ``[i, j]`` iff node ``j`` is ``i`` or one of its ancestors.
    scale : float
        Softmax scale.
    """
    num_kv_heads, _, block_size, head_dim = k_cache.shape
    num_nodes = q.shape[0]
    context = int(prefix_len) + num_nodes
    pos = torch.arange(context, device=q.device)
    slots = block_table.long()[pos // block_size] * block_size + pos % block_size
    k_s = k_cache.view(num_kv_heads, -1, head_dim).index_select(1, slots)  # (Hkv, C, D)
    v_s = v_cache.view(num_kv_heads, -1, head_dim).index_select(1, slots)
    prefix = torch.ones((num_nodes, int(prefix_len)), dtype=torch.bool, device=q.device)
    mask = torch.cat([prefix, ancestor_mask.to(device=q.device, dtype=torch.bool)], dim=1)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1).unsqueeze(0),  # (1, Hq, N, D)
        k_s.unsqueeze(0),
        v_s.unsqueeze(0),
        attn_mask=mask,  # (N, C)
        scale=scale,
        enable_gqa=q.shape[1] != num_kv_heads,
    )
    return out[0].transpose(0, 1)


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _sum_combine(a, b):
    return a + b


@triton.jit
def _paged_tree_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    query_start_loc_ptr,
    prefix_lens_ptr,
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
    GROUP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tree = tl.program_id(0)
    head = tl.program_id(1)
    tile = tl.program_id(2)
    q_start = tl.load(query_start_loc_ptr + tree)
    num_nodes = tl.load(query_start_loc_ptr + tree + 1) - q_start
    if tile * BLOCK_M < num_nodes:
        prefix_len = tl.load(prefix_lens_ptr + tree)
        context_len = prefix_len + num_nodes
        kv_head = head // GROUP
        offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = offs_m < num_nodes
        d = tl.arange(0, BLOCK_D)
        d_mask = d < D
        q_rows = (q_start + offs_m)[:, None] * stride_qt + head * stride_qh + d[None, :]
        q = tl.load(q_ptr + q_rows, mask=m_mask[:, None] & d_mask[None, :], other=0.0)
        q = q.to(tl.float32)
        offs_n = tl.arange(0, BLOCK_SIZE)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.full([BLOCK_M], 0.0, tl.float32)
        acc = tl.full([BLOCK_M, BLOCK_D], 0.0, tl.float32)
        cache_base = kv_head.to(tl.int64) * stride_cache_head
        mask_rows = (q_start + offs_m).to(tl.int64) * stride_mask
        for j in range(0, (context_len + BLOCK_SIZE - 1) // BLOCK_SIZE):
            block = tl.load(block_tables_ptr + tree * stride_bt + j).to(tl.int64)
            k_pos = j * BLOCK_SIZE + offs_n
            rows = (block * BLOCK_SIZE + offs_n)[:, None] * D + d[None, :]
            kv_mask = (k_pos < context_len)[:, None] & d_mask[None, :]
            k = tl.load(k_cache_ptr + cache_base + rows, mask=kv_mask, other=0.0).to(tl.float32)
            v = tl.load(v_cache_ptr + cache_base + rows, mask=kv_mask, other=0.0).to(tl.float32)
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK_M, BLOCK_SIZE)
            node = k_pos - prefix_len  # key's node index (negative: a prefix key)
            is_node = (node >= 0) & (node < num_nodes)
            ancestor = tl.load(
                node_mask_ptr + mask_rows[:, None] + node[None, :],
                mask=m_mask[:, None] & is_node[None, :],
                other=0,
            )
            valid = (k_pos < prefix_len)[None, :] | (ancestor != 0)
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
    """Triton tree attention of several trees at once; ``(R, Hq, D)`` for ``q (R, Hq, D)``.

    ``block_tables (B, M)`` int32, ``query_start_loc (B + 1,)`` int32, ``prefix_lens (B,)``
    int32 (each >= 1), ``node_mask (R, Nmax)`` uint8 (row's ancestors among its tree's nodes).
    """
    num_rows, num_q_heads, head_dim = q.shape
    num_kv_heads, _, block_size, _ = k_cache.shape
    out = torch.empty_like(q)
    if num_rows == 0:
        return out
    block_m = 16
    max_nodes = int((query_start_loc[1:] - query_start_loc[:-1]).max())
    grid = (prefix_lens.shape[0], num_q_heads, triton.cdiv(max_nodes, block_m))
    _paged_tree_kernel[grid](
        q,
        k_cache,
        v_cache,
        block_tables,
        query_start_loc,
        prefix_lens,
        node_mask,
        out,
        scale,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        node_mask.stride(0),
        GROUP=num_q_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        BLOCK_M=block_m,
        D=head_dim,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
    )
    return out


def paged_tree_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    prefix_len: int,
    ancestor_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Triton tree attention of one tree; same signature as `paged_tree_attention_torch`."""
    num_nodes = q.shape[0]
    device = q.device
    return paged_tree_attention_varlen(
        q.contiguous(),
        k_cache,
        v_cache,
        block_table.to(device=device, dtype=torch.int32).reshape(1, -1).contiguous(),
        torch.tensor([0, num_nodes], dtype=torch.int32, device=device),
        torch.tensor([int(prefix_len)], dtype=torch.int32, device=device),
        ancestor_mask.to(device=device, dtype=torch.uint8).contiguous(),
        scale,
    )
