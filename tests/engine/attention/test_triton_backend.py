"""Triton paged-attention kernels vs the torch reference, in the Triton interpreter on CPU."""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from formcast.engine.attention import triton_backend  # noqa: E402
from formcast.engine.attention.metadata import AttentionMetadata  # noqa: E402
from formcast.engine.attention.torch_backend import (  # noqa: E402
    TorchAttention,
    paged_decode_attention_torch,
    paged_prefill_attention_torch,
    store_kv_torch,
)


@pytest.fixture(scope="module", autouse=True)
def interpreted_kernels():
    """Kernels are built at import time: rebuild them in interpreter mode if they were not."""
    os.environ["TRITON_INTERPRET"] = "1"
    if type(triton_backend._paged_decode_kernel).__name__ != "InterpretedFunction":
        importlib.reload(triton_backend)


NUM_KV_HEADS, GROUP, HEAD_DIM, NUM_BLOCKS = 2, 2, 16, 24


def _paged_setup(block_size: int, context_lens: list[int], seed: int):
    """A cache filled with random K/V and shuffled block tables covering each context."""
    generator = torch.Generator().manual_seed(seed)
    shape = (NUM_KV_HEADS, NUM_BLOCKS, block_size, HEAD_DIM)
    k_cache = torch.randn(shape, generator=generator)
    v_cache = torch.randn(shape, generator=generator)
    free = torch.randperm(NUM_BLOCKS, generator=generator).tolist()
    max_blocks = max(-(-c // block_size) for c in context_lens)
    tables = torch.zeros(len(context_lens), max_blocks, dtype=torch.int32)
    for i, c in enumerate(context_lens):
        for j in range(-(-c // block_size)):
            tables[i, j] = free.pop()
    return k_cache, v_cache, tables, torch.tensor(context_lens, dtype=torch.int32)


@pytest.mark.parametrize("block_size", [16, 32])
def test_store_kv_matches_torch(block_size):
    k_cache, v_cache, _, _ = _paged_setup(block_size, [1], seed=0)
    generator = torch.Generator().manual_seed(1)
    k = torch.randn(7, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    v = torch.randn(7, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    slots = torch.randperm(NUM_BLOCKS * block_size, generator=generator)[:7]
    expected_k, expected_v = k_cache.clone(), v_cache.clone()
    store_kv_torch(k, v, expected_k, expected_v, slots)
    triton_backend.store_kv(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache, expected_k) and torch.equal(v_cache, expected_v)


@pytest.mark.parametrize("block_size", [16, 32])
def test_paged_decode_matches_torch(block_size):
    context_lens = [1, 17, 40, 33]  # ragged, crossing block boundaries
    k_cache, v_cache, tables, lens = _paged_setup(block_size, context_lens, seed=2)
    q = torch.randn(len(context_lens), NUM_KV_HEADS * GROUP, HEAD_DIM)
    expected = paged_decode_attention_torch(q, k_cache, v_cache, tables, lens, 0.25)
    got = triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, lens, 0.25)
    assert (got - expected).abs().max().item() < 1e-5


@pytest.mark.parametrize("block_size", [16, 32])
def test_paged_prefill_matches_torch(block_size):
    # (query_len, context_len): fresh prompt, chunk after a cached prefix, a long ragged span
    spans = [(5, 5), (3, 20), (18, 37), (1, 9)]
    k_cache, v_cache, tables, lens = _paged_setup(block_size, [c for _, c in spans], seed=3)
    query_start_loc = torch.tensor([0] + list(torch.cumsum(torch.tensor([n for n, _ in spans]), 0)))
    q = torch.randn(int(query_start_loc[-1]), NUM_KV_HEADS * GROUP, HEAD_DIM)
    qsl = query_start_loc.to(torch.int32)
    expected = paged_prefill_attention_torch(q, k_cache, v_cache, tables, qsl, lens, 0.25)
    got = triton_backend.paged_prefill_attention(q, k_cache, v_cache, tables, qsl, lens, 0.25)
    assert (got - expected).abs().max().item() < 1e-5


@pytest.mark.parametrize("block_size", [16, 32])
def test_triton_backend_matches_torch_backend_on_a_mixed_step(block_size):
    # decodes first, then a fresh prefill and a chunk after a cached prefix
    query_lens, context_lens = [1, 1, 6, 4], [30, 3, 6, 21]
    k_cache, v_cache, tables, _ = _paged_setup(block_size, context_lens, seed=4)
    num_tokens = sum(query_lens)
    generator = torch.Generator().manual_seed(5)
    q = torch.randn(num_tokens, NUM_KV_HEADS * GROUP, HEAD_DIM, generator=generator)
    k = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    v = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    block_tables = [
        row[: -(-c // block_size)] for row, c in zip(tables.tolist(), context_lens, strict=True)
    ]
    meta = AttentionMetadata.build(block_tables, context_lens, query_lens, block_size, "cpu")
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    expected = TorchAttention().forward(q, k, v, k_ref, v_ref, meta, 0.25)
    got = triton_backend.TritonAttention().forward(q, k, v, k_cache, v_cache, meta, 0.25)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)
    assert (got - expected).abs().max().item() < 1e-5
