"""TorchAttention (the CPU path) against the plain paged reference, float32 and 16-bit: decode
groups (SDPA in float32, two matmuls + float32 softmax in 16-bit), short spans on a prefix,
prefills."""

from __future__ import annotations

import pytest
import torch

from formcast.engine.attention.metadata import AttentionMetadata
from formcast.engine.attention.torch_backend import TorchAttention, paged_prefill_attention_torch

NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE = 3, 32, 16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("num_similar", [0, 12])
def test_torch_backend_matches_the_reference(dtype, group, num_similar):
    generator = torch.Generator().manual_seed(group)
    # decodes of very different lengths (several small decode groups: SDPA), optionally 12 of
    # similar lengths (one large group: the two-matmul path in 16-bit), a jump-forward span on
    # a prefix, a fresh prefill
    query_lens = [1] * (5 + num_similar) + [3, 7]
    context_lens = [300 - i for i in range(num_similar)] + [200, 190, 40, 9, 1, 50, 7]
    num_blocks = sum(-(-c // BLOCK_SIZE) for c in context_lens) + 2
    order = torch.randperm(num_blocks, generator=generator).tolist()
    block_tables, used = [], 0
    for c in context_lens:
        count = -(-c // BLOCK_SIZE)
        block_tables.append(order[used : used + count])
        used += count
    shape = (NUM_KV_HEADS, num_blocks, BLOCK_SIZE, HEAD_DIM)
    k_cache = torch.randn(shape, generator=generator).to(dtype)
    v_cache = torch.randn(shape, generator=generator).to(dtype)
    num_tokens = sum(query_lens)
    q = torch.randn(num_tokens, NUM_KV_HEADS * group, HEAD_DIM, generator=generator).to(dtype)
    k = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, generator=generator).to(dtype)
    v = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, generator=generator).to(dtype)
    meta = AttentionMetadata.build(block_tables, context_lens, query_lens, BLOCK_SIZE, "cpu")
    assert len(meta.decode_groups) >= 2
    largest = max(g.seq_end - g.seq_start for g in meta.decode_groups)
    assert (largest > 8) == (num_similar > 0)
    got = TorchAttention().forward(q, k, v, k_cache, v_cache, meta, HEAD_DIM**-0.5)
    assert got.dtype == dtype and got.shape == q.shape
    # reference in float32 over the cache as written by the step
    expected = paged_prefill_attention_torch(
        q.float(),
        k_cache.float(),
        v_cache.float(),
        meta.block_tables,
        meta.query_start_loc,
        meta.context_lens,
        HEAD_DIM**-0.5,
    )
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert (got.float() - expected).abs().max().item() < tolerance
