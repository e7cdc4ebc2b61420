"""Beam search bookkeeping: parameter validation, and the reference loop vs transformers.

The oracle is transformers' own ``generate(num_beams=...)`` on a tiny random Llama with a
64-token vocabulary (peaked distributions, so EOS is hit and the early-stopping modes differ).
"""

from __future__ import annotations

import pytest
import torch

from formcast.decoding.beam_search import (
    BeamSearchParams,
    BeamSearchState,
    beam_log_probs,
    beam_search_reference,
)
from formcast.errors import DeadEndError, SamplingParamsError

EOS = 2


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_beams", 0),
        ("num_beams", 2.0),
        ("length_penalty", float("nan")),
        ("length_penalty", float("inf")),
        ("length_penalty", True),
        ("early_stopping", "sometimes"),
        ("early_stopping", 1),
        ("num_return_sequences", 5),
        ("num_return_sequences", 0),
        ("max_tokens", 0),
        ("stop_token_ids", (-1,)),
        ("ignore_eos", "yes"),
        ("renormalize_logprobs", 1),
    ],
)
def test_invalid_params_name_the_field(field, value):
    with pytest.raises(SamplingParamsError, match=f"BeamSearchParams.{field}="):
        BeamSearchParams(**{"num_beams": 4, field: value})


def test_finishing_token_ids():
    assert BeamSearchParams(stop_token_ids=[7]).finishing_token_ids([2]) == {2, 7}
    assert BeamSearchParams(ignore_eos=True).finishing_token_ids([2]) == frozenset()


def test_masked_log_probs_keep_model_probabilities_unless_renormalized():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    bitmask = torch.tensor([[0b0110]], dtype=torch.int32)  # tokens 1 and 2 allowed
    model = beam_log_probs(logits, bitmask)
    expected = torch.log_softmax(logits, dim=-1)
    assert torch.equal(model[0, 1:3], expected[0, 1:3])
    assert model[0, 0] == -torch.inf and model[0, 3] == -torch.inf
    renormalized = beam_log_probs(logits, bitmask, renormalize=True)
    assert torch.allclose(renormalized[0, 1:3].exp().sum(), torch.tensor(1.0))
    with pytest.raises(DeadEndError, match="rows \\[0\\]"):
        beam_log_probs(logits, torch.zeros((1, 1), dtype=torch.int32))


def test_pool_and_stopping_rules_by_hand():
    # one beam, vocabulary of 4: token 2 is EOS
    params = BeamSearchParams(num_beams=2, early_stopping=True, max_tokens=5)
    state = BeamSearchState(params, max_tokens=5)
    log_probs = torch.log(torch.tensor([[0.06, 0.04, 0.5, 0.4]]))
    candidates = state.top_candidates(log_probs)
    assert candidates.token_ids == [2, 3, 0, 1]  # K = 2 * num_beams
    result = state.advance(candidates, lambda r: candidates.token_ids[r] == EOS, lambda r, s: r)
    # EOS ranked first finishes; the next two continue
    assert result.finished_ranks == [0] and result.running_ranks == [1, 2]
    assert state.hypotheses[0].score == pytest.approx(float(torch.log(torch.tensor(0.5))))
    assert not state.is_done
    log_probs = torch.log(torch.tensor([[0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]]))
    candidates = state.top_candidates(log_probs)
    state.advance(candidates, lambda r: candidates.token_ids[r] == EOS, lambda r, s: r)
    # the pool is full and early_stopping=True: done, although beams still run
    assert len(state.hypotheses) == 2 and state.is_done


class _TinyLM:
    """A tiny random Llama (EOS boosted): transformers' generate and a batched logits function."""

    def __init__(self, seed: int) -> None:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            initializer_range=0.5,
            eos_token_id=EOS,
            bos_token_id=1,
            pad_token_id=EOS,
        )
        self.model = LlamaForCausalLM(config).eval()
        with torch.no_grad():  # make EOS likely, so hypotheses finish at different lengths
            self.model.lm_head.weight[EOS] *= 4.0

    @torch.no_grad()
    def logits(self, token_lists):
        return self.model(torch.tensor(token_lists)).logits[:, -1].float()  # (B, V)

    @torch.no_grad()
    def generate(self, prompt, params: BeamSearchParams):
        out = self.model.generate(
            torch.tensor([prompt]),
            num_beams=params.num_beams,
            do_sample=False,
            early_stopping=params.early_stopping,
            length_penalty=params.length_penalty,
            num_return_sequences=params.num_return_sequences,
            max_new_tokens=params.max_tokens,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=EOS,
            eos_token_id=EOS,
        )
        lengths = (out.beam_indices >= 0).sum(dim=1).tolist()
        return [
            (
                out.sequences[i, len(prompt) : len(prompt) + n].tolist(),
                float(out.sequences_scores[i]),
            )
            for i, n in enumerate(lengths)
        ]


@pytest.fixture(scope="module")
def tiny_lm():
    return _TinyLM(seed=0)


def test_reference_equals_transformers(tiny_lm):
    num_differing = 0
    for prompt in ([51, 37, 7, 11],):
        for num_beams in (2, 5):
            for length_penalty in (1.0, -1.0, 2.0):
                per_mode = [
                    _compare(tiny_lm, prompt, num_beams, length_penalty, mode)
                    for mode in (True, False, "never")
                ]
                num_differing += per_mode[0] != per_mode[1] or per_mode[1] != per_mode[2]
    # the early-stopping modes really differ on these inputs (else the test proves little)
    assert num_differing > 0


def _compare(tiny_lm, prompt, num_beams, length_penalty, early_stopping):
    params = BeamSearchParams(
        num_beams=num_beams,
        early_stopping=early_stopping,
        length_penalty=length_penalty,
        num_return_sequences=2,
        max_tokens=7,
    )
    ours = beam_search_reference(tiny_lm.logits, prompt, params, eos_token_ids=[EOS])
    theirs = tiny_lm.generate(prompt, params)
    assert [h.payload[0] for h in ours] == [ids for ids, _ in theirs], params
    for hypothesis, (ids, score) in zip(ours, theirs, strict=True):
        # recomputed vs cached attention: ~1e-6 per token, times length ** -penalty
        assert hypothesis.score == pytest.approx(score, abs=1e-4)
        assert hypothesis.num_tokens == len(ids)
        expected = hypothesis.cumulative_logprob / len(ids) ** length_penalty
        assert hypothesis.score == pytest.approx(expected, rel=1e-6)
    return [(h.payload[0], round(h.score, 4)) for h in ours]
