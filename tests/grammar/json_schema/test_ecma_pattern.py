"""ECMA patterns as branches of syntax trees: anchors, ECMA meaning, length folding, formats,
pattern & format intersections, and state elimination trees.

Oracles: ``re.search`` (``re.ASCII``, ``$`` as ``\\Z``) on ASCII patterns whose ECMA meaning it
shares, hand-written ECMA expectations, brute force over short strings, and character DFAs run
directly. Every tree is printed with ``to_python_regex`` and fullmatched against JSON string
content (``json.dumps`` without the quotes) or raw strings.
"""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.json_schema import ecma_pattern
from formcast.grammar.json_schema.char_dfa import (
    Alphabet,
    CharDFA,
    KeyLanguageTooLarge,
    minimize,
    product,
)
from formcast.grammar.json_schema.dfa_to_tree import MAX_NESTING, dfa_tree
from formcast.grammar.json_schema.ecma_pattern import (
    PatternRefused,
    encode,
    format_branches,
    padded,
    parse_ecma,
    pattern_tree,
    width,
    with_length,
)
from formcast.grammar.json_schema.formats import FORMAT_REGEXES
from formcast.grammar.json_schema.key_classes import KeySpace
from formcast.grammar.json_schema.pattern_intersection import intersect_branches
from formcast.grammar.regex.combinators import alt, chars
from formcast.grammar.regex.syntax_tree import Automaton, CharSet, Repeat, to_python_regex


def _content(value: str) -> str:
    """The JSON string content formcast writes for ``value`` (no quotes)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _matcher(branches: list[ecma_pattern.Branch]) -> re.Pattern[str] | None:
    tree = pattern_tree(branches)
    return None if tree is None else re.compile(to_python_regex(tree))


def _finds(branches: list[ecma_pattern.Branch], value: str) -> bool:
    rx = _matcher(branches)
    return rx is not None and rx.fullmatch(_content(value)) is not None


def _search(pattern: str, value: str) -> bool:
    """``re.search`` with ECMA's ``$`` (end of input) on an ASCII pattern."""
    return re.search(pattern.replace("$", "\\Z"), value, re.ASCII) is not None


def _strings(alphabet: str, max_len: int) -> list[str]:
    return [
        "".join(chars)
        for n in range(max_len + 1)
        for chars in itertools.product(alphabet, repeat=n)
    ]


# anchors where they sit at an end of the whole pattern, in groups too
ANCHORED = ["^a", "a$", "^a$", "^^a$$", "(^a)b", "a(b$)", "(^a|b)c", "(?:^a|^b)c", "a(b$|c)",
            "(^a|b)(c|d$)", "((^a|b)|c)d", "^(a|^b)", "(^a|b$)", "^(ab|c)*$", "^$", "$", "^", "",
            "a|^b$", "(^a|b)c$", "^(a$|b)"]  # fmt: skip


@pytest.mark.parametrize("pattern", ANCHORED)
def test_anchored_patterns_find_what_re_search_finds(pattern):
    branches = parse_ecma(pattern)
    rx = _matcher(branches)
    assert rx is not None
    for value in _strings("abcd\n", 4):
        assert (rx.fullmatch(_content(value)) is not None) == _search(pattern, value), value


# anchors away from the ends: what comes before a ^ matches only its empty text at the
# input's start, what comes after a $ only its empty text at the end (some match nothing)
INSIDE = ["a^b", "a(^b|c)", "(a$)?", "(a$)?b", "$^", "^a$b", "a(b|^c)d", "x*(a|^b)", "/^a$/",
          "^$a*$", "(b|^)a", "a($|b)c?", "(^a)?b", "b?(^|c)(a|$)d?", "(x|y?^)(a$|b)"]  # fmt: skip


@pytest.mark.parametrize("pattern", INSIDE)
def test_anchors_inside_a_pattern_find_what_re_search_finds(pattern):
    rx = _matcher(parse_ecma(pattern))
    for value in _strings("abcd/\n", 4):
        is_found = rx is not None and rx.fullmatch(_content(value)) is not None
        assert is_found == _search(pattern, value), value


def test_a_pattern_whose_anchors_cannot_hold_matches_nothing():
    assert parse_ecma("/^[0-9]{4}$/") == []  # (a JS regex literal's slashes kept in)
    assert parse_ecma("a^b") == []


@pytest.mark.parametrize("pattern", ["(^a|b)*", "(a$){2}", "(^a)+", "x(a|(^b)*)"])
def test_anchors_inside_a_repetition_are_refused(pattern):
    with pytest.raises(PatternRefused, match="anchors"):
        parse_ecma(pattern)


@pytest.mark.parametrize(
    "pattern,value,ecma",
    [
        ("^\\d$", "\u0663", False),  # ECMA \d is ASCII
        ("^\\D$", "\u0663", True),
        ("^\\w+$", "h\u00e9", False),
        ("^\\s$", "\ufeff", True),  # ECMA \s includes the BOM; Python's does not
        ("^\\s$", "\u001c", False),  # Python \s includes U+001C..U+001F; ECMA does not
        ("^.$", "\r", False),  # ECMA . excludes every line terminator
        ("^.$", "\u2029", False),
        ("^.$", "\u00e9", True),
        ("^a$", "a\n", False),  # ECMA $ is end of input only
        ("^[^]$", "\n", True),  # [^]: any character
        ("[]", "", False),  # []: no character
        ("[]", "a", False),
        ("^\\u{1F600}$", "\U0001f600", True),
        ("^\\ud83d\\ude00$", "\U0001f600", True),  # a surrogate pair is one character
        ("^a{,2}$", "a{,2}", True),  # "{,2}" is literal text in ECMA
        ("^a{,2}$", "aa", False),
        ("^\\cJ$", "\n", True),
        ('^a"b\\\\c$', 'a"b\\c', True),
        ("^(?<year>\\d{4})$", "2024", True),
        ("^[\\d-]+$", "1-2", True),
    ],
)
def test_ecma_meaning(pattern, value, ecma):
    assert _finds(parse_ecma(pattern), value) is ecma


@pytest.mark.parametrize(
    "pattern,message",
    [
        ("(?=a)b", "lookaround"),
        ("(?=a{2})aa", "lookaround"),  # a length guard is a lookahead too
        ("(?!a)b", "lookaround"),
        ("(?<=a)b", "lookaround"),
        ("(?<!a)b", "lookaround"),
        ("(a)\\1", "backreference"),
        ("(?<n>a)\\k<n>", "backreference"),
        ("\\bword", "word boundary"),
        ("(?i)a", "group extension"),
        ("(?P<n>a)", "group extension"),  # Python syntax, not ECMA
        ("\\012", "octal"),
        ("\\p{L}", "property"),
        ("a{2,1}", "min repeat"),
        ("(a", "missing \\)"),
    ],
)
def test_refused_patterns(pattern, message):
    with pytest.raises(PatternRefused, match=message):
        parse_ecma(pattern)


def test_width_of_counted_nodes():
    a = CharSet(((97, 97),), -1)
    assert width((a, Repeat(a, 2, 5, -1))) == (3, 6)
    assert width((Repeat(a, 1, None, -1),)) == (1, None)
    assert width((Repeat(Repeat(a, 0, None, -1), 0, 0, -1),)) == (0, 0)
    assert width(padded(parse_ecma("^ab$")[0])) == (2, 2)
    assert width(padded(parse_ecma("^ab")[0])) == (2, None)


LENGTH_PATTERNS = ["^a*$", "^[ab]{1,9}$", "b", "^a", "a$", "^(ab)*$", "^a?b?$", "^(a|b\n)$",
                   "^\\s*$", "^[^b]+$", "^a{0}(b|a)*$", ""]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    pattern=st.sampled_from(LENGTH_PATTERNS),
    min_len=st.integers(0, 4),
    extra=st.one_of(st.none(), st.integers(0, 3)),
)
def test_with_length_is_the_intersection_or_refused(pattern, min_len, extra):
    max_len = None if extra is None else min_len + extra
    branches = parse_ecma(pattern)
    options = []
    try:
        for b in branches:
            nodes = with_length(padded(b), min_len, max_len)
            if nodes is not None:
                options.append(encode(nodes))
    except PatternRefused:
        return  # the compiler then guards the length instead
    tree = alt(options)
    rx = None if tree is None else re.compile(to_python_regex(tree))
    for value in _strings("ab\n", 6):
        fits = min_len <= len(value) and (max_len is None or len(value) <= max_len)
        expected = _search(pattern, value) and fits
        got = rx is not None and rx.fullmatch(_content(value)) is not None
        assert got == expected, (pattern, min_len, max_len, value)


@pytest.mark.parametrize(
    "pattern,min_len,max_len,folds",
    [("^a*$", 2, 3, True), ("^[ab]{1,9}$", 0, 3, True), ("b", 1, 4, False),
     ("^(ab)*$", 1, 3, False), ("^x(y*)z$", 3, 4, True), ("^ab$", 0, 5, True)],
)  # fmt: skip
def test_with_length_folds_a_single_counted_character(pattern, min_len, max_len, folds):
    (branch,) = parse_ecma(pattern)
    if folds:
        assert with_length(padded(branch), min_len, max_len) is not None
    else:
        with pytest.raises(PatternRefused):
            with_length(padded(branch), min_len, max_len)


FORMAT_SAMPLES = {
    "date": ["2024-02-29", "2023-02-29", "2024-13-01", "0000-01-01", "2024-1-01"],
    "time": ["12:34:56Z", "23:59:60Z", "12:34:56.789+01:00", "12:34:56", "1:34:56Z"],
    "date-time": ["2024-02-29T12:34:56Z", "2024-02-29t12:34:56z", "2024-02-29 12:34:56Z"],
    "duration": ["P1Y2M3DT4H5M6S", "P2W", "PT", "P", "P1.5Y"],
    "email": ["a@b", "@", "ab", "a@b@c"],
    "hostname": ["a.b", "a-.b", "-a", "a" * 63, "a" * 64, "a.b."],
    "ipv4": ["1.2.3.4", "256.1.1.1", "01.2.3.4", "1.2.3"],
    "ipv6": ["::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "::ffff:1.2.3.4", ":"],
    "uuid": ["12345678-1234-1234-1234-123456789abc", "12345678-1234-1234-1234-123456789ab"],
    "uri": ["https://a.b/c?d#e", "a:", "1a:", "http://[::1]:80/", "http://a b"],
    "uri-reference": ["//a/b", "a/b", "?q", "#f", "a b", "%zz"],
    "json-pointer": ["", "/a~0b~1c", "/a~2", "a"],
    "relative-json-pointer": ["0", "1/a", "01", "2#", "#"],
    "uri-template": ["/a/{b}{?c,d*}", "{+x:3}", "{", "{}", "a}", "{a:0}", "{%41}"],
}


@pytest.mark.parametrize("name", sorted(FORMAT_REGEXES))
def test_format_branches_match_the_format_regex(name):
    rx = FORMAT_REGEXES[name]
    branches = format_branches(rx)
    assert all(b.start_anchored and b.end_anchored for b in branches)
    values = FORMAT_SAMPLES[name] + ["", "\n", '"', "\\", "\u00e9"]
    assert any(re.fullmatch(rx, v) for v in values)
    for value in values:
        assert _finds(branches, value) == (re.fullmatch(rx, value) is not None), (name, value)


def test_format_branches_take_anchors_at_their_ends():
    assert format_branches("^ab$") == format_branches("ab")
    assert format_branches("\\Aab\\Z") == format_branches("ab")


INTERSECTED = [("^1", "[0-9]{1,3}"), ("-02-", "[0-9]{4}-[0-9]{2}-[0-9]{2}"), ("a$", "[ab]+@[ab]+"),
               ("^(x|ab)", "[ab]*"), ("b{2}", "(?:ab|ba)*"), ("\\d", "[a-c]*")]  # fmt: skip


@pytest.mark.parametrize("pattern,fmt", INTERSECTED)
def test_intersection_is_exact(pattern, fmt):
    branches = intersect_branches(parse_ecma(pattern), format_branches(fmt))
    assert all(b.start_anchored and b.end_anchored for b in branches)
    rx = _matcher(branches)
    for value in _strings("ab1-@x2", 4) + ["2024-02-29", "1234-02-2", "ab@ab"]:
        expected = _search(pattern, value) and re.fullmatch(fmt, value) is not None
        assert (rx is not None and rx.fullmatch(_content(value)) is not None) == expected, value


def test_intersection_keeps_a_side_within_the_other():
    pattern, fmt = parse_ecma("^[0-9]"), format_branches("[0-9]{2}")
    assert intersect_branches(pattern, fmt) is fmt
    assert intersect_branches(fmt, pattern) is fmt
    assert intersect_branches(parse_ecma("x"), format_branches("[0-9]+")) == []


def test_intersection_over_budget_is_refused():
    with pytest.raises(PatternRefused, match="too large"):
        intersect_branches(parse_ecma("[ab]*a[ab]{12}$"), format_branches(FORMAT_REGEXES["uri"]))


def _random_dfa(rng: np.random.Generator, num_states: int, num_classes: int) -> CharDFA:
    table = rng.integers(0, num_states, size=(num_states, num_classes)).astype(np.int32)
    return CharDFA(table, rng.random(num_states) < 0.4)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), num_states=st.integers(1, 6))
def test_dfa_tree_is_the_dfa_language(seed, num_states):
    # classes: "a", "b", '"', "\n", everything else ("x" stands for it)
    alphabet = Alphabet([((97, 97),), ((98, 98),), ((34, 34),), ((10, 10),)])
    dfa = _random_dfa(np.random.default_rng(seed), num_states, alphabet.num_classes)
    json_tree = dfa_tree(dfa, alphabet)
    char_tree = dfa_tree(dfa, alphabet, encode=chars)
    assert (json_tree is None) == (char_tree is None)
    json_rx = None if json_tree is None else re.compile(to_python_regex(json_tree))
    char_rx = None if char_tree is None else re.compile(to_python_regex(char_tree))
    for value in _strings('ab"\nx', 4):
        expected = dfa.accepts(alphabet, value)
        assert (json_rx is not None and json_rx.fullmatch(_content(value)) is not None) == expected
        assert (char_rx is not None and char_rx.fullmatch(value) is not None) == expected


def test_dfa_tree_bounds():
    # the keys no counted pattern matches: state elimination nests one level per count
    space = KeySpace(["^[a-z_]{1,255}$"], [], None)
    outside = minimize(product(space.pattern_dfas, lambda accepts: not accepts[0]))
    with pytest.raises(KeyLanguageTooLarge, match=f"nested over {MAX_NESTING}"):
        dfa_tree(outside, space.alphabet)
    # the class is then written as an automaton node (dfa_automaton), not refused
    assert isinstance(space.class_tree((False,)).items[1], Automaton)  # type: ignore[union-attr]
    small = KeySpace(["^[a-z_]{1,40}$"], [], None)
    assert small.class_tree((False,)) is not None
    keys = small.class_tree((False,))
    with pytest.raises(KeyLanguageTooLarge, match="over 100 characters"):
        dfa_tree(small.pattern_dfas[0], small.alphabet, max_chars=100)
    rx = re.compile(to_python_regex(keys))  # type: ignore[arg-type]
    for key in ["", "a" * 40, "a" * 41, "A", "ab_c", "a-b"]:
        matched = re.fullmatch("[a-z_]{1,40}", key) is not None
        assert (rx.fullmatch(json.dumps(key)) is not None) == (not matched), key


def test_class_tree_is_one_pattern_tree_when_the_class_is_its_language():
    space = KeySpace(["^[a-z_]{1,255}$"], [], None)
    tree = space.class_tree((True,))
    assert tree is not None
    assert "{1,255}" in to_python_regex(tree)  # the pattern's own repetition, no elimination
