"""Jump-forward tokenization: exact bytes, canonical boundaries, accepted by the grammar."""

from __future__ import annotations

import pytest

from formcast.decoding.jump_forward import forced_token_ids, longest_utf8_prefix
from formcast.grammar import compile_regex


@pytest.fixture(scope="module")
def encode(smollm2_tokenizer):
    return lambda text: smollm2_tokenizer.encode(text, add_special_tokens=False)


def test_longest_utf8_prefix():
    assert longest_utf8_prefix(b"abc") == 3
    assert longest_utf8_prefix("é".encode()[:1]) == 0
    assert longest_utf8_prefix(b"ab" + "€".encode()[:2]) == 2
    assert longest_utf8_prefix(b"") == 0


@pytest.mark.parametrize(
    "forced",
    [b'{"name": "', b'", "age": ', b"\n  - item: ", b"caf\xc3\xa9 au lait ", b"2024-01-"],
)
def test_forced_tokens_are_a_prefix_and_canonical(smollm2_vocab, encode, forced):
    token_ids = forced_token_ids(forced, [], smollm2_vocab, encode)
    data = smollm2_vocab.decode_bytes(token_ids)
    assert forced.startswith(data)
    # Canonical: what the tokenizer produces for the whole forced text, minus the last token.
    canonical = encode(forced.decode())
    assert token_ids == canonical[:-1]
    final_ids = forced_token_ids(forced, [], smollm2_vocab, encode, is_final=True)
    assert final_ids == canonical


def test_forced_text_that_merges_backwards_uses_less_context(smollm2_vocab, encode):
    # Context ends with "Hel"; forced "lo world" re-tokenizes "Hello" as one token, so the
    # context token cannot be kept: fall back to tokenizing the forced text on its own.
    context = encode("Say Hel")
    token_ids = forced_token_ids(b"lo world, ", context, smollm2_vocab, encode)
    assert (
        smollm2_vocab.decode_bytes(token_ids)
        == b"lo world,"[: len(smollm2_vocab.decode_bytes(token_ids))]
    )
    assert b"lo world, ".startswith(smollm2_vocab.decode_bytes(token_ids))


def test_partial_character_is_not_forced_past(smollm2_vocab, encode):
    euro = "€".encode()
    token_ids = forced_token_ids(b"price: " + euro[:2], [], smollm2_vocab, encode)
    assert b"price: ".startswith(smollm2_vocab.decode_bytes(token_ids))


def test_grammar_accepts_jump_forward_tokens(smollm2_vocab, encode):
    grammar = compile_regex(r'\{"name": "[A-Z][a-z]+", "age": [0-9]+\}', smollm2_vocab)
    matcher = grammar.matcher()
    forced = matcher.forced_bytes()
    assert forced == b'{"name": "'
    token_ids = forced_token_ids(forced, [], smollm2_vocab, encode)
    assert token_ids and matcher.accept_tokens(token_ids) == len(token_ids)
    assert matcher.forced_bytes() == forced[len(smollm2_vocab.decode_bytes(token_ids)) :]
