"""An alternation of many literals (an enum) is built as the trie of its reversed options.

Oracles: the trie against the brute-force set of the words' prefixes; the NFA against the
option-by-option build (``TRIE_MIN_OPTIONS`` raised past any alternation): the same language,
which is also that of ``re.fullmatch`` on the tree's own Python regex, and where every option
is a literal, the same number of subset-construction states before minimisation (the same
suffix-shared NFA, hence the same state budget).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata import nfa_builder
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize, same_language
from formcast.grammar.automata.literal_trie import literal_bytes, trie
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.regex.combinators import literal, one_of, repeat, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Alternation, Concat, to_python_regex

# a few ASCII bytes, a two-byte and a three-byte code point: shared prefixes and suffixes
_TEXTS = st.text(alphabet="abc\u00e9\u20ac", max_size=5)


@given(st.lists(st.binary(max_size=4).map(lambda b: bytes(x % 3 for x in b)), max_size=12))
@settings(max_examples=200, deadline=None)
def test_the_trie_holds_each_prefix_once(words):
    parent, byte, node_of = trie(words)
    prefixes = [b""]
    for k in range(1, len(parent)):
        assert parent[k] < k  # a parent is numbered before its child
        prefixes.append(prefixes[parent[k]] + bytes([byte[k]]))
    expected = {word[:end] for word in words for end in range(len(word) + 1)} | {b""}
    assert len(prefixes) == len(expected) and set(prefixes) == expected
    assert [prefixes[k] for k in node_of.tolist()] == words


def test_literal_bytes_reads_code_points_and_refuses_classes():
    assert literal_bytes(literal('"caf\u00e9"')) == '"caf\u00e9"'.encode()
    assert literal_bytes(Concat(())) == b""
    assert literal_bytes(seq(literal("a"), one_of("xy"))) is None
    assert literal_bytes(repeat(literal("a"), 0, 2)) is None


def _dfas(tree, monkeypatch):
    """(subset construction, minimal DFA) of ``tree``, built with and without the trie."""
    out = []
    for min_options in (nfa_builder.TRIE_MIN_OPTIONS, 10**9):
        monkeypatch.setattr(nfa_builder, "TRIE_MIN_OPTIONS", min_options)
        subsets = determinize(build_nfa(tree, CompileBudget()), CompileBudget())
        out.append((subsets, minimize(subsets, CompileBudget())))
    return out


@given(
    words=st.lists(_TEXTS, min_size=nfa_builder.TRIE_MIN_OPTIONS, max_size=30),
    others=st.lists(st.sampled_from(["[ab]", "c+", "(?:ab)?"]), max_size=2),
    suffix=st.sampled_from(["", "a", "\u00e9!"]),
)
@settings(max_examples=60, deadline=None)
def test_an_enum_builds_the_same_automaton_as_option_by_option(words, others, suffix):
    monkeypatch = pytest.MonkeyPatch()
    try:
        options = tuple(literal(w) if w else Concat(()) for w in words)
        options += tuple(parse_regex(o, "python") for o in others)
        tree = seq(Alternation(options), literal(suffix)) if suffix else Alternation(options)
        (subsets, dfa), (plain_subsets, plain_dfa) = _dfas(tree, monkeypatch)
    finally:
        monkeypatch.undo()
    if not others:  # (another option may share a suffix's state with a literal, built plainly)
        assert subsets.num_states == plain_subsets.num_states
    assert same_language(dfa, plain_dfa)
    pattern = re.compile(to_python_regex(tree))
    for text in set(words) | {w + suffix for w in words} | {"", "ab", "c", "\u00e9"}:
        data = text.encode()
        state = 0
        for b in data:
            state = dfa.step(state, b) if state >= 0 else -1
        accepted = state >= 0 and bool(dfa.is_accepting[state])
        assert accepted == bool(pattern.fullmatch(text)), text
