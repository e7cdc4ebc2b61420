"""``intersection.intersect`` (the automaton of ``(?=A)R``) against brute force.

Over finite languages every string can be listed, so both answers have exact oracles: the
language of the DFA is ``L(A) & L(R)``, and the two languages are prefix-free relative to each
other iff no string of one is a proper prefix of a string of the other. The languages come
from random regexes over a few bytes (Python's ``re`` lists their strings), with bounded
repetitions so they stay finite.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.intersection import intersect
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.regex.parser import parse_regex

ALPHABET = "ab\xe9"  # one two-byte UTF-8 character: classes that split inside a character
MAX_LEN = 6  # characters: the regexes drawn match only strings up to this long


def _regexes() -> st.SearchStrategy[tuple[str, int]]:
    """``(regex, the length of its longest string)``, the longest at most ``MAX_LEN``."""
    atoms = st.sampled_from([("a", 1), ("b", 1), ("\xe9", 1), ("[ab]", 1), ("(?:ab|b)", 2)])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: (p[0][0] + p[1][0], p[0][1] + p[1][1])),
            st.tuples(inner, inner).map(
                lambda p: (f"(?:{p[0][0]}|{p[1][0]})", max(p[0][1], p[1][1]))
            ),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(
                lambda t: (
                    f"(?:{t[0][0]}){{{min(t[1], t[2])},{max(t[1], t[2])}}}",
                    t[0][1] * max(t[1], t[2]),
                )
            ),
        )

    return st.recursive(atoms, extend, max_leaves=4).filter(lambda r: r[1] <= MAX_LEN)


def _strings(rx: str) -> set[str]:
    return {
        "".join(chars)
        for n in range(MAX_LEN + 1)
        for chars in itertools.product(ALPHABET, repeat=n)
        if re.fullmatch(rx, "".join(chars))
    }


def _language(dfa) -> set[str]:
    out = set()
    for n in range(MAX_LEN + 1):
        for chars in itertools.product(ALPHABET, repeat=n):
            text = "".join(chars)
            state = dfa.walk(dfa.start_state, text.encode("utf-8"))
            if state >= 0 and dfa.is_accepting[state]:
                out.add(text)
    return out


def _is_prefix_free(left: set[str], right: set[str]) -> bool:
    return not any(a != b and (b.startswith(a) or a.startswith(b)) for a in left for b in right)


@settings(max_examples=150, deadline=None)
@given(_regexes(), _regexes())
def test_intersect_is_the_common_language_and_decides_prefix_freedom(a, b):
    (rx_a, _), (rx_b, _) = a, b
    left, right = _strings(rx_a), _strings(rx_b)  # every string: none is over MAX_LEN
    budget = CompileBudget()
    nfa_a = build_nfa(parse_regex(rx_a, "python"), budget)
    nfa_b = build_nfa(parse_regex(rx_b, "python"), budget)
    dfa, is_prefix_free = intersect(nfa_a, nfa_b, budget)
    common = left & right
    if dfa is None:
        assert not common
    else:
        assert _language(dfa) == common
    if left and right:
        assert is_prefix_free == _is_prefix_free(left, right)
    else:  # a side matches nothing: so does the group, whatever the lookahead
        assert dfa is None


def test_guard_longer_than_the_rest_is_a_proper_prefix_case():
    budget = CompileBudget()
    nfa_a = build_nfa(parse_regex("a{1,3}", "python"), budget)
    nfa_b = build_nfa(parse_regex("a{2}", "python"), budget)
    dfa, is_prefix_free = intersect(nfa_a, nfa_b, budget)
    assert _language(dfa) == {"aa"}
    assert not is_prefix_free  # "a" (of the guard) is a proper prefix of "aa"


def test_only_the_product_counts_against_the_state_budget():
    """A guard of 200 counted characters has ~200 DFA states of its own; with a 4-character
    body the product has a handful, and the budget bounds the product alone."""
    from formcast.grammar.index.compile import regex_to_dfa

    pattern = '"(?:(?=(?:[^"\\\\]|\\\\.){0,200}")(?:ab?c?)")'
    dfa = regex_to_dfa(pattern, max_states=50)
    for text in ['"a"', '"ab"', '"abc"', '"ac"']:
        state = dfa.walk(dfa.start_state, text.encode())
        assert state >= 0 and dfa.is_accepting[state], text
    for text in ['""', '"b"', '"abcc"']:
        state = dfa.walk(dfa.start_state, text.encode())
        assert state < 0 or not dfa.is_accepting[state], text
