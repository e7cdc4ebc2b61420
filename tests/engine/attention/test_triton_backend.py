"""Triton paged-attention kernels vs the torch reference, in the Triton interpreter on CPU:
store, split-KV decode (and its partition count), ragged prefill, a mixed engine step, with
GQA ratios 1 / 3 / 4, fp32 and bf16 caches, block sizes 16 / 32; launch-time validation."""

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
from formcast.errors import EngineConfigError, EngineError  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def interpreted_kernels():
    """Kernels are built at import time: rebuild them in interpreter mode if they were not."""
    os.environ["TRITON_INTERPRET"] = "1"
    if type(triton_backend._paged_decode_kernel).__name__ != "InterpretedFunction":
        importlib.reload(triton_backend)


NUM_KV_HEADS, GROUP, HEAD_DIM, NUM_BLOCKS = 2, 2, 16, 24
# fp32 caches multiply in IEEE fp32; bf16 ones round P to bf16 before P V (as tensor cores do)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def _paged_setup(
    block_size: int,
    context_lens: list[int],
    seed: int,
    num_blocks: int = NUM_BLOCKS,
    dtype: torch.dtype = torch.float32,
):
    """A cache filled with random K/V and shuffled block tables covering each context."""
    generator = torch.Generator().manual_seed(seed)
    shape = (NUM_KV_HEADS, num_blocks, block_size, HEAD_DIM)
    k_cache = torch.randn(shape, generator=generator).to(dtype)
    v_cache = torch.randn(shape, generator=generator).to(dtype)
    free = torch.randperm(num_blocks, generator=generator).tolist()
    max_blocks = max(-(-c // block_size) for c in context_lens)
    tables = torch.zeros(len(context_lens), max_blocks, dtype=torch.int32)
    for i, c in enumerate(context_lens):
        for j in range(-(-c // block_size)):
            tables[i, j] = free.pop()
    return k_cache, v_cache, tables, torch.tensor(context_lens, dtype=torch.int32)


def _assert_close(got: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert got.dtype == expected.dtype
    error = (got.float() - expected.float()).abs().max().item()
    assert error < TOLERANCE[dtype], f"max error {error}"


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


def test_decode_num_splits():
    tile = triton_backend.KV_TILE
    # a batch that fills the machine: no split, whatever the context
    assert triton_backend.decode_num_splits(66, 2, 100_000, target_programs=132) == 1
    assert triton_backend.decode_num_splits(1, 8, 100_000, target_programs=8) == 1
    # a small batch with a long context: enough splits to reach the target
    assert triton_backend.decode_num_splits(1, 8, 100_000, target_programs=132) == 17
    assert triton_backend.decode_num_splits(2, 3, 100_000, target_programs=132) == 22
    # at most one split per key tile, at most MAX_SPLITS
    assert triton_backend.decode_num_splits(1, 2, 3 * tile, target_programs=132) == 3
    assert triton_backend.decode_num_splits(1, 2, 1, target_programs=132) == 1
    assert triton_backend.decode_num_splits(1, 1, 10**6, 10**4) == triton_backend.MAX_SPLITS


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 3, 4])
@pytest.mark.parametrize("block_size", [16, 32])
def test_paged_decode_matches_torch(block_size, group, dtype):
    # ragged, crossing block and key-tile boundaries; the longest spans five key tiles
    context_lens = [1, 17, 300, 129]
    k_cache, v_cache, tables, lens = _paged_setup(block_size, context_lens, 2, 48, dtype)
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(len(context_lens), NUM_KV_HEADS * group, HEAD_DIM, generator=generator)
    q = q.to(dtype)
    max_context = tables.shape[1] * block_size
    kv_tile = triton_backend._tiles(dtype)[0]
    # 4 sequences x 2 KV heads fill 8 of 132 programs: split-KV, one split per key tile (5 of
    # 64 keys, 10 of 32 with fp32), so the longest context spans every split, the shortest one
    num_splits = triton_backend.decode_num_splits(4, NUM_KV_HEADS, max_context, 132, kv_tile)
    assert num_splits == -(-max_context // kv_tile) >= 5
    # the reference in fp32 on the same (rounded) inputs
    args = (q.float(), k_cache.float(), v_cache.float(), tables, lens, 0.25)
    expected = paged_decode_attention_torch(*args).to(dtype)
    got = triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, lens, 0.25)
    _assert_close(got, expected, dtype)
    # one program per (sequence, KV head): no split, no reduce, the same result
    unsplit = triton_backend.paged_decode_attention(
        q, k_cache, v_cache, tables, lens, 0.25, target_programs=1
    )
    _assert_close(unsplit, expected, dtype)


def test_split_kv_decode_of_one_long_sequence():
    # batch 1 (the latency case): 18 splits of one fp32 key tile each, then the reduce kernel
    context_lens = [555]
    k_cache, v_cache, tables, lens = _paged_setup(16, context_lens, 6, 40)
    q = torch.randn(1, NUM_KV_HEADS * 3, HEAD_DIM, generator=torch.Generator().manual_seed(7))
    kv_tile = triton_backend._tiles(torch.float32)[0]
    max_context = tables.shape[1] * 16
    assert triton_backend.decode_num_splits(1, NUM_KV_HEADS, max_context, 132, kv_tile) == 18
    expected = paged_decode_attention_torch(q, k_cache, v_cache, tables, lens, 0.125)
    got = triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, lens, 0.125)
    _assert_close(got, expected, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 3, 4])
@pytest.mark.parametrize("block_size", [16, 32])
def test_paged_prefill_matches_torch(block_size, group, dtype):
    # a fresh prompt, a chunk after a cached prefix longer than a query tile, a 1-token span
    # and a chunk over several key tiles
    query_lens, context_lens = [5, 70, 1, 20], [5, 100, 37, 150]
    k_cache, v_cache, tables, lens = _paged_setup(block_size, context_lens, 3, 32, dtype)
    query_start_loc = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()])
    generator = torch.Generator().manual_seed(4)
    q = torch.randn(int(query_start_loc[-1]), NUM_KV_HEADS * group, HEAD_DIM, generator=generator)
    q = q.to(dtype)
    qsl = query_start_loc.to(torch.int32)
    args = (q.float(), k_cache.float(), v_cache.float(), tables, qsl, lens, 0.25)
    expected = paged_prefill_attention_torch(*args).to(dtype)
    got = triton_backend.paged_prefill_attention(q, k_cache, v_cache, tables, qsl, lens, 0.25)
    _assert_close(got, expected, dtype)


@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("block_size", [16, 32])
def test_triton_backend_matches_torch_backend_on_a_mixed_step(block_size, group):
    # decodes first (one long enough to split), then a fresh prefill and a chunk after a
    # cached prefix
    query_lens, context_lens = [1, 1, 6, 4], [130, 3, 6, 21]
    k_cache, v_cache, tables, _ = _paged_setup(block_size, context_lens, seed=4)
    num_tokens = sum(query_lens)
    generator = torch.Generator().manual_seed(5)
    q = torch.randn(num_tokens, NUM_KV_HEADS * group, HEAD_DIM, generator=generator)
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


@pytest.mark.parametrize("block_size", [8, 24])
def test_unsupported_block_size_is_refused(block_size):
    k_cache, v_cache, tables, lens = _paged_setup(block_size, [5], seed=8)
    q = torch.randn(1, NUM_KV_HEADS * GROUP, HEAD_DIM)
    with pytest.raises(EngineConfigError, match=f"block_size={block_size} .* power of two >= 16"):
        triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, lens, 0.25)
    qsl = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(EngineConfigError, match=f"block_size={block_size}"):
        triton_backend.paged_prefill_attention(q, k_cache, v_cache, tables, qsl, lens, 0.25)


def test_query_heads_must_group_over_kv_heads():
    k_cache, v_cache, tables, lens = _paged_setup(16, [5], seed=9)
    q = torch.randn(1, NUM_KV_HEADS * GROUP + 1, HEAD_DIM)
    with pytest.raises(EngineError, match="multiple of the KV heads"):
        triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, lens, 0.25)
