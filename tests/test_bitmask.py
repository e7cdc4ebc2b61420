"""Bitmask helpers: the Triton kernel (interpreted on CPU) against the torch reference, and
DfaMatcher.fill_bitmask into every bitmask layout."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from formcast.errors import GrammarError  # noqa: E402
from formcast.grammar import (  # noqa: E402
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    apply_token_bitmask_inplace_cpu,
    apply_token_bitmask_inplace_torch,
    apply_token_bitmask_inplace_triton,
    compile_regex,
)


def _naive(logits: torch.Tensor, bitmask: torch.Tensor, rows, width: int) -> torch.Tensor:
    """Loop-free but obviously-correct reference: unpack bits with numpy."""
    out = logits.clone()
    words = bitmask.numpy().astype(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(bool)
    for r in rows:
        banned = ~bits[r, :width]
        out[r, :width][torch.from_numpy(banned)] = float("-inf")
    return out


def _random_case(batch: int, vocab: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=gen)
    bitmask = torch.randint(
        -(2**31), 2**31 - 1, (batch, (vocab + 31) // 32), generator=gen, dtype=torch.int64
    ).to(torch.int32)
    return logits, bitmask


@pytest.mark.parametrize(
    "batch,vocab",
    [(1, 32000), (1, 32001), (1, 49152), (1, 262144), (64, 32000), (64, 32001), (3, 262144)],
)
def test_triton_matches_torch(batch, vocab):
    logits, bitmask = _random_case(batch, vocab, seed=batch * 7 + vocab)
    expected = _naive(logits, bitmask, range(batch), vocab)
    by_torch = logits.clone()
    apply_token_bitmask_inplace_torch(by_torch, bitmask)
    by_triton = logits.clone()
    apply_token_bitmask_inplace_triton(by_triton, bitmask)
    by_cpu = logits.clone()
    apply_token_bitmask_inplace_cpu(by_cpu, bitmask)
    assert torch.equal(by_torch, expected)
    assert torch.equal(by_triton, expected)
    assert torch.equal(by_cpu, expected)


@pytest.mark.parametrize("vocab", [32001, 49152])
def test_strided_rows_and_indices(vocab):
    base_logits, base_mask = _random_case(8, vocab + 100, seed=vocab)
    logits = base_logits[::2, :vocab]  # (4, V): row stride 2 * (V + 100)
    bitmask = base_mask[::2, : (vocab + 31) // 32]  # strided rows too
    assert logits.stride(0) != vocab and bitmask.stride(0) != bitmask.shape[1]
    rows = [3, 0]
    expected = _naive(logits.contiguous(), bitmask.contiguous(), rows, vocab)
    fns = (
        apply_token_bitmask_inplace_torch,
        apply_token_bitmask_inplace_triton,
        apply_token_bitmask_inplace_cpu,
    )
    for fn in fns:
        target = base_logits.clone()[::2, :vocab]
        fn(target, bitmask, indices=rows)
        assert torch.equal(target, expected), fn.__name__


def test_width_mismatch_follows_xgrammar():
    # logits wider than the bitmask: the trailing logits are left untouched
    logits, bitmask = _random_case(2, 64, seed=3)
    wide = torch.randn(2, 64 + 40)
    wide[:, :64] = logits
    fns = (
        apply_token_bitmask_inplace_torch,
        apply_token_bitmask_inplace_triton,
        apply_token_bitmask_inplace_cpu,
    )
    for fn in fns:
        target = wide.clone()
        fn(target, bitmask)
        assert torch.equal(target[:, 64:], wide[:, 64:])
        assert torch.equal(target[:, :64], _naive(logits, bitmask, range(2), 64))
    # bitmask wider than the logits: only the logits' width is used
    narrow = logits[:, :50].clone()
    apply_token_bitmask_inplace(narrow, bitmask)
    assert torch.equal(narrow, _naive(logits, bitmask, range(2), 64)[:, :50])
    with pytest.raises(GrammarError):
        apply_token_bitmask_inplace(logits.clone(), bitmask.to(torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cpu_kernel_on_every_float_dtype_and_1d(dtype):
    logits, bitmask = _random_case(5, 1000, seed=11)
    bitmask[1] = -1  # a row with every word all-allowed
    bitmask[2] = 0  # a row with nothing allowed
    logits = logits.to(dtype)
    expected = _naive(logits.float(), bitmask, [0, 1, 2, 4], 1000).to(dtype)
    target = logits.clone()
    apply_token_bitmask_inplace(target, bitmask, indices=[0, 1, 2, 4])  # dispatches to numba
    assert torch.equal(target, expected)
    assert target[2].isneginf().all() and torch.equal(target[3], logits[3])
    one = logits[0].clone()  # (V,) logits with a (W,) bitmask
    apply_token_bitmask_inplace_cpu(one, bitmask[0])
    assert torch.equal(one, expected[0])


def test_allocate_is_all_allowed():
    bitmask = allocate_token_bitmask(3, 49153)
    assert bitmask.shape == (3, 1537) and bitmask.dtype == torch.int32
    logits = torch.zeros(3, 49153)
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.isfinite(logits).all()


def test_fill_bitmask_layouts(smollm2_vocab):
    grammar = compile_regex(r"[0-9]{2,3}x", smollm2_vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"12")
    expected = matcher.packed_row()
    words = len(expected)
    # contiguous CPU bitmask: the memmove path, into every row
    bitmask = allocate_token_bitmask(4, smollm2_vocab.vocab_size)
    matcher.fill_bitmask(bitmask, 2)
    assert np.array_equal(bitmask[2].numpy(), expected)
    assert (bitmask[[0, 1, 3]] == -1).all()  # other rows untouched
    # strided rows and a wider bitmask (extra words are zeroed: ids past the vocabulary)
    wide = torch.full((6, words + 3), -1, dtype=torch.int32)[::2]
    matcher.fill_bitmask(wide, 1)
    assert np.array_equal(wide[1, :words].numpy(), expected)
    assert (wide[1, words:] == 0).all()
    # applying the filled mask keeps exactly the allowed tokens
    logits = torch.zeros(1, smollm2_vocab.vocab_size)
    apply_token_bitmask_inplace(logits, bitmask[2:3])
    kept = torch.isfinite(logits[0]).nonzero().flatten().numpy()
    assert np.array_equal(kept, matcher.allowed_token_ids())
    with pytest.raises(GrammarError):
        matcher.fill_bitmask(torch.zeros(1, words - 1, dtype=torch.int32), 0)
    with pytest.raises(GrammarError):
        matcher.fill_bitmask(torch.zeros(1, words, dtype=torch.int64), 0)
    with pytest.raises(GrammarError):
        matcher.fill_bitmask(bitmask, 9)
