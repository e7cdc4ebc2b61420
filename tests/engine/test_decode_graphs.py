"""DecodeGraphs: decode steps through a prepared forward per batch-size bucket give the eager
engine's tokens (compiled with inductor on the torch path; static buffers with the Triton
kernels, the CPU twin of CUDA-graph replay), padding rows included."""

from __future__ import annotations

import pytest
import torch

from formcast.engine.attention.paged_op import paged_attention
from formcast.engine.decode_graphs import bucket_ladder
from formcast.engine.llm_engine import LLM
from formcast.errors import EngineConfigError, EngineError
from formcast.samplers import SamplingParams

PROMPTS = [[1, 5, 9, 22, 7], [3, 4], [8, 8, 8, 8, 8, 8, 8, 8, 8, 2, 11], [40, 41, 42]]


def _greedy(llm: LLM, prompts, max_tokens: int = 12) -> list[list[int]]:
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    return [list(out.outputs[0].token_ids) for out in llm.generate(prompts, params)]


def test_bucket_ladder():
    assert bucket_ladder(1) == [1]
    assert bucket_ladder(4) == [1, 2, 4]
    assert bucket_ladder(6) == [1, 2, 4, 6]
    assert bucket_ladder(64) == [1, 2, 4, 8, 16, 32, 64]


def test_compile_decode_is_checked_and_off_on_cpu():
    from formcast.engine.config import EngineConfig

    assert EngineConfig(device="cpu").compile_decode is False
    with pytest.raises(EngineConfigError, match="compile_decode"):
        EngineConfig(device="cpu", compile_decode="yes")


def test_the_op_needs_a_step():
    q = torch.zeros(1, 2, 4)
    with pytest.raises(EngineError, match="attention_step"):
        paged_attention(q, q[:, :1], q[:, :1], 0)


@pytest.mark.slow
def test_compiled_decode_gives_the_eager_tokens(tiny_folders):
    options = dict(max_num_seqs=4, num_kv_blocks=64, max_model_len=128, dtype="float32")
    eager = LLM(tiny_folders["llama"], **options)
    compiled = LLM(tiny_folders["llama"], compile_decode=True, **options)
    graphs = compiled.runner.decode_graphs
    assert graphs is not None and not graphs.is_static and graphs.buckets == [1, 2, 4]
    assert graphs.warm_up_seconds > 0
    # 4, 3 (bucket 4 with a padding row), 1 sequence(s) per step
    for prompts in (PROMPTS, PROMPTS[:3], PROMPTS[:1]):
        runs = graphs.num_runs
        assert _greedy(compiled, prompts) == _greedy(eager, prompts)
        assert graphs.num_runs > runs  # the decode steps went through the graphs


@pytest.mark.slow
def test_static_decode_buffers_give_the_eager_tokens(tiny_folders):
    # the Triton kernels under the interpreter: the CPU twin of CUDA-graph replay
    options = dict(
        max_num_seqs=4,
        num_kv_blocks=64,
        max_model_len=128,
        dtype="float32",
        attention_backend="triton",
    )
    eager = LLM(tiny_folders["llama"], **options)
    static = LLM(tiny_folders["llama"], compile_decode=True, **options)
    graphs = static.runner.decode_graphs
    assert graphs is not None and graphs.is_static and not graphs.is_cuda_graph
    assert static.runner.kv_cache.shape[3] == static.runner.num_kv_blocks + 1  # scratch block
    for prompts in (PROMPTS[:3], PROMPTS[:1]):
        runs = graphs.num_runs
        assert _greedy(static, prompts, 8) == _greedy(eager, prompts, 8)
        assert graphs.num_runs > runs
