"""Tree attention over a paged KV cache: a torch reference and a Triton kernel (same math).

A token tree of ``N`` nodes (`formcast.decoding.speculative.draft_tree.DraftTree`) is
computed in one forward pass. Its K/V are stored at positions ``prefix_len .. prefix_len + N
- 1`` of the sequence's paged cache (node ``i`` at ``prefix_len + i``); node ``i`` attends to
every prefix key ``0 .. prefix_len - 1`` and to the nodes ``j`` with ``ancestor_mask[i, j]``
(its ancestors and itself), so each node sees exactly the context of its own root path.
Grouped-query attention as in ``torch_backend.py``: query head ``h`` reads KV head ``h // (Hq /
Hkv)``. The rotary positions of the nodes (``prefix_len - 1 + depth``) are the model's
business; attention only needs where the keys are stored.

- `paged_tree_attention_torch` / `paged_tree_attention`: one tree, ``q (N, Hq, D)``.
- `triton_backend.paged_tree_attention_varlen`: many trees in one launch (the GPU backend's
  path; the paged prefill kernel with the tree mask); rows ``query_start_loc[b] ..
  query_start_loc[b + 1]`` of ``q`` are tree ``b``'s nodes and ``node_mask (R, Nmax)`` uint8
  holds each row's ancestor row (column ``j`` = node ``j`` of its own tree).

The engine's torch path does not call these: tree rows run inside its batched decode rows
with the same key mask (``metadata.AttentionMetadata.build(trees=...)``); the functions here
are its reference in tests and the Triton backend's kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from formcast.engine.attention import triton_backend


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
    return triton_backend.paged_tree_attention_varlen(
        q.contiguous(),
        k_cache,
        v_cache,
        block_table.to(device=device, dtype=torch.int32).reshape(1, -1).contiguous(),
        torch.tensor([0, num_nodes], dtype=torch.int32, device=device),
        torch.tensor([int(prefix_len)], dtype=torch.int32, device=device),
        ancestor_mask.to(device=device, dtype=torch.uint8).contiguous(),
        scale,
    )
