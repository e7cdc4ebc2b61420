"""Triton kernels equal their torch references under TRITON_INTERPRET=1 (CPU).

Every combination of V in {32000, 32001, 49152, 262144} and B in {1, 7, 64} runs. For the one
combination that is slow interpreted (B=64, V=262144) the kernels run on 16 of the 64 rows
(rows 0, 4, ..., 60 of the 64-row tensor, a strided view, which also tests the row stride);
every other combination runs all rows.
"""

import importlib
import os

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")

from formcast.samplers import triton_logits, triton_race  # noqa: E402

if triton_logits.triton is None:  # pragma: no cover
    pytest.skip("triton is not installed", allow_module_level=True)

VOCAB_SIZES = [32000, 32001, 49152, 262144]
BATCH_SIZES = [1, 7, 64]


@pytest.fixture(scope="module", autouse=True)
def interpreted_kernels():
    """Kernels are built at import time; rebuild them in interpreter mode if needed."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    for module in (triton_logits, triton_race):
        if (
            type(
                module._mask_scale_kernel if module is triton_logits else module._race_kernel
            ).__name__
            != "InterpretedFunction"
        ):
            importlib.reload(module)
    yield
    if previous is None:
        os.environ.pop("TRITON_INTERPRET", None)


def rows_under_test(num_rows: int, vocab_size: int) -> slice:
    return slice(None, None, 4) if num_rows * vocab_size > 4_000_000 else slice(None)


def make_inputs(num_rows, vocab_size, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(num_rows, vocab_size, generator=generator) * 4
    num_words = (vocab_size + 31) // 32
    bitmask = torch.randint(
        -(2**31), 2**31 - 1, (num_rows, num_words), generator=generator, dtype=torch.int64
    ).to(torch.int32)
    bitmask[0, :] = 0  # row 0: a single allowed token, in the last (partial) word
    bit = 1 << ((vocab_size - 1) % 32)
    bitmask[0, -1] = bit - 2**32 if bit >= 2**31 else bit  # int32 two's complement
    if num_rows > 1:
        bitmask[1, :] = -1  # row 1: everything allowed, including bit 31 (the sign bit)
    temperature = torch.rand(num_rows, generator=generator) * 2 + 0.05
    return logits, bitmask, temperature


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
@pytest.mark.parametrize("num_rows", BATCH_SIZES)
def test_mask_scale_kernel_matches_torch(num_rows, vocab_size):
    logits, bitmask, temperature = make_inputs(num_rows, vocab_size, seed=num_rows + vocab_size)
    rows = rows_under_test(num_rows, vocab_size)
    # the no-bitmask variant is cheap to get right; run it on the B=7 sizes only (time budget)
    for mask in (bitmask, None) if num_rows == 7 else (bitmask,):
        expected = logits.clone()
        expected_max, expected_lse = triton_logits.mask_scale_logits_inplace_torch(
            expected, mask, temperature
        )
        actual = logits.clone()
        view = actual[rows]  # strided rows for the largest case
        actual_max, actual_lse = triton_logits.mask_scale_logits_inplace_triton(
            view, None if mask is None else mask[rows], temperature[rows]
        )
        torch.testing.assert_close(view, expected[rows], rtol=1e-6, atol=0)
        assert torch.equal(torch.isinf(view), torch.isinf(expected[rows]))
        torch.testing.assert_close(actual_max, expected_max[rows], rtol=0, atol=0)
        torch.testing.assert_close(actual_lse, expected_lse[rows], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
@pytest.mark.parametrize("num_rows", BATCH_SIZES)
def test_race_kernel_matches_torch(num_rows, vocab_size):
    logits, bitmask, temperature = make_inputs(num_rows, vocab_size, seed=vocab_size - num_rows)
    triton_logits.mask_scale_logits_inplace_torch(logits, bitmask, temperature)
    noise = torch.empty(num_rows, vocab_size).exponential_(
        generator=torch.Generator().manual_seed(3)
    )
    noise[:, :50] = 0.0  # exact zeros: must not let a masked (-inf) token win through NaN
    rows = rows_under_test(num_rows, vocab_size)
    expected = triton_race.race_argmax_torch(logits[rows], noise[rows].clone())
    actual = triton_race.race_argmax_triton(logits[rows], noise[rows])
    assert torch.equal(actual, expected)
    assert bool(torch.isfinite(logits[rows].gather(1, actual[:, None])).all())
    if num_rows > 0:
        assert int(actual[0]) == vocab_size - 1  # the single allowed token of row 0
