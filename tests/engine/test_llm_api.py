"""LLM API on the tiny random Llama: streaming, stops, forks, aborts, bad input, the mask hook."""

from __future__ import annotations

import pytest
import torch
from logit_recorder import LogitRecorder

from formcast.decoding.beam_search import BeamSearchParams
from formcast.engine.llm_engine import LLM
from formcast.errors import EngineConfigError, FormcastError, RequestError, RequestLimitError
from formcast.samplers import SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_folders):
    return LLM(tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=48, max_model_len=256)


@pytest.fixture(scope="module")
def hf_tiny(tiny_folders):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_folders["llama"], dtype=torch.float32).eval()


def _assert_pool_is_full(llm):
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
    assert not llm.has_unfinished_requests()


def test_stream_deltas_add_up_to_generate(llm):
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    prompts = ["Hello there", "Once upon a time", [{"role": "user", "content": "hi"}]]
    outputs = llm.generate(prompts, params)
    tokens: dict[str, list[int]] = {}
    texts: dict[str, str] = {}
    finished = {}
    for delta in llm.stream(prompts, params):
        tokens.setdefault(delta.request_id, []).extend(delta.token_ids)
        texts[delta.request_id] = texts.get(delta.request_id, "") + delta.text
        if delta.finished:
            finished[delta.request_id] = delta.finish_reason
    assert sorted(map(len, tokens.values())) == [16, 16, 16]
    streamed = [tokens[r] for r in sorted(tokens, key=int)]
    assert streamed == [out.token_ids for out in outputs]
    assert [texts[r] for r in sorted(texts, key=int)] == [out.text for out in outputs]
    assert set(finished.values()) == {"length"}
    _assert_pool_is_full(llm)


def test_stop_string_and_stop_token(llm):
    free = llm.generate(["abc"], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))[0]
    assert len(free.text) > 6
    stop = free.text[3:6]
    cut = llm.generate(["abc"], SamplingParams(temperature=0, max_tokens=20, stop=stop))[0]
    assert cut.finish_reason == "stop" and cut.outputs[0].stop_reason == stop
    assert cut.text == free.text[: free.text.index(stop)]
    stop_id = free.token_ids[4]
    by_id = llm.generate(
        ["abc"], SamplingParams(temperature=0, max_tokens=20, stop_token_ids=(stop_id,))
    )[0]
    assert by_id.token_ids == free.token_ids[: free.token_ids.index(stop_id) + 1]
    assert by_id.outputs[0].stop_reason == stop_id
    _assert_pool_is_full(llm)


def test_parallel_sampling_forks_share_the_prompt_and_match_transformers(llm, hf_tiny):
    # 21 prompt tokens: the second block is half full and shared -> copy-on-write on decode
    prompt = list(range(100, 121))
    recorder = LogitRecorder(llm)
    params = SamplingParams(temperature=1.0, n=3, seed=7, max_tokens=10, ignore_eos=True)
    out = llm.generate([prompt], params)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1  # different samples
    assert recorder.max_abs_diff([out], hf_tiny) < 1e-4  # CoW kept each sibling's KV right
    again = llm.generate([prompt], params)[0]  # seeded: reproducible
    assert [c.token_ids for c in again.outputs] == [c.token_ids for c in out.outputs]
    _assert_pool_is_full(llm)


def test_logprobs(llm):
    out = llm.generate(["x y z"], SamplingParams(temperature=0, max_tokens=3, logprobs=2))[0]
    assert len(out.logprobs) == 3
    for token_id, entry in zip(out.token_ids, out.logprobs, strict=True):
        assert token_id in entry and len(entry) >= 2
        assert entry[token_id] == max(entry.values()) <= 0.0


def test_abort_mid_flight_returns_blocks(llm):
    params = SamplingParams(temperature=0, max_tokens=50, ignore_eos=True)
    keep = llm.add_request("keep going", params)
    drop = llm.add_request("stop me", params)
    for _ in range(3):
        llm.step()
    llm.abort(drop)
    aborted = llm.take_output(drop)
    assert aborted.finish_reason == "abort" and 0 < len(aborted.token_ids) < 50
    while llm.has_unfinished_requests():
        llm.step()
    assert len(llm.take_output(keep).token_ids) == 50
    _assert_pool_is_full(llm)
    # closing a stream early aborts its requests too
    stream = llm.stream(["a", "b"], params)
    next(stream)
    stream.close()
    _assert_pool_is_full(llm)


def test_more_requests_than_slots_queue_in_order(llm):
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    prompts = [[i + 3] * (5 + i) for i in range(20)]  # 20 requests, 8 sequence slots
    outputs = llm.generate(prompts, params)
    assert [len(out.token_ids) for out in outputs] == [4] * 20
    _assert_pool_is_full(llm)


def test_bad_input_raises_clear_errors(llm, tiny_folders):
    with pytest.raises(RequestError, match="empty"):
        llm.generate([[]])
    with pytest.raises(RequestError, match="empty"):
        llm.generate([""])
    with pytest.raises(RequestError, match="max_model_len is 256"):
        llm.generate([[5] * 256])
    with pytest.raises(RequestError, match="outside"):
        llm.generate([[5, 10**6]])
    small = LLM(tiny_folders["llama"], num_kv_blocks=4, max_model_len=256)
    with pytest.raises(RequestError, match="KV blocks"):
        small.generate([[5] * 100], SamplingParams(max_tokens=50))  # 10 blocks > 4
    with pytest.raises(RequestError, match="abort: unknown"):
        llm.abort("no-such-request")
    with pytest.raises(EngineConfigError, match="unknown engine option"):
        LLM(tiny_folders["llama"], max_num_seq=4)
    with pytest.raises(EngineConfigError, match="block_size"):
        LLM(tiny_folders["llama"], block_size=0)
    with pytest.raises(FormcastError):
        LLM("/no/such/model")
    assert issubclass(RequestError, ValueError)
    _assert_pool_is_full(llm)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"block_size": 24}, "power of two"),
        ({"block_size": 8, "attention_backend": "triton"}, ">= 16 with the Triton"),
        ({"device": "cuda:1"} if not torch.cuda.is_available() else {"device": "cuda:99"}, "CUDA"),
        ({"device": "meta"}, "use 'cpu' or 'cuda"),
        ({"device": "not a device"}, "is not a device"),
        ({"jump_forward": "yes"}, "jump_forward='yes' must be None or a bool"),
    ],
)
def test_config_refuses_what_would_fail_later(options, message):
    from formcast.engine.config import EngineConfig

    with pytest.raises(EngineConfigError, match=message):
        EngineConfig(**options)


def test_config_takes_a_torch_device_and_small_blocks_on_the_torch_backend():
    from formcast.engine.config import EngineConfig

    config = EngineConfig(device=torch.device("cpu"), block_size=4, attention_backend="torch")
    assert config.device == "cpu" and config.attention_backend == "torch"


def test_jump_forward_defaults_on_unless_decode_steps_replay_cuda_graphs(llm, tiny_folders):
    # CPU: no CUDA graphs, so grammar requests jump forward unless the config says otherwise
    assert llm.config.jump_forward is None and llm.jump_forward_default is True
    off = LLM(tiny_folders["llama"], num_kv_blocks=8, max_model_len=64, jump_forward=False)
    assert off.jump_forward_default is False
    seq_id = off.add_request("hi", SamplingParams(max_tokens=2), grammar={"regex": "ab"})
    assert off.requests[seq_id].seqs[0].jump_forward is False
    off.abort(seq_id)
    if torch.cuda.is_available():  # graphs replayed on CUDA: off by default
        cuda = LLM(tiny_folders["llama"], device="cuda", num_kv_blocks=8, compile_decode=True)
        assert cuda.runner.decode_graphs.is_cuda_graph and cuda.jump_forward_default is False


def test_more_sequences_than_max_num_seqs_are_refused_when_added(llm):
    # n completions (or num_beams beams) run in the same steps: above max_num_seqs = 8 the
    # request could never be admitted, so add_request refuses it before queueing anything
    params = SamplingParams(temperature=1.0, n=9, max_tokens=2)
    with pytest.raises(RequestLimitError, match=r"^n=9 is more than max_num_seqs=8") as info:
        llm.add_request("hi", params, request_id="nine")
    error = info.value
    assert isinstance(error, FormcastError) and isinstance(error, ValueError)
    assert (error.field, error.value, error.limit_name, error.limit) == ("n", 9, "max_num_seqs", 8)
    assert "nine" not in llm.requests
    beams = BeamSearchParams(num_beams=9, max_tokens=2)
    with pytest.raises(RequestLimitError, match=r"^num_beams=9 is more than max_num_seqs=8"):
        llm.add_request("hi", beam_search=beams, request_id="nine-beams")
    assert "nine-beams" not in llm.requests
    _assert_pool_is_full(llm)
    # the limit itself is served
    out = llm.generate(["hi"], SamplingParams(temperature=1.0, n=8, max_tokens=2, seed=0))[0]
    assert [c.index for c in out.outputs] == list(range(8))
    _assert_pool_is_full(llm)


class _OnlyTokens:
    """A minimal matcher: allows a fixed token set, terminates after `limit` tokens."""

    def __init__(self, allowed: list[int], limit: int) -> None:
        self.allowed, self.limit, self.accepted = allowed, limit, []

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        bitmask[row] = 0
        for token in self.allowed:
            bitmask[row, token // 32] |= torch.tensor(1 << (token % 32), dtype=torch.int64).to(
                torch.int32
            )

    def accept_token(self, token_id: int) -> bool:
        if token_id not in self.allowed:
            return False
        self.accepted.append(token_id)
        return True

    def is_terminated(self) -> bool:
        return len(self.accepted) >= self.limit

    def fork(self) -> _OnlyTokens:
        return _OnlyTokens(self.allowed, self.limit)


def test_token_bitmask_hook_constrains_sampling(llm):
    matcher = _OnlyTokens([40, 41, 300, 1000], limit=6)
    request_id = llm.add_request("hi", SamplingParams(temperature=1.0, seed=0), matcher=matcher)
    while llm.has_unfinished_requests():
        llm.step()
    out = llm.take_output(request_id)
    assert out.token_ids == matcher.accepted and len(out.token_ids) == 6
    assert set(out.token_ids) <= {40, 41, 300, 1000}
    assert out.finish_reason == "stop"
