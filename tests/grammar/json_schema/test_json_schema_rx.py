"""The regex-text combinators' structure scanners against a character-by-character oracle.

``seq`` / ``trie_alt`` wrap a part in ``(?:...)`` iff it has a top-level ``|``; ``group``
leaves a part alone iff it is already one group spanning the whole text. Both scan with one
``re`` tokenizer (escapes and classes skipped whole); the oracle walks every character.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.json_schema.regex_text import (
    _balanced_group,
    _has_top_level_bar,
    alt,
    group,
    repeat,
    seq,
    trie_alt,
)


def _structure(rx: str):
    """(index, char, depth) of every character outside classes and escapes (the oracle)."""
    depth = 0
    in_class = False
    i = 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        else:
            yield i, c, depth
            depth += (c == "(") - (c == ")")
        i += 1


def _oracle_balanced(rx: str) -> bool:
    return all(not (c == ")" and d == 1 and i != len(rx) - 1) for i, c, d in _structure(rx))


def _oracle_bar(rx: str) -> bool:
    return any(c == "|" and d == 0 for _, c, d in _structure(rx))


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ab()|[]\\^-?*:\n", max_size=16))
def test_scanners_equal_character_walk(rx):
    assert _balanced_group(rx) == _oracle_balanced(rx)
    assert _has_top_level_bar(rx) == _oracle_bar(rx)


_PARTS = ["a", "a|b", "(?:a|b)", "[|]", "\\|", "(?:a)|(?:b)", "[a-c]+", "(?:x)(?:y)", ""]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PARTS), min_size=1, max_size=3),
    st.text(alphabet="abcxy|", max_size=6),
)
def test_combinators_keep_meaning(parts, text):
    """seq = concatenation, group + quantifier = quantified whole, alt = union (re oracle)."""
    joined = "".join(f"(?:{p})" for p in parts)
    assert bool(re.fullmatch(seq(*parts), text)) == bool(re.fullmatch(joined, text))
    assert bool(re.fullmatch(group(parts[0]) + "*", text)) == bool(
        re.fullmatch(f"(?:{parts[0]})*", text)
    )
    assert bool(re.fullmatch(repeat(parts[0], 1, 2), text)) == bool(
        re.fullmatch(f"(?:{parts[0]}){{1,2}}", text)
    )
    union = "|".join(f"(?:{p})" for p in parts)
    assert bool(re.fullmatch(alt(parts), text)) == bool(re.fullmatch(union, text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab|(", max_size=4), min_size=1, max_size=5))
def test_trie_alt_is_the_union_of_literals(words):
    rx = trie_alt(words)
    for w in {*words, "a", "ab", "b|", ""}:
        assert bool(re.fullmatch(rx, w)) == (w in words)
