"""Beam search in the engine on the real SmolLM2 (float32) against transformers' generate.

Oracles: transformers' ``generate(num_beams=...)`` (token ids and ``sequences_scores``) for
unconstrained beams; the reference loop `beam_search_reference` over transformers' forward
pass for grammar-constrained beams; ``re.fullmatch`` / jsonschema for validity; the block
manager's invariants for accounting.
"""

from __future__ import annotations

import functools
import json
import re

import jsonschema
import pytest
import torch

from formcast.decoding.beam_search import BeamSearchParams, beam_search_reference
from formcast.engine.llm_engine import LLM
from formcast.errors import SamplingParamsError
from formcast.grammar.spec import GrammarSpec
from formcast.samplers import SamplingParams

MESSAGES = [
    "Is the sky blue? Answer yes or no.",
    "What is 2+2?",
    "Say hi.",
    "Name a fruit.",
    "What is the capital of France? One word.",
    "Write a haiku about the sea.",
    "Reply with OK.",
    "Count from 1 to 5.",
]
MAX_TOKENS = 8
CONFIGS = [
    (num_beams, early_stopping, length_penalty)
    for num_beams in (2, 4, 8)
    for early_stopping in (True, False, "never")
    for length_penalty in (1.0, 2.0)
]


@pytest.fixture(scope="module")
def prompts(smol_tokenizer) -> list[list[int]]:
    return [
        smol_tokenizer.encode(
            smol_tokenizer.apply_chat_template(
                [{"role": "system", "content": "Be brief."}, {"role": "user", "content": m}],
                add_generation_prompt=True,
                tokenize=False,
            )
        )
        for m in MESSAGES
    ]


@pytest.fixture(scope="module")
def llm(smol_folder) -> LLM:
    return LLM(smol_folder, num_kv_blocks=640, block_size=16, max_num_seqs=256)


def _run(llm: LLM, prompts, params: BeamSearchParams, grammar=None):
    request_ids = [llm.add_request(p, beam_search=params, grammar=grammar) for p in prompts]
    while not all(llm.requests[r].is_finished for r in request_ids):
        llm.step()
    return [llm.take_output(r) for r in request_ids]


@torch.no_grad()
def _transformers(hf, tokenizer, prompts, params: BeamSearchParams):
    """transformers' beam search over the batch (left padding): per prompt, (ids, score)."""
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = hf.generate(
        input_ids,
        attention_mask=attention_mask,
        num_beams=params.num_beams,
        do_sample=False,
        early_stopping=params.early_stopping,
        length_penalty=params.length_penalty,
        num_return_sequences=params.num_return_sequences,
        max_new_tokens=params.max_tokens,
        output_scores=True,
        return_dict_in_generate=True,
    )
    lengths = (out.beam_indices >= 0).sum(dim=1).tolist()
    rows = [
        (out.sequences[i, width : width + n].tolist(), float(out.sequences_scores[i]))
        for i, n in enumerate(lengths)
    ]
    k = params.num_return_sequences
    return [rows[i * k : (i + 1) * k] for i in range(len(prompts))]


@functools.cache
def _params(num_beams, early_stopping, length_penalty) -> BeamSearchParams:
    return BeamSearchParams(
        num_beams=num_beams,
        early_stopping=early_stopping,
        length_penalty=length_penalty,
        num_return_sequences=min(num_beams, 3),
        max_tokens=MAX_TOKENS,
    )


_RESULTS: dict = {}


def _results(llm, hf, tokenizer, prompts, config):
    if config not in _RESULTS:
        params = _params(*config)
        _RESULTS[config] = (
            _run(llm, prompts, params),
            _transformers(hf, tokenizer, prompts, params),
        )
    return _RESULTS[config]


@pytest.mark.parametrize("config", CONFIGS, ids=[f"beams{b}-{e}-lp{p}" for b, e, p in CONFIGS])
def test_beams_equal_transformers(llm, smol_hf, smol_tokenizer, prompts, config):
    ours, theirs = _results(llm, smol_hf, smol_tokenizer, prompts, config)
    length_penalty = config[2]
    for output, expected in zip(ours, theirs, strict=True):
        assert [c.token_ids for c in output.outputs] == [ids for ids, _ in expected]
        for completion, (ids, score) in zip(output.outputs, expected, strict=True):
            assert completion.beam_score == pytest.approx(score, abs=1e-4)
            normalised = completion.cumulative_logprob / len(ids) ** length_penalty
            assert completion.beam_score == pytest.approx(normalised, rel=1e-5)
            ends_with_eos = ids[-1] in llm.eos_token_ids
            assert completion.finish_reason == ("stop" if ends_with_eos else "length")
    bm = llm.block_manager
    bm.check_invariants([])
    assert bm.num_free_blocks == bm.num_blocks


def test_inputs_exercise_eos_and_the_early_stopping_modes(llm, smol_hf, smol_tokenizer, prompts):
    # some hypotheses end with EOS before max_tokens, and the three modes differ somewhere
    num_short = 0
    num_differing = 0
    for num_beams in (2, 4, 8):
        for length_penalty in (1.0, 2.0):
            per_mode = []
            for mode in (True, False, "never"):
                ours, _ = _results(
                    llm, smol_hf, smol_tokenizer, prompts, (num_beams, mode, length_penalty)
                )
                num_short += sum(len(c.token_ids) < MAX_TOKENS for out in ours for c in out.outputs)
                per_mode.append([[c.token_ids for c in out.outputs] for out in ours])
            num_differing += per_mode[0] != per_mode[1] or per_mode[1] != per_mode[2]
    assert num_short > 0
    assert num_differing > 0


def test_permissive_grammar_equals_unconstrained(llm, smol_hf, smol_tokenizer, prompts):
    config = (4, False, 1.0)
    ours, _ = _results(llm, smol_hf, smol_tokenizer, prompts, config)
    constrained = _run(llm, prompts, _params(*config), grammar={"regex": "(.|\n)*"})
    for plain, masked in zip(ours, constrained, strict=True):
        assert [c.token_ids for c in masked.outputs] == [c.token_ids for c in plain.outputs]
        for a, b in zip(plain.outputs, masked.outputs, strict=True):
            # prefix-cache hits change the float summation order: ~1e-6 differences
            assert b.beam_score == pytest.approx(a.beam_score, abs=1e-5)


def _hf_batch_logits(hf):
    @torch.no_grad()
    def logits_fn(token_lists):
        return hf(torch.tensor(token_lists)).logits[:, -1].float()  # (B, V)

    return logits_fn


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["answer"],
    "additionalProperties": False,
}
REGEX = r"(yes|no|maybe)\.?"


@pytest.mark.parametrize("renormalize", [False, True])
def test_constrained_beams_validate_and_equal_the_reference(llm, smol_hf, prompts, renormalize):
    params = BeamSearchParams(
        num_beams=4,
        num_return_sequences=4,
        max_tokens=16,
        early_stopping=True,
        renormalize_logprobs=renormalize,
    )
    grammars = [{"regex": REGEX}, {"json_schema": SCHEMA}]
    outputs = [_run(llm, prompts[:2], params, grammar=g) for g in grammars]
    for output in outputs[0]:
        for completion in output.outputs:
            assert re.fullmatch(REGEX, completion.text), completion.text
            assert completion.is_grammar_complete
    for output in outputs[1]:
        for completion in output.outputs:
            jsonschema.validate(json.loads(completion.text), SCHEMA)
            assert completion.is_grammar_complete
    # the same search over transformers' forward pass, one prompt per grammar
    for index, grammar in enumerate(grammars):
        compiled = llm.structured_output.compiler.submit(GrammarSpec.coerce(grammar)).result()
        expected = beam_search_reference(
            _hf_batch_logits(smol_hf),
            prompts[index],
            params,
            eos_token_ids=llm.eos_token_ids,
            grammar=compiled,
        )
        got = outputs[index][index].outputs
        assert [c.token_ids for c in got] == [h.payload[0] for h in expected]
        for completion, hypothesis in zip(got, expected, strict=True):
            assert completion.beam_score == pytest.approx(hypothesis.score, abs=1e-4)
    bm = llm.block_manager
    bm.check_invariants([])
    assert bm.num_free_blocks == bm.num_blocks


def _peak_blocks(llm: LLM, request_ids: list[str]) -> int:
    bm = llm.block_manager
    peak = 0
    while not all(llm.requests[r].is_finished for r in request_ids):
        llm.step()
        live = list(llm.scheduler.running) + list(llm.scheduler.waiting)
        bm.check_invariants(live + llm.beams.parked_seqs)
        peak = max(peak, bm.num_blocks - bm.num_free_blocks)
    return peak


def test_beams_and_parallel_samples_share_prompt_blocks(smol_folder, prompts):
    llm = LLM(smol_folder, num_kv_blocks=64, block_size=16, enable_prefix_caching=False)
    bm = llm.block_manager
    long_prompt = prompts[5] * 3  # ~3 * 40 tokens
    per_sequence = bm.blocks_for(len(long_prompt) + MAX_TOKENS)
    beam_id = llm.add_request(long_prompt, beam_search=_params(4, True, 1.0))
    assert _peak_blocks(llm, [beam_id]) < 4 * per_sequence
    assert bm.num_free_blocks == bm.num_blocks
    sample_id = llm.add_request(
        long_prompt, SamplingParams(n=4, temperature=1.0, seed=0, max_tokens=MAX_TOKENS)
    )
    assert _peak_blocks(llm, [sample_id]) < 4 * per_sequence
    assert len(llm.take_output(sample_id).outputs) == 4
    bm.check_invariants([])
    assert bm.num_free_blocks == bm.num_blocks


def test_abort_frees_every_beam_block(llm, prompts):
    bm = llm.block_manager
    request_id = llm.add_request(prompts[5], beam_search=_params(8, "never", 1.0))
    for _ in range(3):
        llm.step()
    assert bm.num_free_blocks < bm.num_blocks
    llm.abort(request_id)
    output = llm.take_output(request_id)
    assert output.finished and output.outputs[0].finish_reason == "abort"
    bm.check_invariants([])
    assert bm.num_free_blocks == bm.num_blocks
    assert not llm.beams.has_groups


def test_beams_and_sampling_share_the_engine_under_preemption(
    smol_folder, llm, smol_hf, smol_tokenizer, prompts
):
    # a cache too small for everything at once: beams get preempted, parked and recomputed
    small = LLM(smol_folder, num_kv_blocks=22, block_size=16, watermark=0.0, max_num_seqs=64)
    config = (4, False, 2.0)
    expected, _ = _results(llm, smol_hf, smol_tokenizer, prompts, config)
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    greedy_alone = [out.token_ids for out in llm.generate(prompts[:3], greedy)]
    beam_ids = [small.add_request(p, beam_search=_params(*config)) for p in prompts[:4]]
    greedy_ids = [small.add_request(p, greedy) for p in prompts[:3]]
    everything = beam_ids + greedy_ids
    while not all(small.requests[r].is_finished for r in everything):
        small.step()
    assert small.scheduler.num_preemptions > 0
    for request_id, plain in zip(beam_ids, expected, strict=False):
        got = small.take_output(request_id)
        assert [c.token_ids for c in got.outputs] == [c.token_ids for c in plain.outputs]
        for a, b in zip(plain.outputs, got.outputs, strict=True):
            assert b.beam_score == pytest.approx(a.beam_score, abs=1e-4)
    assert [small.take_output(r).token_ids for r in greedy_ids] == greedy_alone
    small.block_manager.check_invariants([])
    assert small.block_manager.num_free_blocks == small.block_manager.num_blocks


def test_stop_strings_finish_hypotheses(llm, smol_tokenizer, prompts):
    with pytest.raises(SamplingParamsError, match="stop"):
        BeamSearchParams(stop=("",))
    base = {"num_beams": 4, "num_return_sequences": 3, "max_tokens": 12}
    plain = _run(llm, prompts, BeamSearchParams(**base))
    stopped = _run(llm, prompts, BeamSearchParams(**base, stop=(".", ",")))
    num_cut = 0
    for after in stopped:
        for c in after.outputs:
            assert "." not in c.text and "," not in c.text
            full = smol_tokenizer.decode(c.token_ids)
            if c.token_ids[-1] in llm.eos_token_ids or not any(s in full for s in ".,"):
                continue
            # finished by the string: at its first occurrence, text cut right before it
            num_cut += 1
            assert c.finish_reason == "stop"
            assert not any(s in smol_tokenizer.decode(c.token_ids[:-1]) for s in ".,")
            assert c.text == full[: min(full.find(s) for s in ".," if s in full)]
    assert num_cut > 0
    # stopping early changes which hypotheses win somewhere
    assert any(
        [c.token_ids for c in a.outputs] != [c.token_ids for c in b.outputs]
        for a, b in zip(stopped, plain, strict=True)
    )
    llm.block_manager.check_invariants([])
