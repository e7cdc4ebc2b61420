"""Our SmolLM2 vs transformers on the real weights (float32): logits and greedy tokens."""

from __future__ import annotations

import pytest
import torch
from logit_recorder import LogitRecorder

from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=3)


def _random_prompts(lengths: list[int], seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in lengths]


@pytest.mark.parametrize(
    "options",
    [
        dict(max_num_batched_tokens=512, block_size=16),
        dict(max_num_batched_tokens=40, block_size=32),  # chunked prefill mixed with decodes
    ],
    ids=["one-step-prefill", "chunked-prefill"],
)
def test_logits_match_transformers_on_mixed_batch(smol_folder, smol_hf, options):
    llm = LLM(smol_folder, num_kv_blocks=64, enable_prefix_caching=False, **options)
    recorder = LogitRecorder(llm, all_positions=True)
    prompts = _random_prompts([1, 5, 17, 33, 48, 70], seed=0)
    outputs = llm.generate(prompts, GREEDY)
    assert len(recorder.records) == sum(len(p) + 2 for p in prompts)
    assert recorder.max_abs_diff(outputs, smol_hf) < 1e-4
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks


def test_logits_match_with_prefix_cache_hits(smol_folder, smol_hf):
    llm = LLM(smol_folder, num_kv_blocks=64, block_size=16, max_num_batched_tokens=256)
    shared = _random_prompts([40], seed=1)[0]
    tails = _random_prompts([3, 9, 20], seed=2)
    first = llm.generate([shared + tails[0]], GREEDY)
    recorder = LogitRecorder(llm, all_positions=True)
    second = llm.generate([shared + tails[1], shared + tails[2]], GREEDY)
    # 40 shared tokens = two full 16-token blocks reused by each of the two prompts
    assert llm.block_manager.num_prefix_hit_tokens == 2 * 32
    assert all(out.num_cached_prompt_tokens == 32 for out in second)
    assert recorder.max_abs_diff(first + second, smol_hf) < 1e-4
    # recorded positions start after the cached prefix
    assert min(position for _, _, position, _ in recorder.records) == 32


def test_logits_match_under_preemption(smol_folder, smol_hf):
    # 9 blocks of 16 tokens cannot hold 5 sequences of ~36 tokens: preemption by recompute
    llm = LLM(smol_folder, num_kv_blocks=9, block_size=16, watermark=0.0)
    recorder = LogitRecorder(llm)
    prompts = _random_prompts([20, 25, 14, 18, 22], seed=3)
    outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=14, ignore_eos=True))
    assert llm.scheduler.num_preemptions > 0
    assert all(len(out.token_ids) == 14 for out in outputs)
    assert recorder.max_abs_diff(outputs, smol_hf) < 1e-4
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time",
    "1, 2, 3, 4, 5,",
    "The quick brown fox",
    "import numpy as np\n",
    "Q: What is 2 + 2?\nA:",
    "Translate to French: cheese =",
    "Water boils at",
    "My favourite colour is",
    "<html>\n<head>",
    "SELECT * FROM",
    "The theory of relativity says",
    "Hello",
    [{"role": "user", "content": "Name a fruit."}],
    [{"role": "user", "content": "What is the tallest mountain?"}],
]


def test_greedy_generation_matches_transformers_for_16_concurrent_prompts(smol_folder, smol_hf):
    llm = LLM(smol_folder, max_num_seqs=16, num_kv_blocks=128)
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=8))
    assert len(outputs) == 16
    with torch.no_grad():
        for out in outputs:
            ids = torch.tensor([out.prompt_token_ids])
            reference = smol_hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False
            )[0, ids.shape[1] :].tolist()
            assert out.token_ids == reference, out.prompt
            expected_text = llm.tokenizer.decode(reference, skip_special_tokens=True)
            assert out.text == expected_text
            assert out.finish_reason == ("stop" if reference[-1] == 2 else "length")


def test_bfloat16_smoke(smol_folder):
    llm = LLM(smol_folder, dtype="bfloat16", num_kv_blocks=16)
    assert llm.runner.kv_cache.dtype == torch.bfloat16
    out = llm.generate(["The capital of France is"], SamplingParams(temperature=0, max_tokens=5))
    assert len(out[0].token_ids) == 5 and out[0].text
