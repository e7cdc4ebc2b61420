"""MedusaHeads: untrained heads equal the base LM head, subset logits, candidates, files and
the shipped heads' location. (Training and the shipped heads' quality: tests/training.)"""

from __future__ import annotations

import pytest
import torch

from formcast.engine.speculative.medusa_heads import MedusaHeads, default_medusa_heads_path
from formcast.errors import EngineConfigError, FormcastError, ModelLoadError

V, H, K = 300, 24, 3


def _lm_head(seed: int = 0) -> torch.Tensor:
    return torch.randn(V, H, generator=torch.Generator().manual_seed(seed))


def _subset() -> torch.Tensor:
    return torch.tensor(sorted(torch.randperm(V, generator=torch.Generator().manual_seed(1))[:70]))


def _randomize(heads: MedusaHeads, seed: int = 2) -> MedusaHeads:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        heads.weight.copy_(torch.randn(heads.weight.shape, generator=g) * 0.3)
        heads.bias.copy_(torch.randn(heads.bias.shape, generator=g) * 0.3)
    return heads


@pytest.mark.parametrize("with_subset", [False, True])
def test_untrained_heads_equal_base_lm_head(with_subset):
    lm_head = _lm_head()
    subset = _subset() if with_subset else None
    heads = MedusaHeads(H, K, lm_head, subset)
    hidden = torch.randn(5, H)
    logits = heads(hidden)  # (K, N, V)
    assert logits.shape == (K, 5, V) and logits.dtype == torch.float32
    base = hidden @ lm_head.T  # (N, V)
    ids = torch.arange(V) if subset is None else subset
    for i in range(K):
        torch.testing.assert_close(logits[i][:, ids], base[:, ids], atol=1e-5, rtol=1e-5)
    outside = torch.ones(V, dtype=torch.bool)
    outside[ids] = False
    assert bool(torch.isneginf(logits[:, :, outside]).all())
    assert bool(torch.isfinite(logits[:, :, ids]).all())


def test_forward_matches_the_residual_block_formula():
    lm_head, subset = _lm_head(), _subset()
    heads = _randomize(MedusaHeads(H, K, lm_head, subset))
    hidden = torch.randn(3, H)
    logits = heads(hidden)
    for i in range(K):
        state = hidden + torch.nn.functional.silu(hidden @ heads.weight[i].T + heads.bias[i])
        expected = state @ lm_head[subset].T
        torch.testing.assert_close(logits[i][:, subset], expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("num_rows", [1, 2, 7, 20])
def test_top_candidates_agree_with_forward(num_rows):
    heads = _randomize(MedusaHeads(H, K, _lm_head(), _subset()))
    hidden = torch.randn(num_rows, H)
    best = heads.top_candidates(hidden, [4, 2, 1])
    assert best.shape == (K, num_rows, 4) and best.dtype == torch.int64
    logits = heads(hidden)
    expected = logits.topk(4, dim=-1).indices
    assert torch.equal(best, expected)
    assert bool(torch.isin(best, heads.token_ids).all())


def test_bad_arguments_raise_typed_errors():
    heads = MedusaHeads(H, K, _lm_head())
    with pytest.raises(EngineConfigError, match="top_k"):
        heads.top_candidates(torch.randn(1, H), [1, 2])
    with pytest.raises(EngineConfigError, match="hidden states"):
        heads(torch.randn(2, H + 1))
    with pytest.raises(EngineConfigError, match="sorted"):
        MedusaHeads(H, K, _lm_head(), torch.tensor([5, 3]))
    with pytest.raises(EngineConfigError, match="num_heads"):
        MedusaHeads(H, 0, _lm_head())


def test_save_load_round_trip(tmp_path):
    lm_head = _lm_head()
    heads = _randomize(MedusaHeads(H, K, lm_head, _subset()))
    heads.metadata = {"note": "unit test", "heldout_accuracy": {"top1": [0.5, 0.3, 0.2]}}
    path = tmp_path / "heads.safetensors"
    heads.save(path, base_model="tiny")
    loaded = MedusaHeads.load(path, lm_head)
    assert loaded.num_heads == K and torch.equal(loaded.token_ids, heads.token_ids)
    assert loaded.metadata["note"] == "unit test" and loaded.metadata["base_model"] == "tiny"
    hidden = torch.randn(4, H)
    # fp16 weights: compare with the fp16-rounded originals exactly, the originals loosely
    torch.testing.assert_close(loaded.weight, heads.weight.half().float())
    finite = heads.token_ids
    torch.testing.assert_close(
        loaded(hidden)[:, :, finite], heads(hidden)[:, :, finite], atol=2e-2, rtol=1e-2
    )
    assert torch.isneginf(loaded(hidden)).sum() == torch.isneginf(heads(hidden)).sum()


def test_load_rejects_mismatched_models(tmp_path):
    path = tmp_path / "heads.safetensors"
    MedusaHeads(H, K, _lm_head()).save(path, base_model="tiny")
    with pytest.raises(ModelLoadError, match="hidden size 24") as info:
        MedusaHeads.load(path, torch.randn(V, H + 8))
    assert isinstance(info.value, FormcastError)
    with pytest.raises(ModelLoadError, match="vocab size 300"):
        MedusaHeads.load(path, torch.randn(V + 1, H))
    with pytest.raises(ModelLoadError, match="does not exist"):
        MedusaHeads.load(tmp_path / "missing.safetensors", _lm_head())
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError):
        MedusaHeads.load(junk, _lm_head())


def test_default_path_for_unknown_model_is_none():
    assert default_medusa_heads_path("some-other-model") is None
