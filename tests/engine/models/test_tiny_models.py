"""Llama (Llama-3 RoPE scaling), Qwen2 and Qwen3 with random weights: ours vs transformers."""

from __future__ import annotations

import pytest
import torch
from logit_recorder import LogitRecorder

from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams

ARCHITECTURES = ["llama", "qwen2", "qwen3"]


def _prompts(seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = [3, 11, 16, 29, 40, 7, 64, 21]
    return [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in lengths]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_logits_match_transformers(tiny_folders, arch):
    from transformers import AutoModelForCausalLM

    folder = tiny_folders[arch]
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    llm = LLM(folder, max_num_batched_tokens=48, num_kv_blocks=64, block_size=16)
    recorder = LogitRecorder(llm, all_positions=True)
    prompts = _prompts(0)
    outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    # second round reuses cached prefixes of the first
    again = llm.generate(
        [p + [5, 6] for p in prompts[:4]], SamplingParams(temperature=0, max_tokens=2)
    )
    assert llm.block_manager.num_prefix_hit_tokens > 0
    # after a reset the same prompts hit nothing and compute the same logits afresh
    hits = llm.block_manager.num_prefix_hit_tokens
    assert llm.reset_prefix_cache() > 0 and llm.reset_prefix_cache() == 0
    fresh = llm.generate(
        [p + [5, 6] for p in prompts[:4]], SamplingParams(temperature=0, max_tokens=2)
    )
    assert llm.block_manager.num_prefix_hit_tokens == hits
    assert [o.token_ids for o in fresh] == [o.token_ids for o in again]
    assert recorder.max_abs_diff(outputs + again + fresh, hf) < 1e-4


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_generation_matches_transformers(tiny_folders, arch):
    from transformers import AutoModelForCausalLM

    folder = tiny_folders[arch]
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    llm = LLM(folder, max_num_seqs=8, num_kv_blocks=64)
    prompts = _prompts(1)
    outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=12))
    for prompt, out in zip(prompts, outputs, strict=True):
        ids = torch.tensor([prompt])
        reference = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False
        )[0, len(prompt) :].tolist()
        assert out.token_ids == reference
