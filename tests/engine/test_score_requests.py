"""Score requests (``LLM.add_score_request``) on the tiny random Llama, against transformers'
own forward pass over each full sequence: exact values, one prompt computation shared by the
continuations, and the engine's other paths (chunked prefill, preemption, prefix cache,
grammar and sampled requests in the same steps, speculative decoding, aborts, bad input)."""

from __future__ import annotations

import math

import pytest
import torch

from formcast.decoding.speculative import SpeculativeConfig
from formcast.engine.llm_engine import LLM
from formcast.errors import RequestError, RequestLimitError
from formcast.samplers import SamplingParams

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def llm(tiny_folders):
    return LLM(tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=64, max_model_len=256)


@pytest.fixture(scope="module")
def hf_tiny(tiny_folders):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_folders["llama"], dtype=torch.float32).eval()


def reference(hf, prompt_ids, continuation, eos_token_ids):
    """Token log-probs and stop log-prob of ``continuation`` from one plain forward pass."""
    ids = list(prompt_ids) + list(continuation)
    with torch.no_grad():
        logprobs = hf(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    start = len(prompt_ids) - 1
    tokens = [logprobs[start + i, t].item() for i, t in enumerate(continuation)]
    stop = torch.logsumexp(logprobs[len(ids) - 1, list(eos_token_ids)], 0).item()
    return tokens, stop


def run(llm, request_ids):
    while llm.has_unfinished_requests():
        llm.step()
    return [llm.take_output(r) for r in request_ids]


def check_against_reference(hf, llm, prompt_ids, continuations, output):
    assert len(output.outputs) == len(continuations)
    for k, (completion, continuation) in enumerate(zip(output.outputs, continuations, strict=True)):
        tokens, stop = reference(hf, prompt_ids, continuation, llm.eos_token_ids)
        got = [entry[t] for entry, t in zip(completion.logprobs, continuation, strict=True)]
        assert completion.index == k
        assert completion.token_ids == list(continuation)
        assert completion.finish_reason == "stop"
        assert got == pytest.approx(tokens, abs=TOLERANCE)
        assert completion.cumulative_logprob == pytest.approx(math.fsum(tokens), abs=TOLERANCE)
        assert completion.stop_logprob == pytest.approx(stop, abs=TOLERANCE)


def pool_is_full(llm):
    return (
        llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
        and not llm.has_unfinished_requests()
    )


def random_ids(generator, length):
    return torch.randint(3, 49152, (length,), generator=generator).tolist()


def test_scores_equal_a_plain_forward_over_each_sequence(llm, hf_tiny):
    generator = torch.Generator().manual_seed(0)
    cases = [
        (random_ids(generator, 5), [random_ids(generator, n) for n in (1, 3, 7)]),
        (random_ids(generator, 16), [random_ids(generator, n) for n in (2, 2)]),  # block edge
        (random_ids(generator, 37), [random_ids(generator, n) for n in (1, 20, 4, 9)]),
    ]
    request_ids = [llm.add_score_request(p, c) for p, c in cases]
    outputs = run(llm, request_ids)
    for (prompt_ids, continuations), output in zip(cases, outputs, strict=True):
        assert output.prompt_token_ids == prompt_ids
        check_against_reference(hf_tiny, llm, prompt_ids, continuations, output)
    assert pool_is_full(llm)


def test_text_prompt_and_text_of_each_continuation(llm, hf_tiny):
    tokenizer = llm.tokenizer
    continuations = [tokenizer.encode(t, add_special_tokens=False) for t in (" yes", " no way")]
    (output,) = run(llm, [llm.add_score_request("Is it raining?", continuations)])
    assert [c.text for c in output.outputs] == [" yes", " no way"]
    prompt_ids = tokenizer.encode("Is it raining?")
    check_against_reference(hf_tiny, llm, prompt_ids, continuations, output)


def test_the_prompt_is_computed_once_for_all_continuations(llm, monkeypatch):
    computed: list[int] = []
    execute = llm.runner.execute

    def counting_execute(scheduled, *args, **kwargs):
        computed.append(sum(item.num_new_tokens for item in scheduled))
        return execute(scheduled, *args, **kwargs)

    monkeypatch.setattr(llm.runner, "execute", counting_execute)
    prompt_ids = list(range(100, 140))
    continuations = [[7, 8, 9], [10], [11, 12], [13, 14, 15, 16]]
    (output,) = run(llm, [llm.add_score_request(prompt_ids, continuations)])
    assert sum(computed) == len(prompt_ids) + sum(map(len, continuations))
    assert len(computed) == 2  # the prompt, then every continuation in one step
    assert output.metrics["num_forward_passes"] == 2


def test_prefix_cache_hits_leave_the_scores_unchanged(llm):
    prompt_ids = list(range(200, 250))
    continuations = [[5, 6], [7]]
    (first,) = run(llm, [llm.add_score_request(prompt_ids, continuations)])
    (second,) = run(llm, [llm.add_score_request(prompt_ids, continuations)])
    assert second.num_cached_prompt_tokens > 0  # full prompt blocks came from the cache
    for a, b in zip(first.outputs, second.outputs, strict=True):
        assert b.cumulative_logprob == pytest.approx(a.cumulative_logprob, abs=TOLERANCE)
        assert b.stop_logprob == pytest.approx(a.stop_logprob, abs=TOLERANCE)


@pytest.mark.parametrize(
    ("max_num_batched_tokens", "num_kv_blocks"),
    [
        (24, 64),  # prompts and continuation spans longer than a step's budget: chunks
        (256, 12),  # every continuation at once does not fit: preemption, recomputation
    ],
)
def test_chunked_prefill_and_preemption(
    tiny_folders, hf_tiny, max_num_batched_tokens, num_kv_blocks
):
    small = LLM(
        tiny_folders["llama"],
        max_num_seqs=8,
        num_kv_blocks=num_kv_blocks,
        max_model_len=256,
        max_num_batched_tokens=max_num_batched_tokens,
        watermark=0.0,
    )
    generator = torch.Generator().manual_seed(1)
    cases = [
        (random_ids(generator, 20), [random_ids(generator, 40) for _ in range(3)]),
        (random_ids(generator, 21), [random_ids(generator, n) for n in (40, 1, 39)]),
        (random_ids(generator, 50), [random_ids(generator, 3)]),
    ]
    outputs = run(small, [small.add_score_request(p, c) for p, c in cases])
    if num_kv_blocks < 64:
        assert small.scheduler.num_preemptions > 0
    for (prompt_ids, continuations), output in zip(cases, outputs, strict=True):
        check_against_reference(hf_tiny, small, prompt_ids, continuations, output)
    assert pool_is_full(small)


def test_score_requests_share_steps_with_grammar_and_sampled_requests(llm, hf_tiny):
    params = SamplingParams(temperature=0, max_tokens=12)
    grammar = {"regex": "[a-z]{2,8}( [a-z]{2,8}){0,2}"}
    alone = llm.generate(["Pick some words:", "Count:"], params, grammar=[grammar, None])
    prompt_ids = list(range(300, 321))
    continuations = [[1000, 1001], [1002], [1003, 1004, 1005]]
    request_ids = [
        llm.add_request("Pick some words:", params, grammar=grammar),
        llm.add_score_request(prompt_ids, continuations),
        llm.add_request("Count:", params),
    ]
    together = run(llm, request_ids)
    assert [together[0].token_ids, together[2].token_ids] == [o.token_ids for o in alone]
    check_against_reference(hf_tiny, llm, prompt_ids, continuations, together[1])
    assert pool_is_full(llm)


def test_speculative_engine_never_drafts_into_a_score_request(tiny_folders, hf_tiny):
    speculative = LLM(
        tiny_folders["llama"],
        max_num_seqs=8,
        num_kv_blocks=64,
        max_model_len=256,
        speculative=SpeculativeConfig(method="ngram", num_draft_tokens=4),
    )
    # the continuations repeat the prompt's n-grams: an n-gram proposer would draft them
    prompt_ids = [500, 501, 502, 503] * 6
    continuations = [[500, 501, 502], [500, 501, 502, 503, 500]]
    (output,) = run(speculative, [speculative.add_score_request(prompt_ids, continuations)])
    check_against_reference(hf_tiny, speculative, prompt_ids, continuations, output)
    assert pool_is_full(speculative)


def test_abort_returns_the_blocks(llm):
    request_id = llm.add_score_request(list(range(10, 60)), [[1, 2], [3]])
    llm.step()  # the prompt is computed and the continuations forked
    llm.abort(request_id)
    output = llm.take_output(request_id)
    assert output.finished and {c.finish_reason for c in output.outputs} == {"abort"}
    assert pool_is_full(llm)


@pytest.mark.parametrize(
    ("continuations", "message"),
    [
        ([], "no continuations"),
        ([[1], []], "continuation #1 is empty"),
        ([[1, 49152]], "continuation #0 holds [49152]"),
        ([[True]], "continuation #0 holds [True]"),
        (["abc"], "continuation #0 must be a list of token ids"),
        ("abc", "continuations must be a list"),
        ([[1] * 250], "exceed max_model_len=256"),
    ],
)
def test_bad_continuations_are_refused(llm, continuations, message):
    with pytest.raises(RequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        llm.add_score_request([1, 2, 3, 4, 5, 6, 7, 8], continuations)
    assert pool_is_full(llm) and not llm.requests


def test_more_continuations_than_max_num_seqs_are_refused(llm):
    with pytest.raises(
        RequestLimitError, match=r"len\(continuations\)=9 is more than max_num_seqs"
    ):
        llm.add_score_request([1, 2, 3], [[k] for k in range(4, 13)])
    with pytest.raises(RequestError, match="already in use"):
        llm.add_score_request([1, 2, 3], [[4]], request_id="dup")
        llm.add_score_request([1, 2, 3], [[4]], request_id="dup")
    run(llm, ["dup"])
    assert pool_is_full(llm)


def test_a_request_larger_than_the_cache_is_refused(tiny_folders):
    small = LLM(tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=6, max_model_len=256)
    with pytest.raises(RequestError, match="KV blocks"):
        small.add_score_request(list(range(3, 35)), [[5] * 40, [6] * 40])
