"""KV cache sizing (formcast.engine.memory_profile): the profile arithmetic on fabricated device
numbers, the CPU default, the warm-up step on the tiny random Llama, explicit overrides."""

from __future__ import annotations

import math

import pytest
import torch

from formcast.engine.config import EngineConfig
from formcast.engine.llm_engine import LLM
from formcast.engine.memory_profile import (
    CPU_KV_RAM_FRACTION,
    DEFAULT_CPU_KV_BYTES,
    KVBudget,
    MemoryProfile,
    cpu_kv_budget,
    draft_reservation,
    engine_peak_bytes,
    kv_bytes_per_token,
    profiled_kv_budget,
    warm_up_spans,
    warm_up_step,
)
from formcast.engine.models.config import ModelConfig
from formcast.errors import EngineConfigError
from formcast.samplers import SamplingParams

GIB = 1 << 30
MIB = 1 << 20

# -- the profile's arithmetic ----------------------------------------------------------------


def test_profiled_budget_is_the_share_minus_the_peak():
    # an 80 GiB device, 79 GiB free before loading; weights + warm-up peaked at 10 GiB
    profile = MemoryProfile(total_bytes=80 * GIB, free_before_bytes=79 * GIB, peak_bytes=10 * GIB)
    budget = profiled_kv_budget(profile, 0.9, bytes_per_block=MIB)
    # 0.9 * 80 GiB = 72 GiB share, 62 GiB left for 1 MiB blocks
    assert budget.num_blocks == 62 * 1024
    assert budget.source == "profile"
    assert (budget.utilization, budget.total_bytes, budget.peak_bytes) == (0.9, 80 * GIB, 10 * GIB)
    assert budget.kv_bytes == 62 * GIB
    assert "0.9 x 80.00 GiB" in budget.describe() and "10.00 GiB peak" in budget.describe()


def test_profiled_budget_floors_to_whole_blocks_and_sets_draft_weights_aside():
    profile = MemoryProfile(total_bytes=1000, free_before_bytes=1000, peak_bytes=101)
    # floor(0.5 * 1000) - 101 - 9 reserved = 390 bytes: 3 blocks of 120
    budget = profiled_kv_budget(profile, 0.5, bytes_per_block=120, reserved_bytes=9)
    assert budget.num_blocks == 3
    assert budget.peak_bytes == 110  # the reservation is reported with the peak


@pytest.mark.parametrize("peak_bytes", [72 * GIB, 72 * GIB - MIB + 1, 90 * GIB])
def test_profiled_budget_refuses_a_share_without_room_for_a_block(peak_bytes):
    profile = MemoryProfile(total_bytes=80 * GIB, free_before_bytes=80 * GIB, peak_bytes=peak_bytes)
    with pytest.raises(EngineConfigError, match="gpu_memory_utilization=0.9.*leaves no room"):
        profiled_kv_budget(profile, 0.9, bytes_per_block=MIB)


def test_profiled_budget_refuses_when_others_hold_the_share():
    # another process holds 20 GiB: 60 GiB free < 0.9 * 80 GiB asked for
    profile = MemoryProfile(total_bytes=80 * GIB, free_before_bytes=60 * GIB, peak_bytes=GIB)
    with pytest.raises(EngineConfigError, match="only 60.00 GiB were free"):
        profiled_kv_budget(profile, 0.9, bytes_per_block=MIB)
    assert profiled_kv_budget(profile, 0.7, bytes_per_block=MIB).num_blocks == 55 * 1024


def test_engine_peak_counts_torch_peak_and_non_torch_growth_without_the_temporary_cache():
    peak = engine_peak_bytes(
        torch_peak_bytes=9 * GIB,  # 1 GiB of another engine + 6 GiB weights + 2 GiB step
        torch_before_bytes=1 * GIB,
        temporary_bytes=GIB // 2,  # the warm-up's own cache, inside the 2 GiB step
        used_before_bytes=2 * GIB,
        used_after_bytes=12 * GIB,  # grew 10 GiB: 9 GiB reserved by torch + 1 GiB context etc
        reserved_before_bytes=1 * GIB,
        reserved_after_bytes=10 * GIB,
    )
    assert peak == (9 - 1) * GIB - GIB // 2 + 1 * GIB


def test_engine_peak_never_counts_a_shrinking_pool_as_negative():
    peak = engine_peak_bytes(
        torch_peak_bytes=3 * GIB,
        torch_before_bytes=0,
        temporary_bytes=0,
        used_before_bytes=5 * GIB,
        used_after_bytes=4 * GIB,  # another process freed memory meanwhile
        reserved_before_bytes=0,
        reserved_after_bytes=3 * GIB,
    )
    assert peak == 3 * GIB


# -- the CPU default ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wanted", "available", "expected_bytes"),
    [
        (100 * MIB, 64 * GIB, 100 * MIB),  # what max_num_seqs full sequences need
        (8 * GIB, 64 * GIB, DEFAULT_CPU_KV_BYTES),  # the fixed cap
        (8 * GIB, 2 * GIB, int(CPU_KV_RAM_FRACTION * 2 * GIB)),  # the RAM available
        (8 * GIB, None, DEFAULT_CPU_KV_BYTES),  # RAM unknown: the fixed cap only
    ],
)
def test_cpu_budget_is_the_smallest_cap(wanted, available, expected_bytes):
    budget = cpu_kv_budget(wanted, available, bytes_per_block=MIB)
    assert budget.num_blocks == expected_bytes // MIB
    assert budget.source == "cpu_default" and budget.total_bytes == available


def test_cpu_budget_refuses_when_the_ram_holds_no_block():
    with pytest.raises(EngineConfigError, match="RAM"):
        cpu_kv_budget(GIB, available_bytes=MIB, bytes_per_block=MIB)


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.01, math.nan, True, "0.9", None])
def test_config_refuses_a_utilization_outside_zero_one(value):
    with pytest.raises(EngineConfigError, match="gpu_memory_utilization"):
        EngineConfig(gpu_memory_utilization=value)


@pytest.mark.parametrize("value", [1, 1.0, 0.5, 1e-3])
def test_config_takes_a_utilization_in_zero_one(value):
    assert EngineConfig(gpu_memory_utilization=value).gpu_memory_utilization == value


# -- warm-up spans ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_tokens", "num_seqs", "max_model_len", "logits_per_span"),
    [(2048, 64, 8192, 1), (2048, 256, 512, 5), (100, 8, 40, 1), (3, 8, 512, 1), (64, 1, 64, 1)],
)
def test_warm_up_spans_fill_the_token_budget_with_one_span_per_sequence(
    num_tokens, num_seqs, max_model_len, logits_per_span
):
    spans = warm_up_spans(num_tokens, num_seqs, max_model_len, logits_per_span)
    lengths = [length for length, _ in spans]
    assert len(spans) == min(num_seqs, num_tokens)
    assert sum(lengths) == min(num_tokens, len(spans) * max_model_len)
    assert max(lengths) <= max_model_len
    assert [rows for _, rows in spans] == [min(n, logits_per_span) for n in lengths]


def test_warm_up_spans_stop_at_what_the_sequences_can_hold():
    # 2 sequences of at most 10 tokens cannot take a 64-token budget
    assert warm_up_spans(64, 2, 10, 1) == [(10, 1), (10, 1)]


# -- the engine on CPU (tiny random Llama) ---------------------------------------------------


def test_engine_on_cpu_sizes_by_the_default_and_reports_it(tiny_folders):
    llm = LLM(tiny_folders["llama"], device="cpu", max_num_seqs=4, max_model_len=256)
    mc = llm.model_config
    per_block = kv_bytes_per_token(mc, torch.float32) * llm.config.block_size
    # tiny: 4 full sequences (64 blocks + 1) are far below both caps
    assert llm.runner.kv_budget == KVBudget(
        "cpu_default", 4 * 256 // 16 + 1, per_block, total_bytes=llm.runner.kv_budget.total_bytes
    )
    assert llm.runner.num_kv_blocks == llm.block_manager.num_blocks == 65
    assert llm.runner.kv_budget.total_bytes > 0  # /proc/meminfo read
    assert llm.runner.kv_cache.shape[3] == 65


def test_explicit_sizes_override_the_default(tiny_folders):
    by_blocks = LLM(tiny_folders["llama"], device="cpu", num_kv_blocks=7, max_model_len=256)
    assert by_blocks.runner.kv_budget.source == "num_kv_blocks"
    assert by_blocks.runner.kv_cache.shape[3] == 7
    per_block = by_blocks.runner.bytes_per_block
    by_bytes = LLM(
        tiny_folders["llama"],
        device="cpu",
        kv_cache_memory_bytes=5 * per_block + 1,
        max_model_len=256,
    )
    assert by_bytes.runner.kv_budget.source == "kv_cache_memory_bytes"
    assert by_bytes.runner.num_kv_blocks == 5
    with pytest.raises(EngineConfigError, match="holds no block"):
        LLM(tiny_folders["llama"], device="cpu", kv_cache_memory_bytes=per_block - 1)


def test_warm_up_step_leaves_the_cache_and_the_outputs_untouched(tiny_folders):
    # the CUDA profile's forward, run here on the torch path: a step of the whole token budget
    # (spans up to max_model_len, logits for every sequence), a sampler pass, then the
    # runner's own cache is bound again, unchanged
    llm = LLM(
        tiny_folders["llama"],
        device="cpu",
        max_num_seqs=8,
        max_num_batched_tokens=300,
        max_model_len=256,
        num_kv_blocks=64,
        enable_prefix_caching=False,
    )
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    prompts = [[5, 6, 7, 8, 9], [11, 12, 13]]
    before = [out.token_ids for out in llm.generate(prompts, params)]
    runner = llm.runner
    cache = runner.kv_cache
    contents = cache.clone()
    spans = warm_up_spans(300, 8, 256, 5)
    assert sorted(length for length, _ in spans) == [1] * 6 + [38, 256]
    temporary_bytes = warm_up_step(runner, spans)
    # 6 one-token spans of a block each, 38 tokens in 3 blocks, 256 in 16
    assert temporary_bytes == (6 + 3 + 16) * runner.bytes_per_block
    assert runner.kv_cache is cache and runner.num_kv_blocks == 64
    for i, layer in enumerate(runner.model.model.layers):
        assert layer.self_attn.k_cache.data_ptr() == cache[i, 0].data_ptr()
        assert layer.self_attn.v_cache.data_ptr() == cache[i, 1].data_ptr()
    assert torch.equal(cache, contents)
    assert [out.token_ids for out in llm.generate(prompts, params)] == before


def test_draft_reservation_prices_the_draft_cache_and_weights(tiny_folders):
    mc = ModelConfig.from_folder(tiny_folders["llama"])
    plain = EngineConfig(device="cpu")
    assert draft_reservation(plain, mc) == (0, 0)
    ngram = EngineConfig(device="cpu", speculative={"method": "ngram"})
    assert draft_reservation(ngram, mc) == (0, 0)
    self_draft = EngineConfig(
        device="cpu", speculative={"method": "self_draft", "draft_num_layers": 1}
    )
    # one of the tiny model's 2 layers: K and V, 2 KV heads of 16 floats, 16 tokens
    assert draft_reservation(self_draft, mc) == (1 * 2 * 2 * 16 * 4 * 16, 0)
    draft_model = EngineConfig(
        device="cpu",
        dtype="bfloat16",
        speculative={"method": "draft_model", "draft_model": str(tiny_folders["qwen2"])},
    )
    from transformers import AutoModelForCausalLM

    draft = AutoModelForCausalLM.from_pretrained(tiny_folders["qwen2"])
    num_params = sum(p.numel() for p in draft.parameters())
    assert draft_reservation(draft_model, mc) == (2 * 2 * 2 * 16 * 2 * 16, 2 * num_params)
