"""Issue 22's device breakages (fixed in 969bdf8), one test each where one can exist.

Each test runs on CPU here and again on CUDA wherever a device exists (the ``cuda`` cases skip
without one): seeded tree verification draws on its generator's device; the transformers
adapter moves the host bitmask and token ids to the scores' device (penalties included); the
engine runs on an explicit device given as a string or a ``torch.device``. The refusals of
``block_size`` and of missing devices are in ``tests/engine/test_llm_api.py``.
"""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

from formcast.bitmask import allocate_token_bitmask, allow_only_inplace
from formcast.decoding.speculative.draft_tree import TreeTopology, build_tree
from formcast.decoding.speculative.tree_verifier import _uniform, verify_tree_sampled
from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams
from formcast.samplers.hf_adapter import FormcastLogitsProcessor

NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)]


def _tree():
    # root: children 0, 1, 2; under the first: 0, 3; under the second: 2
    return build_tree(TreeTopology([[0], [1], [2], [0, 0], [0, 1], [1, 0]]), [[0, 1, 2], [0, 3, 2]])


@pytest.mark.parametrize("device", DEVICES)
def test_seeded_tree_verification_draws_on_the_generators_device(device):
    # before the fix the uniform draw was a CPU torch.rand: a CUDA generator raised there
    assert _uniform(torch.Generator(device=device).manual_seed(0)).device.type == device
    tree = _tree()
    rows = torch.softmax(
        torch.randn(len(tree) + 1, 4, generator=torch.Generator().manual_seed(1)), -1
    )
    probs = rows.double().to(device)
    verdicts = {}
    for seed in range(12):
        runs = []
        for global_seed in (0, 1):  # the request's generator alone decides, not the global RNG
            torch.manual_seed(global_seed)
            generator = torch.Generator(device=device).manual_seed(seed)
            verdict = verify_tree_sampled(tree, probs, generator)
            runs.append((tuple(verdict.path), verdict.final_token_id))
        assert runs[0] == runs[1], seed
        verdicts[seed] = runs[0]
    assert len(set(verdicts.values())) > 1  # the draws do vary with the seed


@pytest.mark.parametrize("device", DEVICES)
def test_hf_adapter_moves_host_bitmask_and_ids_to_the_scores_device(device):
    vocab_size, prompt_length = 300, 4
    generator = torch.Generator().manual_seed(0)
    scores = (torch.randn(2, vocab_size, generator=generator) * 3).to(device)
    input_ids = torch.randint(0, vocab_size, (2, 7), generator=generator).to(device)
    allowed = [5, 7, 9, int(input_ids[0, 5])]  # one allowed token the penalty also hits

    def host_bitmask(ids: torch.Tensor) -> torch.Tensor:
        bitmask = allocate_token_bitmask(ids.shape[0], vocab_size)  # host memory, as matchers fill
        allow_only_inplace(bitmask, 0, allowed)
        return bitmask

    processor = FormcastLogitsProcessor(
        SamplingParams(repetition_penalty=1.3),
        [2],
        bitmask_fn=host_bitmask,
        prompt_length=prompt_length,
    )
    got = processor(input_ids, scores.clone())
    assert got.device.type == device
    # oracle: transformers' repetition penalty (prompt and output tokens), then the mask
    expected = RepetitionPenaltyLogitsProcessor(1.3)(input_ids.cpu(), scores.float().cpu())
    is_masked = torch.ones(vocab_size, dtype=torch.bool)
    is_masked[allowed] = False
    expected[0, is_masked] = -torch.inf
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        torch.device("cpu"),
        pytest.param("cuda:0", marks=NEEDS_CUDA),
        pytest.param(torch.device("cuda", 0), marks=NEEDS_CUDA),
    ],
    ids=str,
)
def test_engine_runs_on_an_explicit_device(tiny_folders, device):
    llm = LLM(tiny_folders["llama"], device=device, num_kv_blocks=16, max_model_len=128)
    assert llm.config.device == str(torch.device(device))
    assert llm.runner.kv_cache.device == torch.device(device)
    assert next(llm.runner.model.parameters()).device == torch.device(device)
    out = llm.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    assert len(out[0].token_ids) == 6
