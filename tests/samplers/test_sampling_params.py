"""SamplingParams validation and SamplingBatch / Sampler / rejection_sample input errors."""

import math

import pytest
import torch

from formcast.errors import FormcastError, SamplingParamsError
from formcast.samplers import (
    Sampler,
    SamplerInputError,
    SamplingBatch,
    SamplingParams,
    rejection_sample,
)

BAD_VALUES = [
    ("temperature", -0.1),
    ("temperature", math.nan),
    ("temperature", math.inf),
    ("temperature", "1.0"),
    ("temperature", True),
    ("top_k", -2),
    ("top_k", 1.5),
    ("top_k", True),
    ("top_p", 0.0),
    ("top_p", 1.01),
    ("top_p", math.nan),
    ("min_p", -0.01),
    ("min_p", 1.5),
    ("typical_p", 0.0),
    ("typical_p", 2.0),
    ("repetition_penalty", 0.0),
    ("repetition_penalty", -1.0),
    ("repetition_penalty", math.inf),
    ("frequency_penalty", 2.5),
    ("frequency_penalty", math.nan),
    ("presence_penalty", -3.0),
    ("logit_bias", {-1: 1.0}),
    ("logit_bias", {"abc": 1.0}),
    ("logit_bias", {3: math.nan}),
    ("logit_bias", {3: math.inf}),
    ("logit_bias", [1, 2]),
    ("seed", -1),
    ("seed", 2**64),
    ("seed", 1.0),
    ("n", 0),
    ("n", 2.0),
    ("max_tokens", 0),
    ("max_tokens", 1.5),
    ("min_tokens", -1),
    ("stop", ["ok", ""]),
    ("stop", [3]),
    ("stop", 5),
    ("stop_token_ids", [-1]),
    ("stop_token_ids", "12"),
    ("stop_token_ids", [1.0]),
    ("ignore_eos", 1),
    ("logprobs", -1),
    ("logprobs", 2.5),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
def test_invalid_value_names_field_and_value(field, value):
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**{field: value})
    assert info.value.field == field
    message = str(info.value)
    assert f"SamplingParams.{field}=" in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, FormcastError)


def test_min_tokens_above_max_tokens_is_rejected():
    with pytest.raises(SamplingParamsError, match="min_tokens=10.*max_tokens"):
        SamplingParams(min_tokens=10, max_tokens=5)


def test_normalisation_of_accepted_inputs():
    params = SamplingParams(
        stop="END", stop_token_ids=[3, 4], logit_bias={"7": -100, 8: float("-inf")}, top_k=-1
    )
    assert params.stop == ("END",)
    assert params.stop_token_ids == (3, 4)
    assert dict(params.logit_bias) == {7: -100.0, 8: float("-inf")}
    assert not params.has_top_k
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
    assert SamplingParams(temperature=0).is_greedy
    assert not SamplingParams(temperature=0.5).is_greedy
    assert SamplingParams(max_tokens=None).max_tokens is None


def test_logit_bias_beyond_vocab_is_rejected_at_build():
    with pytest.raises(SamplingParamsError, match="logit_bias"):
        SamplingBatch.build([SamplingParams(logit_bias={50: 1.0})], [[]], [[]], 50, [])


def test_batch_and_sampler_input_errors():
    params = [SamplingParams(), SamplingParams()]
    with pytest.raises(SamplerInputError, match="output_token_ids has 1 rows"):
        SamplingBatch.build(params, [[], []], [[]], 10, [])
    batch = SamplingBatch.build(params, [[], []], [[], []], 10, [])
    sampler = Sampler()
    with pytest.raises(SamplerInputError, match="logits shape"):
        sampler(torch.zeros(3, 10), batch)
    with pytest.raises(SamplerInputError, match="token_bitmask shape"):
        sampler(torch.zeros(2, 10), batch, torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(SamplerInputError, match="int32"):
        sampler(torch.zeros(2, 10), batch, torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(SamplerInputError, match="NaN"):
        sampler(torch.full((2, 10), math.nan), batch)
    with pytest.raises(SamplerInputError, match="logprobs_mode"):
        Sampler(logprobs_mode="final")


def test_rejection_sample_input_errors():
    target = torch.full((2, 3, 5), 0.2)
    with pytest.raises(SamplerInputError, match="draft_token_ids shape"):
        rejection_sample(target, None, torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(SamplerInputError, match="draft_probs shape"):
        rejection_sample(target, torch.full((2, 2, 4), 0.25), torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(SamplerInputError, match=r"\[0, 5\)"):
        rejection_sample(target, None, torch.full((2, 2), 5))
    with pytest.raises(SamplerInputError, match="target_probs"):
        rejection_sample(target[0], None, torch.zeros(2, 2, dtype=torch.int64))
