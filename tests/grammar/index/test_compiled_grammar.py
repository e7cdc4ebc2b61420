"""compile_choice, CompiledGrammar pickling, and the in-memory / on-disk grammar cache."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from formcast.errors import GrammarError
from formcast.grammar import compile_choice, compile_regex
from formcast.grammar.index.grammar_cache import GrammarCache, cache_key


def _brute_force_choice(choices: list[str], prefix: bytes, vocab) -> set[int]:
    encoded = [c.encode("utf-8") for c in choices]
    allowed = set()
    for token_id, piece in enumerate(vocab.token_bytes):
        if not piece or token_id in vocab.special_token_ids:
            continue
        data = prefix + piece
        if any(c.startswith(data) for c in encoded):
            allowed.add(token_id)
    if prefix in encoded:
        allowed |= set(vocab.eos_token_ids)
    return allowed


CHOICES = ["yes", "no", "maybe", "yes, definitely", "Ja (.*)", "中文", ""]


@pytest.mark.parametrize("prefix", [b"", b"y", b"yes", b"Ja (", b"\xe4\xb8"])
def test_choice_masks_brute_force(prefix, smollm2_vocab):
    grammar = compile_choice(CHOICES, smollm2_vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prefix) or prefix == b""
    assert set(matcher.allowed_token_ids().tolist()) == _brute_force_choice(
        CHOICES, prefix, smollm2_vocab
    )


def test_choice_text_is_literal_and_complete(smollm2_vocab, smollm2_tokenizer):
    grammar = compile_choice(CHOICES, smollm2_vocab, cache=False)
    eos = next(iter(smollm2_vocab.eos_token_ids))
    for choice in CHOICES:
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(choice, add_special_tokens=False)
        assert matcher.accept_tokens(ids) == len(ids)
        assert matcher.accept_token(eos), choice
    matcher = grammar.matcher()
    assert not matcher.accept_bytes(b"Ja (x)")  # "(.*)" is not a regex here
    with pytest.raises(GrammarError):
        compile_choice([], smollm2_vocab)
    with pytest.raises(GrammarError):
        compile_choice("yes", smollm2_vocab)
    with pytest.raises(GrammarError):
        compile_choice(["a", 3], smollm2_vocab)


def test_pickle_roundtrip_keeps_masks(smollm2_vocab):
    for eager_max_states in (1024, 0):
        grammar = compile_regex(
            r"[A-Z][a-z]+ \d{1,2}", smollm2_vocab, cache=False, eager_max_states=eager_max_states
        )
        matcher = grammar.matcher()
        matcher.accept_bytes(b"May 1")
        restored = pickle.loads(pickle.dumps(grammar))
        other = restored.matcher()
        other.accept_bytes(b"May 1")
        assert np.array_equal(other.allowed_token_ids(), matcher.allowed_token_ids())
        assert restored.num_states == grammar.num_states
        assert restored.vocab_size == grammar.vocab_size


def test_disk_cache_roundtrip(smollm2_vocab, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    cache = GrammarCache()
    calls = []

    def build():
        calls.append(1)
        return compile_regex(r"(?:ab|cd)+e?", smollm2_vocab, cache=False)

    key = cache_key("regex", r"(?:ab|cd)+e?", {"dialect": "python"}, smollm2_vocab)
    first = cache.get_or_compile(key, smollm2_vocab, build)
    assert cache.get_or_compile(key, smollm2_vocab, build) is first  # in-memory hit
    assert list((tmp_path / "grammars").glob("*.fcg"))
    cache.clear_memory()
    second = cache.get_or_compile(key, smollm2_vocab, build)  # disk hit
    assert len(calls) == 1 and second is not first
    for grammar in (first, second):
        matcher = grammar.matcher()
        assert matcher.accept_bytes(b"abcd")
    assert np.array_equal(first.index.row(0), second.index.row(0))
    # a corrupt file is a miss, not a failure
    for path in (tmp_path / "grammars").glob("*.fcg"):
        path.write_bytes(b"not a grammar file")
    cache.clear_memory()
    cache.get_or_compile(key, smollm2_vocab, build)
    assert len(calls) == 2
    # different options or dialect -> different keys
    assert key != cache_key("regex", r"(?:ab|cd)+e?", {"dialect": "ecma"}, smollm2_vocab)


def test_regex_to_dfa_memo_is_keyed_by_budget():
    """A memoised DFA is reused for the same pattern, dialect and state budget only."""
    from formcast.errors import CompileBudgetError
    from formcast.grammar.index.compile import clear_dfa_memo, regex_to_dfa

    pattern = r"[a-z]{3,9}x[0-9]{2,4}"
    first = regex_to_dfa(pattern)
    assert regex_to_dfa(pattern) is first
    assert regex_to_dfa(pattern, dialect="ecma") is not first
    # a smaller state budget is not answered from the memo of a larger one
    with pytest.raises(CompileBudgetError):
        regex_to_dfa(pattern, max_states=3)
    assert regex_to_dfa(pattern) is first
    clear_dfa_memo()
    again = regex_to_dfa(pattern)
    assert again is not first
    assert np.array_equal(again.transitions, first.transitions)
