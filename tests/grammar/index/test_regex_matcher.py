"""DfaMatcher behaviour against ``re.fullmatch``: Hypothesis-generated patterns and strings,
canonical and random token segmentations, random walks to EOS, rollback/fork vs replay,
forced bytes."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from formcast.errors import GrammarError
from formcast.grammar import allocate_token_bitmask, compile_regex

ALPHABET = ["a", "b", "c", "0", "7", "-", ".", " ", "é", "中", "😀", "\n"]
ATOMS = [
    *map(re.escape, ALPHABET),
    "[ab]",
    "[^a]",
    "[a-c0-9]",
    "[é-中]",
    "[^\\W\\d]",
    "\\d",
    "\\w",
    "\\s",
    "\\D",
    ".",
    "(?s:.)",
    "[😀-😂x]",
]
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _regexes() -> st.SearchStrategy[str]:
    quantifiers = st.sampled_from(["", "", "*", "+", "?", "{2}", "{0,2}", "{1,3}", "*?", "{2,}"])

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        group = st.tuples(children, quantifiers).map(lambda t: f"(?:{t[0]}){t[1]}")
        concat = st.lists(children, min_size=2, max_size=3).map("".join)
        alt = st.lists(children, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")")
        return group | concat | alt

    atom = st.tuples(st.sampled_from(ATOMS), quantifiers).map("".join)
    return st.recursive(atom, extend, max_leaves=6)


def _segmentations(data: bytes, piece_ids: dict[bytes, int], rng: random.Random) -> list[int]:
    """A random segmentation of ``data`` into vocabulary tokens (byte tokens always exist)."""
    ids, i = [], 0
    while i < len(data):
        lengths = [k for k in range(1, min(16, len(data) - i) + 1) if data[i : i + k] in piece_ids]
        k = rng.choice(lengths)
        ids.append(piece_ids[data[i : i + k]])
        i += k
    return ids


@pytest.fixture(scope="module")
def piece_ids(smollm2_vocab):
    table: dict[bytes, int] = {}
    for token_id, piece in enumerate(smollm2_vocab.token_bytes):
        if piece and token_id not in smollm2_vocab.special_token_ids:
            table.setdefault(piece, token_id)
    return table


def _run(grammar, token_ids) -> tuple[bool, object]:
    matcher = grammar.matcher()
    accepted = matcher.accept_tokens(token_ids)
    return accepted == len(token_ids), matcher


@SETTINGS
@given(pattern=_regexes(), data=st.data())
def test_hypothesis_strings_accepted_iff_fullmatch(
    pattern, data, smollm2_vocab, smollm2_tokenizer, piece_ids
):
    vocab = smollm2_vocab
    grammar = compile_regex(pattern, vocab, cache=False)
    matching = data.draw(st.from_regex(pattern, fullmatch=True), label="matching")
    other = data.draw(st.text(st.sampled_from(ALPHABET), max_size=6), label="other")
    rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
    for text in (matching, other):
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:
            continue
        is_match = re.fullmatch(pattern, text) is not None
        canonical = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assume(vocab.decode_bytes(canonical) == encoded)
        for ids in (canonical, _segmentations(encoded, piece_ids, rng)):
            all_accepted, matcher = _run(grammar, ids)
            if is_match:
                assert all_accepted and matcher.is_accepting(), (pattern, text, ids)
                eos = next(iter(vocab.eos_token_ids))
                assert matcher.accept_token(eos) and matcher.is_terminated()
            else:
                assert not (all_accepted and matcher.is_accepting()), (pattern, text, ids)


WALK_PATTERNS = [
    r"[a-z]{1,8}@[a-z]{2,6}\.(?:com|org)",
    r"\d{1,3}(?:,\d{3})*(?:\.\d+)?",
    r"(?:[^\"\\]|\\[\"\\n])*",
    r"[😀-😂é中]{0,5}x",
    r"\w+(?: \w+){0,3}",
    r"(?i)hello (?:world|there)",
    r"(?x) a+  b? # comment",
]


@pytest.mark.parametrize("pattern", WALK_PATTERNS)
def test_random_walks_to_eos_fullmatch(pattern, smollm2_vocab):
    vocab = smollm2_vocab
    grammar = compile_regex(pattern, vocab, cache=False)
    eos_ids = set(vocab.eos_token_ids)
    rng = np.random.default_rng(0)
    for _ in range(15):
        matcher = grammar.matcher()
        produced: list[int] = []
        while not matcher.is_terminated():
            allowed = matcher.allowed_token_ids()
            assert len(allowed), "dead end: a state with no allowed token"
            eos_allowed = [i for i in allowed if i in eos_ids]
            if eos_allowed and (rng.random() < 0.25 or len(produced) > 60):
                choice = int(eos_allowed[0])
            else:
                text_ids = [i for i in allowed if i not in eos_ids] or eos_allowed
                choice = int(rng.choice(text_ids))
            assert matcher.accept_token(choice)
            produced.append(choice)
        text = vocab.decode_bytes(produced).decode("utf-8")
        assert re.fullmatch(pattern, text), (pattern, text)


def _replay(grammar, ids):
    matcher = grammar.matcher()
    assert matcher.accept_tokens(ids) == len(ids)
    return matcher


def test_rollback_and_fork_equal_replay(smollm2_vocab):
    vocab = smollm2_vocab
    grammar = compile_regex(r"(?:[a-z]+ ){2,40}(?:end|stop)", vocab, cache=False)
    rng = np.random.default_rng(1)
    matcher = grammar.matcher()
    ids: list[int] = []
    eos_ids = np.array(sorted(vocab.eos_token_ids))
    for _ in range(40):
        allowed = np.setdiff1d(matcher.allowed_token_ids(), eos_ids)
        choice = int(rng.choice(allowed))
        assert matcher.accept_token(choice)
        ids.append(choice)
    bitmask = allocate_token_bitmask(2, vocab.vocab_size)
    for back in (1, 5, 16, 23, 0):
        forked = matcher.fork()
        forked.rollback(back)
        kept = ids[: len(ids) - back]
        replayed = _replay(grammar, kept)
        assert forked.state == replayed.state
        forked.fill_bitmask(bitmask, 0)
        replayed.fill_bitmask(bitmask, 1)
        assert np.array_equal(bitmask[0].numpy(), bitmask[1].numpy())
        assert matcher.num_accepted == len(ids)  # the original is untouched by its fork
    # a rejected token leaves the state unchanged
    state = matcher.state
    assert not matcher.accept_token(vocab.token_bytes.index(b"!"))
    assert matcher.state == state and matcher.num_accepted == len(ids)
    # accept_tokens stops at the first rejection
    fresh = grammar.matcher()
    assert fresh.accept_tokens(ids[:3] + [vocab.token_bytes.index(b"!")] + ids[3:]) == 3
    with pytest.raises(GrammarError):
        fresh.rollback(4)


def test_eos_rollback_and_termination(smollm2_vocab):
    vocab = smollm2_vocab
    grammar = compile_regex(r"ab|abc", vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"ab") and matcher.is_accepting() and not matcher.is_terminated()
    eos = next(iter(vocab.eos_token_ids))
    assert matcher.accept_token(eos) and matcher.is_terminated()
    assert not matcher.accept_token(vocab.token_bytes.index(b"c"))
    assert list(matcher.allowed_token_ids()) == sorted(vocab.eos_token_ids)
    matcher.rollback(1)
    assert not matcher.is_terminated() and matcher.accept_token(vocab.token_bytes.index(b"c"))
    assert matcher.is_terminated()  # "abc": accepting and nothing can follow
    assert not grammar.matcher().accept_token(eos)  # EOS only where accepting


@pytest.mark.parametrize(
    "pattern,prefix,forced",
    [
        (r"abc(?:d|e)", b"", b"abc"),
        (r"\d{3}-foo(?:bar)?", b"123", b"-foo"),
        (r"a|ab", b"", b"a"),
        (r"a|ab", b"a", b""),
        (r"中文x", b"\xe4", "中文x".encode()[1:]),
        (r"(?:yes|yellow)!", b"", b"ye"),
    ],
)
def test_forced_bytes(pattern, prefix, forced, smollm2_vocab):
    grammar = compile_regex(pattern, smollm2_vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prefix) or prefix == b""
    assert matcher.forced_bytes() == forced
    # every allowed token agrees with the forced bytes
    for token_id in matcher.allowed_token_ids():
        piece = smollm2_vocab[int(token_id)]
        assert piece.startswith(forced) or forced.startswith(piece)


def test_matchers_sharing_a_bitmask_fill_their_own_rows(smollm2_tokenizer, smollm2_vocab):
    """New matchers reuse the last prepared bitmask; each still writes its own exact row, and
    a different bitmask (or a grammar over a wider vocabulary) is validated afresh."""
    import torch

    from formcast.grammar import Vocabulary

    digits = compile_regex(r"[0-9]+", smollm2_vocab, cache=False)
    letters = compile_regex(r"[a-z]+", smollm2_vocab, cache=False)
    bitmask = allocate_token_bitmask(2, smollm2_vocab.vocab_size)
    for _ in range(2):
        for row, grammar in enumerate((digits, letters, digits)):
            matcher = grammar.matcher()
            matcher.fill_bitmask(bitmask, row % 2)
            assert np.array_equal(bitmask[row % 2].numpy(), matcher.packed_row())
    with pytest.raises(GrammarError):
        digits.matcher().fill_bitmask(bitmask.to(torch.int64), 0)
    wide = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=smollm2_vocab.vocab_size + 64)
    wide_grammar = compile_regex(r"[0-9]+", wide, cache=False)
    with pytest.raises(GrammarError):
        wide_grammar.matcher().fill_bitmask(bitmask, 0)  # too narrow for the wider vocabulary
    digits.matcher().fill_bitmask(bitmask, 1)
    assert np.array_equal(bitmask[1].numpy(), digits.matcher().packed_row())
