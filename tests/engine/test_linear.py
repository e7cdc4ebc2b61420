"""The CPU matmul layouts of `engine/models/linear.py` equal ``F.linear`` for every row count,
and the LM head's transposed weight copy exists from the first call (not from the first
one-row step, which under steady concurrency can come much later)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from formcast.engine.models.linear import (
    HAS_ONEDNN_BF16,
    LMHead,
    linear,
    packed_bf16_weight,
    uses_packed_bf16,
)


@pytest.mark.parametrize("num_rows", [1, 2, 3, 4, 5, 16, 33])
@pytest.mark.parametrize("has_bias", [False, True])
def test_linear_equals_f_linear(num_rows, has_bias):
    gen = torch.Generator().manual_seed(num_rows)
    x = torch.randn(num_rows, 64, generator=gen)  # (M, K)
    weight = torch.randn(96, 64, generator=gen)  # (N, K)
    bias = torch.randn(96, generator=gen) if has_bias else None
    got = linear(x, weight, bias)  # (M, N)
    assert got.shape == (num_rows, 96)
    torch.testing.assert_close(got, F.linear(x, weight, bias), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_rows", [0, 1, 2, 11, 12, 40])
def test_lm_head_equals_f_linear(num_rows):
    gen = torch.Generator().manual_seed(7)
    hidden = torch.randn(num_rows, 32, generator=gen)  # (M, H)
    weight = torch.randn(500, 32, generator=gen)  # (V, H)
    got = LMHead()(hidden, weight)  # (M, V)
    torch.testing.assert_close(got, F.linear(hidden, weight), rtol=1e-5, atol=1e-5)


def test_lm_head_copy_is_built_on_the_first_call_and_follows_the_weight():
    head = LMHead()
    weight = torch.randn(500, 32)
    head(torch.randn(5, 32), weight)  # a first call with several rows builds the copy
    first_copy = head._weight_t
    assert first_copy is not None and first_copy.shape == (32, 500)
    assert first_copy.is_contiguous()
    one_row = torch.randn(1, 32)
    head(one_row, weight)
    assert head._weight_t is first_copy  # built once
    with torch.no_grad():
        weight.mul_(2.0)  # an in-place update (new version) must not reuse the stale copy
    torch.testing.assert_close(head(one_row, weight), F.linear(one_row, weight))
    other = torch.randn(500, 32)
    torch.testing.assert_close(head(one_row, other), F.linear(one_row, other))


@pytest.mark.skipif(not HAS_ONEDNN_BF16, reason="no oneDNN bf16 on this CPU")
@pytest.mark.parametrize("num_rows", [1, 2, 5, 32, 70])
@pytest.mark.parametrize("has_bias", [False, True])
def test_packed_bf16_linear_is_f_linear_bit_for_bit(num_rows, has_bias):
    gen = torch.Generator().manual_seed(num_rows)
    x = torch.randn(num_rows, 576, generator=gen).bfloat16()  # (M, K)
    weight = torch.randn(960, 576, generator=gen).bfloat16()  # (N, K)
    bias = torch.randn(960, generator=gen).bfloat16() if has_bias else None
    assert uses_packed_bf16(x)
    got = linear(x, weight, bias)
    assert got.dtype == torch.bfloat16 and got.shape == (num_rows, 960)
    assert torch.equal(got, F.linear(x, weight, bias))
    head = LMHead()(x, weight)  # the LM head takes the same path
    assert torch.equal(head, F.linear(x, weight))


@pytest.mark.skipif(not HAS_ONEDNN_BF16, reason="no oneDNN bf16 on this CPU")
def test_packed_weight_is_made_once_and_follows_in_place_updates():
    weight = torch.randn(64, 32).bfloat16()
    x = torch.randn(3, 32).bfloat16()
    first = packed_bf16_weight(weight)
    assert packed_bf16_weight(weight) is first  # cached on the weight
    linear(x, weight)
    assert packed_bf16_weight(weight) is first
    with torch.no_grad():
        weight.mul_(3.0)  # new version: the reorder is redone
    assert packed_bf16_weight(weight) is not first
    assert torch.equal(linear(x, weight), F.linear(x, weight))


def test_float32_never_takes_the_packed_path():
    assert not uses_packed_bf16(torch.zeros(2, 4))
