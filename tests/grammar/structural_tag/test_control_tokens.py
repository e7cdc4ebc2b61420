"""``token`` formats: a special token allowed where its text goes (besides that text in
ordinary tokens), on the real Llama 3.2 vocabulary (``<|python_tag|>`` is special there):
masks equal the reference at every position (the reference reads the compiled vocabulary, in
which the token writes its text), the token is allowed at the trigger and nowhere else, and
bad token formats name their pointer."""

from __future__ import annotations

import pytest

from formcast.grammar.structural_tag import compile_structural_tag, parse_structural_tag
from formcast.grammar.structural_tag.error import StructuralTagError
from tests.grammar.structural_tag._helpers import mask_mismatches

PYTHON_TAG = "<|python_tag|>"
TOKEN = {"type": "token", "token": PYTHON_TAG}
CALL = {
    "type": "triggered_tags",
    "triggers": [TOKEN],
    "tags": [
        {
            "type": "tag",
            "begin": TOKEN,
            "content": {"type": "json_schema", "json_schema": {"enum": [1, 22]}},
            "end": ";",
        }
    ],
}
REQUIRED = {"type": "sequence", "elements": [TOKEN, {"type": "const_string", "value": "ok"}]}
# the same languages over text, for the reference recogniser
CALL_TEXT = {
    **CALL,
    "triggers": [PYTHON_TAG],
    "tags": [{**CALL["tags"][0], "begin": PYTHON_TAG}],
}
REQUIRED_TEXT = {
    "type": "sequence",
    "elements": [{"type": "const_string", "value": PYTHON_TAG}, REQUIRED["elements"][1]],
}


@pytest.fixture(scope="module")
def grammars(llama_vocab):
    return {
        name: compile_structural_tag({"type": "structural_tag", "format": fmt}, llama_vocab)
        for name, fmt in (("call", CALL), ("required", REQUIRED))
    }


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("call", ""), ("call", "hi <|python"), ("call", f"x{PYTHON_TAG}2"), ("required", "")],
)
def test_masks_equal_reference(grammars, name, prefix):
    fmt = CALL_TEXT if name == "call" else REQUIRED_TEXT
    assert mask_mismatches(grammars[name], fmt, prefix) == []


def test_the_token_is_allowed_where_its_text_starts(grammars, llama_vocab, llama_tokenizer):
    token_id = llama_vocab.control_token_id(PYTHON_TAG)
    assert token_id == 128010 and not llama_vocab.token_bytes[token_id]
    matcher = grammars["call"].matcher()
    for piece in llama_tokenizer.encode("Sure {", add_special_tokens=False):
        assert token_id in set(matcher.allowed_token_ids().tolist())  # free text: a trigger
        assert matcher.accept_token(piece)
    assert matcher.accept_token(token_id)
    allowed = set(matcher.allowed_token_ids().tolist())
    assert token_id not in allowed and allowed  # inside the call: the JSON value
    for piece in llama_tokenizer.encode("22;", add_special_tokens=False):
        assert matcher.accept_token(piece)
    assert matcher.is_accepting()
    required = grammars["required"].matcher()
    allowed = set(required.allowed_token_ids().tolist())
    assert token_id in allowed
    assert required.accept_token(token_id) and required.accept_bytes(b"ok")
    assert required.is_accepting()
    # the same text in ordinary tokens is the same output
    spelled = grammars["required"].matcher()
    assert spelled.accept_bytes(PYTHON_TAG.encode() + b"ok") and spelled.is_accepting()


def test_parse_records_tokens_and_refuses_ids():
    parsed = parse_structural_tag({"type": "structural_tag", "format": CALL})
    assert parsed.control_tokens == ((PYTHON_TAG, "/format/triggers/0/token"),)
    assert '"control_tokens"' in parsed.to_json()
    with pytest.raises(StructuralTagError, match="by id") as info:
        parse_structural_tag({"type": "token", "token": 128010})
    assert info.value.pointer == "/token"


def test_a_text_that_is_no_special_token_is_refused(llama_vocab):
    fmt = {"type": "sequence", "elements": [{"type": "token", "token": "hello"}]}
    with pytest.raises(StructuralTagError, match="not a special token") as info:
        compile_structural_tag(fmt, llama_vocab, cache=False)
    assert info.value.pointer == "/elements/0/token"
