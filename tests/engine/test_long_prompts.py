"""Prompts longer than one step's token budget: chunked prefill on the tiny random Llama.

A prompt over ``max_num_batched_tokens`` is prefilled over several steps; the first chunks
need no logits row. The oracle is the same engine configuration with a budget that holds the
whole prompt (one prefill span): chunking must not change a single token or logprob.
"""

from __future__ import annotations

import pytest
import torch

from formcast.engine.llm_engine import LLM
from formcast.engine.outputs import RequestOutput
from formcast.samplers import SamplingParams

NUM_KV_BLOCKS = 512  # 8,192 tokens: two 3,000-token prompts and their outputs
PARAMS = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, logprobs=2)


def _prompt(seed: int, length: int = 3000) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(100, 40000, (length,), generator=generator).tolist()


@pytest.fixture(scope="module")
def chunked(tiny_long_folder) -> LLM:
    """The default token budget (2,048): a 3,000-token prompt takes two steps."""
    llm = LLM(tiny_long_folder, num_kv_blocks=NUM_KV_BLOCKS, device="cpu")
    assert llm.config.max_num_batched_tokens == 2048 < 3000 < llm.config.max_model_len == 8192
    return llm


@pytest.fixture(scope="module")
def whole(tiny_long_folder) -> LLM:
    """A budget that holds two whole prompts: every prompt is prefilled in one span."""
    return LLM(
        tiny_long_folder,
        num_kv_blocks=NUM_KV_BLOCKS,
        max_num_batched_tokens=8192,
        device="cpu",
    )


def _assert_same(got: RequestOutput, want: RequestOutput) -> None:
    assert got.token_ids == want.token_ids
    for got_entry, want_entry in zip(got.logprobs, want.logprobs, strict=True):
        assert got_entry.keys() == want_entry.keys()
        for token_id, logprob in want_entry.items():
            assert got_entry[token_id] == pytest.approx(logprob, abs=1e-4)


def _assert_pool_is_full(llm: LLM) -> None:
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
    assert not llm.has_unfinished_requests()


def test_prompt_longer_than_the_step_budget_matches_one_span_prefill(chunked, whole):
    prompt = _prompt(0)
    got = chunked.generate([prompt], PARAMS)[0]
    want = whole.generate([prompt], PARAMS)[0]
    # 2 prefill chunks + 7 decodes here; 1 prefill + 7 decodes there
    assert got.metrics["num_forward_passes"] == 9
    assert want.metrics["num_forward_passes"] == 8
    _assert_same(got, want)
    _assert_pool_is_full(chunked)


def test_two_long_prompts_in_one_step_match_one_span_prefill(chunked, whole):
    prompts = [_prompt(1), _prompt(2, length=3100)]
    # step 1: the first prompt's first 2,048 tokens (no logits row); step 2: its last 952
    # and the second prompt's first 1,096 (no logits row); step 3: the second's rest
    got = chunked.generate(prompts, PARAMS)
    want = whole.generate(prompts, PARAMS)
    assert [out.metrics["num_forward_passes"] for out in got] == [9, 9]  # 2 chunks + 7 decodes
    for got_one, want_one in zip(got, want, strict=True):
        _assert_same(got_one, want_one)
    _assert_pool_is_full(chunked)
