"""One engine decode step waits for the device at most once: to read the sampled ids back.

DESIGN's GPU-grade step: inputs built on pinned host memory and copied non-blocking, no
data-dependent Python branches on device values, one host-device synchronisation per step.
Counted on the CPU with `sync_counter.SyncCounter` around ``LLM.step()`` (scheduler, model
runner, mask filler, sampler, postprocessor) of steady-state decode steps: several sequences,
greedy and sampled rows with top-k / top-p / min-p, seeded, with logprobs, with and without
a grammar bitmask. The engine's sampler is the general path (``sync_free=True``, what a GPU
runs); the CPU fast path's extra reads are free on the CPU and checked to stay in its ``_cpu``
functions. Where CUDA exists, ``torch.cuda.set_sync_debug_mode`` counts the real
synchronisations of a step.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pytest
import torch
from sync_counter import SyncCounter

from formcast.engine.llm_engine import LLM
from formcast.grammar import compile_regex
from formcast.samplers import Sampler, SamplingBatch, SamplingParams, make_generator
from formcast.samplers.batch import pack_host_arrays, to_device, unpack_arrays

PARAMS = [
    SamplingParams(temperature=0),
    SamplingParams(temperature=0.8, top_k=20),
    SamplingParams(temperature=1.0, top_p=0.9, seed=3),
    SamplingParams(temperature=0.7, min_p=0.1, logprobs=3),
    SamplingParams(temperature=1.0, top_k=5, top_p=0.8, min_p=0.05, seed=11),
    SamplingParams(temperature=0.9, top_p=0.95, logprobs=2, logprobs_mode="processed"),
]
NUM_MEASURED_STEPS = 3


@pytest.fixture(scope="module")
def tiny_llm(tiny_folders):
    return LLM(
        tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=64, max_model_len=256, device="cpu"
    )


def _run_decode_steps(llm: LLM, grammar, sampler: Sampler) -> list[SyncCounter]:
    """Counters of ``NUM_MEASURED_STEPS`` decode steps of a fresh mixed batch."""
    llm.sampler = sampler
    for i, params in enumerate(PARAMS):
        params = dataclasses.replace(params, max_tokens=12, ignore_eos=True)
        llm.add_request(f"a short prompt number {i}", params, grammar=grammar, jump_forward=False)
    llm.step()  # the prompts' prefill; every later step decodes one token per sequence
    counters = []
    for _ in range(NUM_MEASURED_STEPS):
        with SyncCounter() as counter:
            deltas = llm.step()
        assert len(deltas) == len(PARAMS)
        assert all(len(d.token_ids) == 1 and d.finish_reason is None for d in deltas)
        counters.append(counter)
    for request_id in list(llm.requests):
        llm.abort(request_id)
    return counters


@pytest.fixture(scope="module")
def general_path_counters(tiny_llm):
    """``kind -> counters`` of the general path's decode steps, measured once per kind."""
    measured: dict[str, list[SyncCounter]] = {}

    def counters(kind: str) -> list[SyncCounter]:
        if kind not in measured:
            grammar = None
            if kind == "grammar":
                grammar = compile_regex(r"[a-z ]{1,300}", tiny_llm.structured_output.vocab)
            measured[kind] = _run_decode_steps(tiny_llm, grammar, Sampler(sync_free=True))
        return measured[kind]

    return counters


@pytest.mark.parametrize("kind", ["plain", "grammar"])
def test_a_decode_step_reads_the_device_once(general_path_counters, kind):
    for counter in general_path_counters(kind):
        assert len(counter.reads) <= 1, "\n".join(counter.reads)
        # the one read is the sampler's copy of the ids, logprobs and error flags
        (read,) = counter.reads
        assert read.startswith("Tensor.numpy at samplers/sampler.py:")
        assert read.endswith(" _read_back")


@pytest.mark.parametrize(
    "kind",
    ["plain", "grammar"],
)
def test_a_decode_step_copies_to_the_device_without_blocking(general_path_counters, kind):
    for counter in general_path_counters(kind):
        assert counter.blocking_copies == [], "\n".join(counter.blocking_copies)


def test_the_cpu_fast_path_reads_only_inside_its_cpu_functions(tiny_llm):
    for counter in _run_decode_steps(tiny_llm, None, Sampler(sync_free=False)):
        assert len(counter.reads) == 1, "\n".join(counter.reads)
        assert counter.cpu_only_reads  # the adaptive candidates did read: the check can fail


def test_a_sampler_call_with_every_stage_reads_the_device_once():
    """Penalties, bias, bans, bitmask, typical, seeded and raw + processed logprobs rows."""
    vocab_size = 3000
    torch.manual_seed(0)
    params = [
        SamplingParams(temperature=0, repetition_penalty=1.3),
        SamplingParams(top_k=50, frequency_penalty=0.5, presence_penalty=0.2, seed=1),
        SamplingParams(top_p=0.9, logit_bias={7: 5.0, 9: -1.0}, min_tokens=4),
        SamplingParams(typical_p=0.6, min_p=0.02, seed=2, logprobs=4),
        SamplingParams(temperature=0.5, logprobs=1, logprobs_mode="processed"),
    ]
    batch = SamplingBatch.build(
        params,
        [[1, 2, 3]] * len(params),
        [[4, 5], [6], [], [8, 8], [9]],
        vocab_size,
        [0],
        [make_generator(p) for p in params],
    )
    logits = torch.randn(len(params), vocab_size) * 3
    bitmask = torch.full((len(params), (vocab_size + 31) // 32), -1, dtype=torch.int32)
    bitmask[1, 10:] = 0
    with SyncCounter() as counter:
        out = Sampler(sync_free=True)(logits, batch, bitmask)
    assert len(counter.reads) == 1, "\n".join(counter.reads)
    assert counter.blocking_copies == []
    assert out.host is not None
    assert out.host.token_ids.tolist() == out.token_ids.tolist()
    np.testing.assert_array_equal(out.host.logprobs, out.logprobs.numpy())
    np.testing.assert_array_equal(out.host.top_logprob_ids, out.top_logprob_ids.numpy())
    np.testing.assert_array_equal(out.host.top_logprobs, out.top_logprobs.numpy())


def test_packed_transfer_round_trips_every_dtype_and_shape():
    arrays = [
        np.arange(5, dtype=np.int64),
        np.array([[1.5, -2.0], [3.0, np.inf]], dtype=np.float32),
        np.array([True, False, True]),
        np.zeros((0, 3), dtype=np.int32),
        np.arange(7, dtype=np.int32).reshape(7, 1),
        np.array([255, 0, 7], dtype=np.uint8),
        np.array([1e300, -0.0], dtype=np.float64),
        np.array([1, 2, 3], dtype=np.uint8),  # ends off the 8-byte grid
        np.zeros(0, dtype=np.int64),  # an empty last array
    ]
    buffer, layout = pack_host_arrays(arrays)
    assert buffer.dtype == torch.uint8 and buffer.dim() == 1
    assert all(offset % 8 == 0 for offset, _, _ in layout)
    for original, tensor in zip(arrays, unpack_arrays(buffer, layout), strict=True):
        assert tuple(tensor.shape) == original.shape
        np.testing.assert_array_equal(tensor.numpy(), original)
        assert tensor.numpy().dtype == original.dtype
    # on the CPU nothing is copied: the tensors share the arrays' memory
    on_cpu = to_device(arrays, "cpu")
    assert on_cpu[0].data_ptr() == arrays[0].__array_interface__["data"][0]


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _count_sync_warnings(fn) -> tuple[object, list[str]]:
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return result, [str(w.message) for w in caught if "synchroniz" in str(w.message)]


@needs_cuda
def test_to_device_does_not_synchronise_on_cuda():
    arrays = [np.arange(1000, dtype=np.int64), np.ones((4, 5), dtype=np.float32)]
    tensors, syncs = _count_sync_warnings(lambda: to_device(arrays, "cuda"))
    assert syncs == []
    assert all(t.is_cuda for t in tensors)
    np.testing.assert_array_equal(tensors[1].cpu().numpy(), arrays[1])


@needs_cuda
@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1",
    reason="the Triton interpreter copies CUDA tensors to the host around every kernel",
)
def test_a_cuda_decode_step_synchronises_at_most_once(tiny_folders):
    llm = LLM(tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=64, max_model_len=256)
    for i, params in enumerate(PARAMS):
        params = dataclasses.replace(params, max_tokens=8, ignore_eos=True)
        llm.add_request(f"a short prompt number {i}", params, jump_forward=False)
    llm.step()
    for _ in range(NUM_MEASURED_STEPS):
        deltas, syncs = _count_sync_warnings(llm.step)
        assert len(deltas) == len(PARAMS)
        assert len(syncs) <= 1, "\n".join(syncs)
