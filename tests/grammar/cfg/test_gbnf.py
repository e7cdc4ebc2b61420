"""compile_gbnf: llama.cpp grammars (json.gbnf, arithmetic.gbnf) with exact masks, and errors."""

from __future__ import annotations

import json
import random

import pytest

from formcast.errors import GrammarError
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from tests.grammar._cfg_grammars import ARITHMETIC_GBNF, JSON_GBNF
from tests.grammar._cfg_oracle import ByteEarleyOracle, brute_force_mask, random_sentence


@pytest.fixture(scope="module")
def json_gbnf(smollm2_vocab):
    return compile_gbnf(JSON_GBNF, smollm2_vocab)


def test_json_gbnf_sentences_are_json_and_accepted(json_gbnf, smollm2_tokenizer):
    rng = random.Random(2)
    for _ in range(8):
        sentence = random_sentence(json_gbnf.prepared, rng, max_depth=6)
        value = json.loads(sentence)
        assert isinstance(value, dict)
        matcher = json_gbnf.matcher()
        ids = smollm2_tokenizer.encode(sentence.decode(), add_special_tokens=False)
        for token_id in ids:
            assert token_id in set(matcher.allowed_token_ids().tolist())
            assert matcher.accept_token(token_id)
        assert matcher.is_accepting()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, -2.5e3, true, null, {"b": "\\u00e9\\n"}]}', True),
        ('{"a":1,}', False),
        ('{"a": 01}', False),  # one digit, or [1-9] then digits
        ("[1]", False),  # root is an object
        ('{"a": "\x01"}', False),
    ],
)
def test_json_gbnf_agrees_with_the_byte_oracle(json_gbnf, text, expected):
    oracle = ByteEarleyOracle(json_gbnf.prepared)
    matcher = json_gbnf.matcher()
    got = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
    assert got == expected == oracle.is_sentence(text.encode())


def test_json_gbnf_mask_equals_brute_force(json_gbnf, smollm2_vocab):
    runtime = json_gbnf.runtime
    for prefix in (b'{"key": [1, "va', b'{"a": 12'):
        heads = runtime.advance(json_gbnf.initial_heads, prefix)
        matcher = json_gbnf.matcher()
        assert matcher.accept_bytes(prefix)
        expected = brute_force_mask(runtime, heads, smollm2_vocab)
        assert set(matcher.allowed_token_ids().tolist()) == expected


def test_arithmetic_gbnf(smollm2_vocab):
    grammar = compile_gbnf(ARITHMETIC_GBNF, smollm2_vocab)
    oracle = ByteEarleyOracle(grammar.prepared)
    for text, expected in [
        ("1+2=3\n", True),
        ("(a_1 *2) /x = (y)\nb=2\n", True),
        ("(a_1 * 2)=1\n", False),
        ("1+=3\n", False),
        ("1=2", False),
    ]:
        matcher = grammar.matcher()
        got = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        assert got == expected == oracle.is_sentence(text.encode()), text
    rng = random.Random(4)
    for _ in range(5):
        sentence = random_sentence(grammar.prepared, rng, max_depth=6)
        assert oracle.is_sentence(sentence)
        matcher = grammar.matcher()
        assert matcher.accept_bytes(sentence) and matcher.is_accepting()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('root ::= "a', "unterminated string"),
        ("root ::= [a-", "unterminated character class"),
        ("root ::= other", "other"),
        ('root ::= "a"\nextra ::= "b"', "extra"),
        ('root ::= "a" root', "never finish"),
        ('root ::= "a"{3,1}', "max < min"),
        ("root = x", "::="),
        ('x ::= "a"', "root"),
    ],
)
def test_gbnf_errors(smollm2_vocab, text, needle):
    with pytest.raises(GrammarError, match=needle):
        compile_gbnf(text, smollm2_vocab, cache=False)
