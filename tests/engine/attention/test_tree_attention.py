"""Tree attention: torch reference vs a dense loop, Triton (interpreter) vs torch (GQA ratios
1 / 3 / 4, fp32 and bf16 caches, one tree or several per launch), and the engine's torch path /
Triton backend on a step mixing decodes, a prefill and token trees."""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from formcast.decoding.speculative.draft_tree import TreeTopology, build_tree  # noqa: E402
from formcast.engine.attention import tree as tree_attention  # noqa: E402
from formcast.engine.attention.metadata import AttentionMetadata  # noqa: E402
from formcast.engine.attention.torch_backend import TorchAttention  # noqa: E402

NUM_KV_HEADS, GROUP, HEAD_DIM, NUM_BLOCKS = 2, 2, 16, 24


@pytest.fixture(scope="module", autouse=True)
def interpreted_kernels():
    """Kernels are built at import time: rebuild them in interpreter mode if they were not."""
    os.environ["TRITON_INTERPRET"] = "1"
    from formcast.engine.attention import triton_backend

    if type(triton_backend._paged_span_kernel).__name__ != "InterpretedFunction":
        importlib.reload(triton_backend)


def _random_tree(num_nodes: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    parents = [-1]
    for i in range(1, num_nodes):
        parents.append(int(torch.randint(-1, i, (1,), generator=generator)))
    mask = torch.zeros(num_nodes, num_nodes, dtype=torch.bool)
    for i, p in enumerate(parents):
        mask[i, i] = True
        if p >= 0:
            mask[i] |= mask[p]
    return mask


def _cache(block_size: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    shape = (NUM_KV_HEADS, NUM_BLOCKS, block_size, HEAD_DIM)
    table = torch.randperm(NUM_BLOCKS, generator=generator).to(torch.int32)
    return torch.randn(shape, generator=generator), torch.randn(shape, generator=generator), table


@pytest.mark.parametrize("prefix_len,num_nodes", [(1, 1), (5, 7), (30, 12)])
def test_torch_reference_matches_dense_loop(prefix_len, num_nodes):
    k_cache, v_cache, table = _cache(16, seed=prefix_len)
    mask = _random_tree(num_nodes, seed=num_nodes)
    q = torch.randn(num_nodes, NUM_KV_HEADS * GROUP, HEAD_DIM)
    got = tree_attention.paged_tree_attention_torch(
        q, k_cache, v_cache, table, prefix_len, mask, 0.3
    )
    for i in range(num_nodes):
        keys = list(range(prefix_len)) + [prefix_len + j for j in range(num_nodes) if mask[i, j]]
        for h in range(NUM_KV_HEADS * GROUP):
            kv = h // GROUP
            ks = torch.stack([k_cache[kv, table[p // 16], p % 16] for p in keys])
            vs = torch.stack([v_cache[kv, table[p // 16], p % 16] for p in keys])
            weights = torch.softmax((ks @ q[i, h]) * 0.3, dim=0)
            torch.testing.assert_close(got[i, h], weights @ vs, atol=1e-5, rtol=1e-5)


def _cache_of(block_size: int, seed: int, dtype: torch.dtype):
    k_cache, v_cache, table = _cache(block_size, seed)
    return k_cache.to(dtype), v_cache.to(dtype), table


# fp32 caches multiply in IEEE fp32; bf16 ones round P to bf16 before P V (as tensor cores do)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 3, 4])
@pytest.mark.parametrize("block_size", [16, 32])
def test_triton_tree_kernel_matches_torch(block_size, group, dtype):
    k_cache, v_cache, table = _cache_of(block_size, block_size, dtype)
    # a short prefix; more nodes than one program's query tile (16 tokens at group 3 / 4);
    # a prefix over two key tiles
    for prefix_len, num_nodes in ((3, 6), (21, 18), (100, 9)):
        mask = _random_tree(num_nodes, seed=prefix_len)
        # seeded: the bf16 bound is checked on fixed draws, not on whatever the tests before
        # left in torch's global generator (one draw in some hundreds went past it)
        generator = torch.Generator().manual_seed(prefix_len)
        q = torch.randn(num_nodes, NUM_KV_HEADS * group, HEAD_DIM, generator=generator).to(dtype)
        # the reference in fp32 on the same (rounded) inputs
        args = (q.float(), k_cache.float(), v_cache.float(), table, prefix_len, mask, 0.25)
        expected = tree_attention.paged_tree_attention_torch(*args)
        got = tree_attention.paged_tree_attention(
            q, k_cache, v_cache, table, prefix_len, mask, 0.25
        )
        assert got.dtype == dtype
        assert (got.float() - expected).abs().max().item() < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 3])
def test_triton_varlen_trees_match_torch_per_tree(group, dtype):
    from formcast.engine.attention.triton_backend import paged_tree_attention_varlen

    block_size = 16
    k_cache, v_cache, _ = _cache_of(block_size, 11, dtype)
    # three trees of a batch, ragged sizes and prefixes, disjoint blocks
    trees = [(5, _random_tree(4, 1)), (70, _random_tree(20, 2)), (1, _random_tree(1, 3))]
    free = list(range(NUM_BLOCKS))
    tables = [[free.pop() for _ in range(-(-(p + m.shape[0]) // block_size))] for p, m in trees]
    sizes = [m.shape[0] for _, m in trees]
    num_rows, max_nodes = sum(sizes), max(sizes)
    block_tables = torch.zeros(len(trees), max(len(t) for t in tables), dtype=torch.int32)
    node_mask = torch.zeros(num_rows, max_nodes, dtype=torch.uint8)
    starts = [0]
    for b, ((_, mask), table) in enumerate(zip(trees, tables, strict=True)):
        block_tables[b, : len(table)] = torch.tensor(table)
        node_mask[starts[-1] : starts[-1] + mask.shape[0], : mask.shape[0]] = mask
        starts.append(starts[-1] + mask.shape[0])
    generator = torch.Generator().manual_seed(5)  # fixed draws (see above)
    q = torch.randn(num_rows, NUM_KV_HEADS * group, HEAD_DIM, generator=generator).to(dtype)
    got = paged_tree_attention_varlen(
        q,
        k_cache,
        v_cache,
        block_tables,
        torch.tensor(starts, dtype=torch.int32),
        torch.tensor([p for p, _ in trees], dtype=torch.int32),
        node_mask,
        0.25,
    )
    for b, (prefix_len, mask) in enumerate(trees):
        rows = slice(starts[b], starts[b + 1])
        expected = tree_attention.paged_tree_attention_torch(
            q[rows].float(),
            k_cache.float(),
            v_cache.float(),
            block_tables[b],
            prefix_len,
            mask,
            0.25,
        )
        assert (got[rows].float() - expected).abs().max().item() < TOLERANCE[dtype]


def _step(block_size: int):
    """A step: a decode (ctx 9), a fresh prompt of 5, a tree span (1 committed + 6 nodes on a
    prefix of 12), a tree span (2 committed + 4 nodes on a prefix of 20) and a tree too long
    for decode rows (1 + 17 nodes on a prefix of 8: a prefill segment in the torch path)."""
    tree_a = build_tree(TreeTopology([[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]), [[1, 2]] * 3)
    tree_b = build_tree(TreeTopology([[0], [1], [0, 0], [2]]), [[1, 2, 3]] * 2)
    spans = [(1, 9), (5, 5), (1 + len(tree_a), 13 + len(tree_a)), (2 + len(tree_b), 22 + 4)]
    spans.append((18, 25))
    tables, free = [], list(range(NUM_BLOCKS))
    for _, c in spans:
        tables.append([free.pop() for _ in range(-(-c // block_size))])
    trees = [(2, tree_a.ancestor_mask()), (3, tree_b.ancestor_mask()), (4, _random_tree(17, 4))]
    return spans, tables, trees


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_engine_backends_apply_tree_masks(backend):
    block_size = 16
    spans, tables, trees = _step(block_size)
    meta = AttentionMetadata.build(
        tables,
        [c for _, c in spans],
        [n for n, _ in spans],
        block_size,
        "cpu",
        for_torch_path=backend == "torch",
        trees=trees,
    )
    generator = torch.Generator().manual_seed(7)
    num_rows = sum(n for n, _ in spans)
    q = torch.randn(num_rows, NUM_KV_HEADS * GROUP, HEAD_DIM, generator=generator)
    k = torch.randn(num_rows, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    v = torch.randn(num_rows, NUM_KV_HEADS, HEAD_DIM, generator=generator)
    shape = (NUM_KV_HEADS, NUM_BLOCKS, block_size, HEAD_DIM)
    k_cache, v_cache = (
        torch.randn(shape, generator=generator),
        torch.randn(shape, generator=generator),
    )
    if backend == "torch":
        out = TorchAttention().forward(q, k, v, k_cache, v_cache, meta, 0.25)
    else:
        from formcast.engine.attention.triton_backend import TritonAttention

        out = TritonAttention().forward(q, k, v, k_cache, v_cache, meta, 0.25)
    row = 0
    tree_of = dict(trees)
    for i, (n, c) in enumerate(spans):
        table = torch.tensor(tables[i], dtype=torch.int32)
        num_nodes = tree_of[i].shape[0] if i in tree_of else 0
        # causal rows (decode, prompt, committed tokens before a tree)
        for r in range(n - num_nodes):
            mask = torch.ones(1, 1, dtype=torch.bool)
            pos = c - n + r  # row r attends to keys 0 .. pos, i.e. a one-node "tree"
            expected = tree_attention.paged_tree_attention_torch(
                q[row + r : row + r + 1], k_cache, v_cache, table, pos, mask, 0.25
            )
            torch.testing.assert_close(out[row + r : row + r + 1], expected, atol=1e-5, rtol=1e-5)
        if num_nodes:
            expected = tree_attention.paged_tree_attention_torch(
                q[row + n - num_nodes : row + n],
                k_cache,
                v_cache,
                table,
                c - num_nodes,
                tree_of[i],
                0.25,
            )
            torch.testing.assert_close(
                out[row + n - num_nodes : row + n], expected, atol=1e-5, rtol=1e-5
            )
        row += n
