"""``formcast.choice(..., method="score")`` on the real SmolLM2: every option's log-probability
equals transformers' own forward pass over the prompt and the option, the call returns the
argmax, options are tokenized as the tokenizer writes them after the prompt, and bad input is
refused with typed errors."""

from __future__ import annotations

import enum
import math
from typing import Literal

import pytest
import torch

import formcast
from formcast.errors import RequestError, UsageError

TOLERANCE = 2e-3  # float32 engine vs float32 transformers, summed over a few tokens

PROMPTS = [
    "Is this review positive or negative?\nReview: It broke after two days.",
    [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "What colour is the sky on a clear day?"},
    ],
]
OPTIONS = ["positive", "negative", "not sure at all", "blue"]


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"
    GREEN = "green"


@pytest.fixture(scope="module")
def plain(model):
    """The same engine, prompts sent as plain text (no chat template)."""
    return formcast.Model(model.llm, chat=False)


def reference_scores(hf, prompt_ids, option_ids, eos_token_ids):
    """Per option: token log-probs and the stop log-prob, one full forward pass per option."""
    results = []
    for ids in option_ids:
        sequence = list(prompt_ids) + list(ids)
        with torch.no_grad():
            logprobs = hf(torch.tensor([sequence])).logits[0].float().log_softmax(-1)
        start = len(prompt_ids) - 1
        tokens = [logprobs[start + i, t].item() for i, t in enumerate(ids)]
        stop = torch.logsumexp(logprobs[len(sequence) - 1, list(eos_token_ids)], 0).item()
        results.append((tokens, stop))
    return results


def prompt_ids_of(model, prompt):
    return model.llm.encode_prompt(model.engine_prompt(prompt))[1]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["text", "chat"])
def test_scores_equal_a_transformers_forward_per_option(model, smol_hf, prompt):
    choose = formcast.choice(model, OPTIONS, method="score")
    scores = choose.scores(prompt)
    prompt_ids = prompt_ids_of(model, prompt)
    expected = reference_scores(
        smol_hf, prompt_ids, [s.token_ids for s in scores], model.llm.eos_token_ids
    )
    for score, option, (tokens, stop) in zip(scores, OPTIONS, expected, strict=True):
        assert score.option == option and score.text == option
        assert score.token_logprobs == pytest.approx(tokens, abs=TOLERANCE)
        assert score.stop_logprob == pytest.approx(stop, abs=TOLERANCE)
        assert score.logprob == pytest.approx(math.fsum(tokens) + stop, abs=TOLERANCE)
    assert len(scores[2].token_ids) > 1  # a multi-token option is scored token by token
    best = max(range(len(OPTIONS)), key=lambda i: math.fsum(expected[i][0]) + expected[i][1])
    assert choose(prompt) == OPTIONS[best]


def test_option_tokens_are_those_of_prompt_plus_option(model, smol_tokenizer):
    # a chat prompt ends with "<|im_start|>assistant\n": the option does not merge backwards,
    # so its tokens are exactly the tail of the tokenized concatenation
    prompt = PROMPTS[0]
    text = model.llm.encode_prompt(model.engine_prompt(prompt))[0]
    prompt_ids = smol_tokenizer.encode(text, add_special_tokens=False)
    for score in formcast.choice(model, OPTIONS, method="score").scores(prompt):
        whole = smol_tokenizer.encode(text + score.text, add_special_tokens=False)
        assert whole == prompt_ids + list(score.token_ids)


def test_an_option_that_would_merge_into_the_prompt_keeps_the_prompt_tokens(plain):
    # "Answer: " ends with a lone space token; "Answer: yes" tokenizes as "Answer", ":",
    # " yes". Generation continues after the prompt's own tokens, so the option is written
    # after the space token: "yes", not " yes" (the prompt is never re-tokenized)
    tokenizer = plain.tokenizer
    prompt_ids = prompt_ids_of(plain, "Answer: ")
    assert tokenizer.encode("Answer: yes")[: len(prompt_ids)] != prompt_ids
    choose = formcast.choice(plain, ["yes", " yes"], method="score")
    yes, spaced = choose.option_token_ids(prompt_ids)
    assert tokenizer.decode(yes) == "yes" and yes == tokenizer.encode("yes")
    assert tokenizer.decode(spaced) == " yes" and spaced == tokenizer.encode(" yes")
    # after "Answer:" the spaced option is the single token " yes", as in the concatenation
    prompt_ids = prompt_ids_of(plain, "Answer:")
    assert tokenizer.encode("Answer: yes") == prompt_ids + choose.option_token_ids(prompt_ids)[1]


def test_include_stop_false_scores_the_tokens_only(model):
    options = ["positive", "positive review", "negative"]
    with_stop = formcast.choice(model, options, method="score").scores(PROMPTS[0])
    without = formcast.choice(model, options, method="score", include_stop=False)
    without_stop = without.scores(PROMPTS[0])
    for a, b in zip(with_stop, without_stop, strict=True):
        assert b.logprob == pytest.approx(math.fsum(b.token_logprobs), abs=1e-6)
        assert a.logprob == pytest.approx(b.logprob + b.stop_logprob, abs=1e-3)
    # without the stop term an option is scored as the start of a longer answer: never below
    # an option that continues it
    prefix, longer = without_stop[0], without_stop[1]
    assert longer.token_ids[: len(prefix.token_ids)] == prefix.token_ids
    assert prefix.logprob >= longer.logprob


def test_enum_and_literal_options(model):
    prompt = "What colour is a ripe tomato?"
    colour = formcast.choice(model, Colour, method="score")
    scores = colour.scores(prompt)
    assert [s.option for s in scores] == list(Colour)
    assert [s.text for s in scores] == ["red", "blue", "green"]
    assert colour(prompt) is max(scores, key=lambda s: s.logprob).option
    number = formcast.choice(model, Literal[1, 2, 3, True], method="score")
    value = number("Pick a number from 1 to 3.")
    assert value in (1, 2, 3, True) and type(value) in (int, bool)
    assert [s.text for s in number.scores("Pick one.")] == ["1", "2", "3", "true"]


def test_batch_equals_one_call_per_prompt(model):
    prompts = [
        "Is this review positive or negative?\nReview: Great value, would buy again.",
        *PROMPTS,
        "Reply yes or no: is water wet?",
    ]
    choose = formcast.choice(model, OPTIONS, method="score")
    together = choose.batch_scores(prompts)
    for prompt, scores in zip(prompts, together, strict=True):
        alone = choose.scores(prompt)
        assert [s.logprob for s in scores] == pytest.approx([s.logprob for s in alone], abs=1e-3)
    best = [max(scores, key=lambda s: s.logprob).option for scores in together]
    assert choose.batch(prompts) == best


def test_sampling_mode_offers_the_same_scores(model):
    sampled = formcast.choice(model, OPTIONS, temperature=0)
    scored = formcast.choice(model, OPTIONS, method="score")
    assert [s.logprob for s in sampled.scores(PROMPTS[1])] == pytest.approx(
        [s.logprob for s in scored.scores(PROMPTS[1])], abs=1e-4
    )
    assert sampled(PROMPTS[1]) in OPTIONS


def test_complete_and_stream_in_score_mode(model):
    choose = formcast.choice(model, Colour, method="score")
    prompt = "What colour is grass?"
    best = max(choose.scores(prompt), key=lambda s: s.logprob)
    completion = choose.complete(prompt)
    assert completion.value is best.option and completion.text == best.text
    assert completion.token_ids == list(best.token_ids) and completion.finish_reason == "stop"
    assert list(choose.stream(prompt)) == [best.text]
    assert "method='score'" in repr(choose)


def test_bad_input_is_refused(model):
    with pytest.raises(UsageError, match="method='best' is not one of"):
        formcast.choice(model, OPTIONS, method="best")
    with pytest.raises(UsageError, match="include_stop must be a bool"):
        formcast.choice(model, OPTIONS, method="score", include_stop="yes")
    with pytest.raises(UsageError, match=r"sampling options \['temperature'\] do not apply"):
        formcast.choice(model, OPTIONS, method="score", temperature=0)
    choose = formcast.choice(model, OPTIONS, method="score")
    with pytest.raises(UsageError, match=r"sampling options \['seed'\] do not apply"):
        choose("Pick one.", seed=1)
    with pytest.raises(UsageError, match="batch_scores expects a list of prompts"):
        choose.batch_scores("Pick one.")
    with pytest.raises(UsageError, match="empty string"):
        choose.scores("")
    with pytest.raises(UsageError, match="both written"):
        formcast.choice(model, ["a", "a"], method="score")
    with pytest.raises(RequestError, match="exceed max_model_len"):
        choose.scores(list(range(10, 10 + model.llm.config.max_model_len - 1)))
    assert not model.llm.requests and not model.llm.has_unfinished_requests()
