"""literal_dfa: literals with optional single characters built directly, against the general
path (Thompson NFA, subset construction, Hopcroft) and ``re.fullmatch``."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize, same_language
from formcast.grammar.automata.literal_dfa import literal_dfa, literal_steps
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import strip_anchors

# few distinct characters, so that optional and required steps overlap (a?a, " ? ?")
_CHARS = ["a", "b", " ", '"', ":", "é", "€", "😀"]
_steps = st.lists(
    st.tuples(st.sampled_from(_CHARS), st.booleans()).map(
        lambda step: (step[0], step[1] and step[0].isascii())
    ),
    max_size=10,
)


def _pattern(steps: list[tuple[str, bool]]) -> str:
    return "".join(re.escape(char) + ("?" if optional else "") for char, optional in steps)


def _general(node):
    budget = CompileBudget()
    return minimize(determinize(build_nfa(node, budget), budget), budget)


def _accepts(dfa, data: bytes) -> bool:
    state = dfa.walk(dfa.start_state, data)
    return state >= 0 and bool(dfa.is_accepting[state])


@settings(max_examples=300, deadline=None)
@given(_steps)
def test_same_minimal_automaton_as_the_general_path(steps):
    pattern = _pattern(steps)
    node = strip_anchors(parse_regex(pattern))
    dfa = literal_dfa(node)
    assert dfa is not None
    general = _general(node)
    assert same_language(dfa, general)
    assert dfa.num_states == general.num_states  # minimal as built
    assert minimize(dfa, CompileBudget()).num_states == dfa.num_states
    assert dfa.start_state == 0
    # and re.fullmatch on every string of up to 4 characters of the alphabet
    for size in range(5):
        for chars in itertools.product(_CHARS[:5], repeat=size):
            text = "".join(chars)
            expected = re.fullmatch(pattern, text) is not None
            assert _accepts(dfa, text.encode()) == expected, (pattern, text)


def test_json_schema_terminal_and_non_ascii():
    pattern = ', ?"caf\u00e9\u20ac": ?'
    dfa = literal_dfa(strip_anchors(parse_regex(pattern)))
    assert dfa is not None
    for text in [', "caf\u00e9\u20ac": ', ',"caf\u00e9\u20ac":', ', "caf\u00e9\u20ac":']:
        assert _accepts(dfa, text.encode())
    for text in [',  "caf\u00e9\u20ac":', ',"cafe\u20ac":', ',"caf\u00e9\u20ac"']:
        assert not _accepts(dfa, text.encode())
    assert same_language(dfa, regex_to_dfa(pattern))  # the memoised entry point takes it too


def test_other_patterns_take_the_general_path():
    for pattern in ["[ab]", "a*", "a{2}", "a|b", "(?:ab)?", "\u00e9?", "a+", "."]:
        assert literal_steps(strip_anchors(parse_regex(pattern))) is None, pattern
    assert literal_steps(strip_anchors(parse_regex(""))) == []
    empty = literal_dfa(strip_anchors(parse_regex("")))
    assert empty is not None and empty.num_states == 1 and bool(empty.is_accepting[0])
