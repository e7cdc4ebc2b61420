"""``skip_special_tokens``: the output text leaves special tokens out by default and shows
their text when asked (a tool call's control token), on the real SmolLM2 tokenizer; the
engine passes the request's setting to its detokenizer."""

from __future__ import annotations

import pytest

from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.errors import SamplingParamsError
from formcast.samplers.params import SamplingParams


@pytest.mark.parametrize("skip", [True, False])
def test_special_tokens_shown_only_when_asked(smollm2_tokenizer, skip):
    tok = smollm2_tokenizer
    prompt = tok.encode("Hello", add_special_tokens=False)
    output = [
        *tok.encode("Sure ", add_special_tokens=False),
        tok.convert_tokens_to_ids("<|im_start|>"),
        *tok.encode('{"a": 1}', add_special_tokens=False),
    ]
    detokenizer = IncrementalDetokenizer(tok, prompt, skip_special_tokens=skip)
    for token_id in output:
        detokenizer.append(token_id)
    detokenizer.flush()
    assert detokenizer.text == ('Sure {"a": 1}' if skip else 'Sure <|im_start|>{"a": 1}')


def test_sampling_params_default_and_type():
    assert SamplingParams().skip_special_tokens is True
    assert SamplingParams(skip_special_tokens=False).skip_special_tokens is False
    with pytest.raises(SamplingParamsError):
        SamplingParams(skip_special_tokens="no")  # type: ignore[arg-type]
