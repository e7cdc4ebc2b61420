"""Exactness by brute force: every token of the real SmolLM2 vocabulary at several states.

A token is allowed iff some string of the language starts with (bytes so far + token bytes);
EOS iff the bytes so far are in the language; special tokens never. The oracle is the
``regex`` package's partial fullmatch (see ``_regex_oracle``), independent of our automaton.
"""

from __future__ import annotations

import numpy as np
import pytest
import regex
from _regex_oracle import is_viable_prefix, representatives

from formcast.grammar import compile_regex

# (pattern, prefixes as bytes; prefixes may end inside a UTF-8 character)
CASES = [
    (r"[a-z]+@[a-z]+\.com", [b"", b"john@ex", b"a@b.co"]),
    (r"\d{4}-\d{2}-\d{2}", [b"", b"2024-", b"2024-01-3"]),
    (
        r"(?:中文|日本語|한국어)x?[α-ω]{1,3}",
        [b"", b"\xe6\x97", b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"],
    ),
    (r"[^\"\\]{0,6}\"", [b"ab\xc3", b"x\xf0\x9f\x98", b"123456"]),
    (r".{2,4}|a+b", [b"", b"aab", b"\xc3"]),
    (r"(?:true|false|null|-?(?:0|[1-9][0-9]{0,3})(?:\.[0-9]{1,2})?)", [b"", b"12.", b"fa"]),
    (r" ?(?:yes|no) ?", [b"", b" ", b"ye"]),
]


def _expected_ids(pattern: str, prefix: bytes, vocab) -> set[int]:
    reps = representatives(pattern)
    allowed = set()
    for token_id, piece in enumerate(vocab.token_bytes):
        if token_id in vocab.special_token_ids or not piece:
            continue
        if is_viable_prefix(pattern, prefix + piece, reps):
            allowed.add(token_id)
    try:
        text = prefix.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and regex.fullmatch(pattern, text):
        allowed |= set(vocab.eos_token_ids)
    return allowed


@pytest.mark.parametrize("pattern,prefixes", CASES, ids=[c[0][:24] for c in CASES])
def test_allowed_tokens_match_brute_force(pattern, prefixes, smollm2_vocab):
    vocab = smollm2_vocab
    grammar = compile_regex(pattern, vocab, cache=False)
    for prefix in prefixes:
        matcher = grammar.matcher()
        assert matcher.accept_bytes(prefix) or prefix == b"", prefix
        got = set(matcher.allowed_token_ids().tolist())
        expected = _expected_ids(pattern, prefix, vocab)
        missing, extra = sorted(expected - got)[:5], sorted(got - expected)[:5]
        assert got == expected, (prefix, [vocab[i] for i in missing], [vocab[i] for i in extra])
        # the sparse transition table agrees with the packed row and with a byte walk
        ids, next_states = grammar.index.transitions(matcher.state)
        assert set(ids.tolist()) == got - set(vocab.eos_token_ids)
        for token_id, nxt in list(zip(ids.tolist(), next_states.tolist(), strict=True))[:200]:
            assert grammar.dfa.walk(matcher.state, vocab[token_id]) == nxt


def test_lazy_index_equals_eager(smollm2_vocab):
    pattern = r"(?:[a-f0-9]{2}:){2}[a-f0-9]{2}|[A-Z][a-z]{1,4}"
    eager = compile_regex(pattern, smollm2_vocab, cache=False)
    lazy = compile_regex(pattern, smollm2_vocab, cache=False, eager_max_states=0)
    assert eager.index.is_eager and not lazy.index.is_eager
    for state in range(eager.num_states):
        assert np.array_equal(eager.index.row(state), lazy.index.row(state))


def test_special_and_padding_ids_never_allowed(smollm2_tokenizer):
    from formcast.grammar import Vocabulary

    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49152 + 40)
    grammar = compile_regex(r"(?s:.)*", vocab, cache=False)
    allowed = set(grammar.matcher().allowed_token_ids().tolist())
    specials = set(vocab.special_token_ids) - set(vocab.eos_token_ids)
    assert not allowed & specials
    assert not allowed & set(range(49152, 49152 + 40))
    assert set(vocab.eos_token_ids) <= allowed
    # every non-special token is allowed by "any text" except those that are not valid UTF-8
    # prefixes (e.g. a lone continuation byte)
    for token_id in range(vocab.num_tokenizer_tokens):
        piece = vocab[token_id]
        if piece and token_id not in vocab.special_token_ids:
            valid = is_viable_prefix(r"(?s:.)*", piece, [0, 0x10FFFF])
            assert (token_id in allowed) == valid, piece
