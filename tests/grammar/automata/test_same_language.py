"""``same_language`` against brute force: two DFAs agree iff every short string agrees."""

from __future__ import annotations

import itertools
import re

import pytest

from formcast.grammar.automata.byte_dfa import same_language
from formcast.grammar.index.compile import regex_to_dfa

PATTERNS = ["a*", "(?:a|aa)*", "a{0,3}", "(?:a|b)*b", "[ab]*b", "b|a+b", "(?:ab)*a?", "a(?:ba)*|"]


def _words(alphabet: str, max_len: int):
    for n in range(max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


@pytest.mark.parametrize("first,second", list(itertools.combinations(PATTERNS, 2)))
def test_same_language_iff_every_short_string_agrees(first, second):
    agree = all(
        bool(re.fullmatch(first, w)) == bool(re.fullmatch(second, w)) for w in _words("ab", 7)
    )
    assert same_language(regex_to_dfa(first), regex_to_dfa(second)) == agree


def test_equal_languages_written_differently():
    assert same_language(regex_to_dfa("(?:a|b)*b"), regex_to_dfa("[ab]*b"))
    assert same_language(regex_to_dfa("(?:a|aa)*"), regex_to_dfa("a*"))
    assert not same_language(regex_to_dfa("a{0,3}"), regex_to_dfa("a{0,4}"))
