"""The torch attention path (CPU, and the reference of every Triton kernel).

`TorchAttention` is the engine's CPU backend: it scatters new K/V into their cache blocks,
runs a step's decode rows as a few padded batched attentions (`DecodeGroup`) and each longer
span as one attention (`PrefillSegment`), following `AttentionMetadata` (see
``formcast.engine.attention.metadata`` for the cache layout and the step's ragged batch).
`store_kv_torch`, `paged_decode_attention_torch` and `paged_prefill_attention_torch` are the
plain references the Triton kernels of ``formcast.engine.attention.triton_backend`` are tested
against (same signatures).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from formcast.engine.attention.metadata import AttentionMetadata, DecodeGroup


class TorchAttention:
    """The torch path: scatter K/V into blocks, gather per decode group, SDPA per span.

    Keeps one gather workspace that grows as needed (fresh large allocations page-fault on
    every step on CPU, which costs more than the copy itself).
    """

    def __init__(self) -> None:
        self._workspace = torch.empty(0)

    def _buffer(self, numel: int, like: torch.Tensor, index: int) -> torch.Tensor:
        needed = 2 * numel
        if self._workspace.numel() < needed or self._workspace.dtype != like.dtype:
            self._workspace = torch.empty(needed, dtype=like.dtype, device=like.device)
        return self._workspace[index * numel : (index + 1) * numel]

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
        """Attention output ``(T, Hq, D)`` for ``q (T, Hq, D)``, new ``k, v (T, Hkv, D)``."""
        store_kv_torch(k, v, k_cache, v_cache, meta.slot_mapping)
        num_kv_heads, _, block_size, head_dim = k_cache.shape
        num_q_heads = q.shape[1]
        k_blocks = k_cache.view(num_kv_heads, -1, block_size * head_dim)
        v_blocks = v_cache.view(num_kv_heads, -1, block_size * head_dim)
        groups = meta.decode_groups
        is_one_group = len(groups) == 1 and (groups[0].seq_start, groups[0].seq_end) == (0, len(q))
        if is_one_group and not meta.prefill_segments:
            # a pure decode step in one group (batch 1 always): its output is the result,
            # with no buffer to fill (the same ops as the loop below, fewer copies)
            o = self._decode(q, k_blocks, v_blocks, groups[0], block_size, scale)
            return o.transpose(0, 1).reshape(q.shape[0], num_q_heads, head_dim)
        out = torch.empty_like(q)
        for dg in groups:
            o = self._decode(q, k_blocks, v_blocks, dg, block_size, scale)  # (Hkv, n, g, D)
            n = dg.seq_end - dg.seq_start
            out[dg.seq_start : dg.seq_end] = o.transpose(0, 1).reshape(n, num_q_heads, head_dim)
        k_flat = k_cache.view(num_kv_heads, -1, head_dim)
        v_flat = v_cache.view(num_kv_heads, -1, head_dim)
        is_gqa = num_q_heads != num_kv_heads
        for seg in meta.prefill_segments:
            q_s = q[seg.q_start : seg.q_end].transpose(0, 1).unsqueeze(0)  # (1, Hq, n, D)
            if seg.key_slots is None:
                k_s = k[seg.q_start : seg.q_end].transpose(0, 1).unsqueeze(0)  # (1, Hkv, n, D)
                v_s = v[seg.q_start : seg.q_end].transpose(0, 1).unsqueeze(0)
                o = F.scaled_dot_product_attention(
                    q_s, k_s, v_s, is_causal=True, scale=scale, enable_gqa=is_gqa
                )
            else:
                k_s = k_flat.index_select(1, seg.key_slots).unsqueeze(0)  # (1, Hkv, C, D)
                v_s = v_flat.index_select(1, seg.key_slots).unsqueeze(0)
                o = F.scaled_dot_product_attention(
                    q_s, k_s, v_s, attn_mask=seg.mask, scale=scale, enable_gqa=is_gqa
                )
            out[seg.q_start : seg.q_end] = o[0].transpose(0, 1)
        return out

    def _decode(
        self,
        q: torch.Tensor,
        k_blocks: torch.Tensor,
        v_blocks: torch.Tensor,
        dg: DecodeGroup,
        block_size: int,
        scale: float,
    ) -> torch.Tensor:
        """One decode group's attention ``(Hkv, n, g, D)``: its blocks gathered into the
        workspace, the ``g`` query heads sharing a KV head as ``g`` query rows."""
        num_kv_heads = k_blocks.shape[0]
        head_dim = q.shape[2]
        group = q.shape[1] // num_kv_heads
        n = dg.seq_end - dg.seq_start
        length = dg.num_blocks * block_size
        numel = num_kv_heads * n * length * head_dim
        k_ctx = self._buffer(numel, q, 0).view(num_kv_heads, n * dg.num_blocks, -1)
        v_ctx = self._buffer(numel, q, 1).view(num_kv_heads, n * dg.num_blocks, -1)
        torch.index_select(k_blocks, 1, dg.block_ids, out=k_ctx)
        torch.index_select(v_blocks, 1, dg.block_ids, out=v_ctx)
        q_g = q[dg.seq_start : dg.seq_end].view(n, num_kv_heads, group, head_dim)
        k_g = k_ctx.view(num_kv_heads, n, length, head_dim)
        v_g = v_ctx.view(num_kv_heads, n, length, head_dim)
        if q.dtype == torch.float32 or _is_small_group(n, length):
            mask = dg.additive_mask_as(q.dtype)
            return F.scaled_dot_product_attention(
                q_g.transpose(0, 1), k_g, v_g, attn_mask=mask, scale=scale
            )
        # 16-bit groups past a few sequences: two batched matmuls and a float32 softmax cost
        # 0.5-0.9x SDPA's CPU flash kernel (which wins below; RESULTS.md)
        scores = torch.matmul(q_g.transpose(0, 1), k_g.transpose(-1, -2)).float()
        scores.mul_(scale).add_(dg.additive_mask)  # (Hkv, n, g, L)
        return torch.matmul(torch.softmax(scores, dim=-1).to(q.dtype), v_g)


MAX_SDPA_GROUP_SEQS = 8  # 16-bit decode groups of <= 8 sequences and <= 2,048 padded keys
MAX_SDPA_GROUP_KEYS = 2048  # in all run SDPA; larger ones the two matmuls (2-core bench)


def _is_small_group(num_seqs: int, length: int) -> bool:
    return num_seqs <= MAX_SDPA_GROUP_SEQS and num_seqs * length <= MAX_SDPA_GROUP_KEYS


def store_kv_torch(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write new ``k, v (T, Hkv, D)`` into the cache slots ``slot_mapping (T,)``."""
    num_kv_heads, _, _, head_dim = k_cache.shape
    k_cache.view(num_kv_heads, -1, head_dim).index_copy_(1, slot_mapping, k.transpose(0, 1))
    v_cache.view(num_kv_heads, -1, head_dim).index_copy_(1, slot_mapping, v.transpose(0, 1))


def paged_decode_attention_torch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Reference paged decode: ``q (B, Hq, D)``, one query per sequence at its last position.

    Same signature as ``formcast.engine.attention.triton_backend.paged_decode_attention``.
    """
    num_seqs = q.shape[0]
    query_start_loc = torch.arange(num_seqs + 1, dtype=torch.int32, device=q.device)
    return paged_prefill_attention_torch(
        q, k_cache, v_cache, block_tables, query_start_loc, context_lens, scale
    )


def paged_prefill_attention_torch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Reference ragged attention over a paged cache whose K/V already hold the new tokens.

    ``q (T, Hq, D)``; sequence ``i`` owns rows ``query_start_loc[i]:query_start_loc[i+1]``
    at the last positions of its ``context_lens[i]`` tokens. Returns ``(T, Hq, D)``.
    Same signature as ``formcast.engine.attention.triton_backend.paged_prefill_attention``.
    """
    num_kv_heads, _, block_size, head_dim = k_cache.shape
    num_q_heads = q.shape[1]
    out = torch.empty_like(q)
    qsl = query_start_loc.tolist()
    for i, c in enumerate(context_lens.tolist()):
        n = qsl[i + 1] - qsl[i]
        pos = torch.arange(c, device=q.device)
        slots = block_tables[i].long()[pos // block_size] * block_size + pos % block_size
        k_s = k_cache.view(num_kv_heads, -1, head_dim).index_select(1, slots)  # (Hkv, C, D)
        v_s = v_cache.view(num_kv_heads, -1, head_dim).index_select(1, slots)
        mask = pos[None, :] <= (c - n + torch.arange(n, device=q.device))[:, None]  # (n, C)
        o = F.scaled_dot_product_attention(
            q[qsl[i] : qsl[i + 1]].transpose(0, 1).unsqueeze(0),
            k_s.unsqueeze(0),
            v_s.unsqueeze(0),
            attn_mask=mask,
            scale=scale,
            enable_gqa=num_q_heads != num_kv_heads,
        )
        out[qsl[i] : qsl[i + 1]] = o[0].transpose(0, 1)
    return out
