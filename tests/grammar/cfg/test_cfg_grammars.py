"""Exactness of CFG masks on six Lark grammars with the real SmolLM2 vocabulary.

Oracles: Lark's own Earley parser (``lexer="dynamic_complete"``: the grammar's context-free
language over its terminals' regex languages, see ``lark_grammar``) for complete strings; an
independent byte-level Earley recognizer (``_cfg_oracle.ByteEarleyOracle``) for prefixes; a
brute-force read of every vocabulary token for masks.
"""

from __future__ import annotations

import random

import lark
import numpy as np
import pytest

from formcast.grammar.cfg.lark_frontend import compile_lark
from tests.grammar._cfg_grammars import LARK_GRAMMARS
from tests.grammar._cfg_oracle import ByteEarleyOracle, brute_force_mask, random_sentence

NAMES = list(LARK_GRAMMARS)


@pytest.fixture(scope="module")
def compiled(smollm2_vocab):
    return {name: compile_lark(text, smollm2_vocab) for name, text in LARK_GRAMMARS.items()}


@pytest.fixture(scope="module")
def lark_parsers():
    return {
        name: lark.Lark(text, parser="earley", lexer="dynamic_complete")
        for name, text in LARK_GRAMMARS.items()
    }


@pytest.fixture(scope="module")
def token_of(smollm2_vocab):
    return {b: i for i, b in enumerate(smollm2_vocab.token_bytes) if b}


def lark_accepts(parser, data: bytes) -> bool:
    try:
        parser.parse(data.decode("utf-8"))
    except (lark.exceptions.LarkError, UnicodeDecodeError):
        return False
    return True


def random_segmentation(data: bytes, token_of: dict, rng: random.Random) -> list[int]:
    """A random split of ``data`` into vocabulary tokens (single bytes always exist)."""
    out, i = [], 0
    while i < len(data):
        lengths = [n for n in range(1, min(16, len(data) - i) + 1) if data[i : i + n] in token_of]
        n = rng.choice(lengths)
        out.append(token_of[data[i : i + n]])
        i += n
    return out


def mask_ids(matcher) -> set[int]:
    return set(matcher.allowed_token_ids().tolist())


@pytest.mark.parametrize("name", NAMES)
def test_sentences_accepted_token_by_token(
    name, compiled, lark_parsers, smollm2_tokenizer, token_of
):
    grammar = compiled[name]
    rng = random.Random(hash(name) % 1000)
    for _ in range(6):
        sentence = random_sentence(grammar.prepared, rng)
        assert lark_accepts(lark_parsers[name], sentence), sentence
        canonical = smollm2_tokenizer.encode(sentence.decode(), add_special_tokens=False)
        for ids in (canonical, random_segmentation(sentence, token_of, rng)):
            matcher = grammar.matcher()
            for token_id in ids:
                assert token_id in mask_ids(matcher), (sentence, token_id)
                assert matcher.accept_token(token_id)
            assert matcher.is_accepting(), sentence
            assert matcher.accept_token(2)  # EOS
            assert matcher.is_terminated()


@pytest.mark.parametrize("name", NAMES)
def test_mask_guided_walks_parse(name, compiled, lark_parsers, smollm2_vocab):
    grammar = compiled[name]
    oracle = ByteEarleyOracle(grammar.prepared)
    rng = random.Random(7)
    num_finished = 0
    for _ in range(4):
        matcher, text = grammar.matcher(), b""
        for step in range(60):
            allowed = matcher.allowed_token_ids().tolist()
            assert allowed, "dead end"
            if 2 in allowed and (step > 8 or rng.random() < 0.2):
                assert matcher.accept_token(2)
                break
            short = [t for t in allowed if len(smollm2_vocab.token_bytes[t]) == 1]
            token_id = rng.choice(short if short and rng.random() < 0.7 else allowed)
            if token_id == 2:
                assert matcher.accept_token(2)
                break
            assert matcher.accept_token(token_id)
            text += smollm2_vocab.token_bytes[token_id]
        if matcher.is_terminated():
            num_finished += 1
            assert lark_accepts(lark_parsers[name], text), text
        else:
            assert oracle.is_prefix(text), text
    assert num_finished >= 1


def mutate(data: bytes, rng: random.Random) -> bytes:
    alphabet = b" ,:\"{}[]()+-*/<>=1a.xS'_"
    i = rng.randrange(len(data) + 1)
    kind = rng.randrange(3)
    if kind == 0 or not data:
        return data[:i] + bytes([rng.choice(alphabet)]) + data[i:]
    i = min(i, len(data) - 1)
    if kind == 1:
        return data[:i] + data[i + 1 :]
    return data[:i] + bytes([rng.choice(alphabet)]) + data[i + 1 :]


@pytest.mark.parametrize("name", NAMES)
def test_mutations_agree_with_lark(name, compiled, lark_parsers, smollm2_tokenizer):
    grammar = compiled[name]
    rng = random.Random(11)
    num_rejected = 0
    for _ in range(20):
        text = mutate(random_sentence(grammar.prepared, rng), rng)
        expected = lark_accepts(lark_parsers[name], text)
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text.decode(), add_special_tokens=False)
        got = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert got == expected, text
        num_rejected += not expected
    assert num_rejected >= 3


@pytest.mark.parametrize("name", NAMES)
def test_byte_stepping_matches_independent_oracle(name, compiled):
    grammar = compiled[name]
    runtime = grammar.runtime
    oracle = ByteEarleyOracle(grammar.prepared)
    rng = random.Random(3)
    for _ in range(12):
        text = random_sentence(grammar.prepared, rng, max_depth=5)
        if rng.random() < 0.6:
            text = mutate(text, rng)
        prefix = text[: rng.randrange(len(text) + 1)]
        heads = runtime.advance(grammar.initial_heads, prefix)
        assert bool(heads) == oracle.is_prefix(prefix), prefix
        heads = runtime.advance(grammar.initial_heads, text)
        assert (bool(heads) and runtime.is_accepting(heads)) == oracle.is_sentence(text), text


@pytest.mark.parametrize("name", NAMES)
def test_masks_equal_brute_force_over_vocabulary(name, compiled, smollm2_vocab):
    grammar = compiled[name]
    rng = random.Random(5)
    for _ in range(2):
        text = random_sentence(grammar.prepared, rng)
        prefix = text[: rng.randrange(len(text) + 1)]
        matcher = grammar.matcher()
        assert matcher.accept_bytes(prefix) or not prefix
        heads = grammar.runtime.advance(grammar.initial_heads, prefix)
        expected = brute_force_mask(grammar.runtime, heads, smollm2_vocab)
        assert mask_ids(matcher) == expected, prefix


def test_ambiguous_grammar_keeps_every_reading(compiled):
    grammar = compiled["ambiguous"]
    matcher = grammar.matcher()
    # "aa" is NAME, NAME NAME, or the start of "a"~2..3: all continuations stay open
    assert matcher.accept_bytes(b"aa")
    assert matcher.is_accepting()
    assert matcher.accept_bytes(b"a+bc*c")
    assert matcher.is_accepting()
    assert not matcher.fork().accept_bytes(b"+d")
    row = np.unpackbits(matcher.packed_row().view(np.uint8), bitorder="little")
    assert row[2]  # EOS
