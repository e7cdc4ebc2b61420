"""The reference loop against transformers (greedy) and against re.fullmatch (constrained)."""

from __future__ import annotations

import re

import pytest
import torch

from formcast.decoding.reference import generate_reference
from formcast.errors import RequestError
from formcast.grammar import compile_regex
from formcast.samplers import SamplingParams

PROMPTS = ["What is the capital of France?", "Name three colors.", "Count to five."]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_transformers_generate(
    smollm2_hf_model, smollm2_tokenizer, hf_logits_fn, chat_prompt_ids, prompt
):
    prompt_ids = chat_prompt_ids(prompt)
    params = SamplingParams(temperature=0.0, max_tokens=12)
    ours = generate_reference(hf_logits_fn, prompt_ids, params, vocab_size=49152, eos_token_ids={2})
    with torch.no_grad():
        theirs = smollm2_hf_model.generate(
            torch.tensor([prompt_ids]), max_new_tokens=12, do_sample=False, pad_token_id=2
        )[0, len(prompt_ids) :].tolist()
    assert ours.token_ids == theirs
    assert ours.num_model_calls == len(ours.token_ids)


PATTERNS = [
    r'\{"name": "[A-Z][a-z]{1,12}", "age": [1-9][0-9]?\}',
    r"(yes|no|maybe)",
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"The answer is (Paris|London|Berlin)\.",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("jump_forward", [False, True])
def test_constrained_output_fullmatches(
    smollm2_vocab, smollm2_tokenizer, hf_logits_fn, chat_prompt_ids, pattern, jump_forward
):
    grammar = compile_regex(pattern, smollm2_vocab)
    prompt_ids = chat_prompt_ids("Answer in the required format.")
    encode = lambda text: smollm2_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    for params in (
        SamplingParams(temperature=0.0, max_tokens=40),
        SamplingParams(temperature=1.0, seed=7, max_tokens=40),
    ):
        out = generate_reference(
            hf_logits_fn,
            prompt_ids,
            params,
            vocab_size=49152,
            eos_token_ids={2},
            grammar=grammar,
            jump_forward=jump_forward,
            encode=encode,
        )
        assert out.finish_reason == "stop"
        text_ids = [t for t in out.token_ids if t != 2]
        assert re.fullmatch(pattern, smollm2_vocab.decode_bytes(text_ids).decode())
        if jump_forward and pattern.startswith(r"\{"):
            assert out.forced_positions and out.num_model_calls < len(out.token_ids)


def test_empty_prompt_is_refused(hf_logits_fn):
    with pytest.raises(RequestError, match="empty"):
        generate_reference(hf_logits_fn, [], SamplingParams(), vocab_size=49152, eos_token_ids={2})
