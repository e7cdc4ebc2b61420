"""framed_automaton_dfa: an Automaton node between literal characters, built directly, is the
language the general path (NFA, subset construction, minimisation) builds, and the key
complement it exists for accepts exactly the keys that are no declared name."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize, same_language
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa, framed_automaton_dfa
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.json_schema.key_complement import key_complement
from formcast.grammar.regex.combinators import literal, seq, star
from formcast.grammar.regex.syntax_tree import Automaton, CharSet

NAMES = st.lists(
    st.text(alphabet=st.sampled_from('ab"\\é\n_'), min_size=0, max_size=5),
    min_size=1,
    max_size=6,
    unique=True,
)


def _general(node):
    budget = CompileBudget()
    return minimize(determinize(build_nfa(node, budget), budget), budget)


def _accepts(dfa, data: bytes) -> bool:
    state = dfa.start_state
    for byte in data:
        state = dfa.step(state, byte)
        if state < 0:
            return False
    return bool(dfa.is_accepting[state])


def _automaton(pattern: str) -> Automaton:
    dfa = regex_to_dfa(pattern)
    return Automaton.of(dfa.transitions, dfa.byte_to_class, dfa.is_accepting, pattern)


@given(NAMES, st.lists(st.text(alphabet=st.sampled_from('ab"\\é\n_'), max_size=6), max_size=12))
@settings(max_examples=150, deadline=None)
def test_key_complement_built_directly_is_the_general_language(names, others):
    node = key_complement(names, seq(literal('"'), star(JSON_CHAR), literal('"')))
    framed = framed_automaton_dfa(node, CompileBudget())
    assert framed is not None
    general = _general(node)
    assert same_language(framed, general)
    assert framed.num_states == general.num_states  # minimal as built (no minimisation run)
    # the oracle: a key is accepted iff it is no declared name (formcast writes each string
    # one way: json.dumps)
    for text in [*names, *others, *(name[:-1] for name in names), *(n + "a" for n in names)]:
        key = json.dumps(text, ensure_ascii=False).encode("utf-8")
        assert _accepts(framed, key) == (text not in names), text


def test_prefix_only_suffix_only_and_multibyte_literals():
    body = _automaton("[a-c]+")
    for node in (
        seq(literal("é:"), body),  # prefix only, a two-byte character
        seq(body, literal("→")),  # suffix only, a three-byte character
        seq(literal("x"), body, literal("yz")),
    ):
        framed = framed_automaton_dfa(node, CompileBudget())
        assert framed is not None
        assert same_language(framed, _general(node))


def test_not_built_where_the_automaton_reads_the_suffix_itself():
    # a* then "a": an accepting state of a* reads "a" itself, the concatenation as laid out
    # would not be deterministic; the general path builds it
    node = seq(_automaton("a*"), literal("a"))
    assert framed_automaton_dfa(node, CompileBudget()) is None
    # other shapes are not framed automata at all
    assert framed_automaton_dfa(seq(literal("a"), star(literal("b"))), CompileBudget()) is None
    two = seq(_automaton("a"), literal("-"), _automaton("b"))
    assert framed_automaton_dfa(two, CompileBudget()) is None
    lone = seq(CharSet(((0xD800, 0xD800),), -1), _automaton("a"))  # no UTF-8 bytes
    assert framed_automaton_dfa(lone, CompileBudget()) is None


def test_a_prefix_state_equal_to_an_automaton_state_is_merged():
    # "b" then (ab)*: the prefix state reads "b" into the start, and the automaton's state
    # after "a" reads "b" back to it: one language, so the framed DFA is minimised (2 states)
    node = seq(literal("b"), _automaton("(ab)*"))
    framed = framed_automaton_dfa(node, CompileBudget())
    assert framed is not None and framed.num_states == 2
    assert same_language(framed, _general(node))


@given(
    st.sampled_from(
        ["(ab)*", "a+", "[ab]*c", "b(ab)*", "(a|bb)*", "(ba)+", "a(ba)*b", "x", "(ab|a)*"]
    ),
    st.text(alphabet=st.sampled_from("abxé"), max_size=3),
    st.text(alphabet=st.sampled_from("abyé"), max_size=3),
)
@settings(max_examples=200, deadline=None)
def test_framed_automata_are_minimal_and_the_general_language(pattern, prefix, suffix):
    parts = [literal(prefix)] if prefix else []
    parts.append(_automaton(pattern))
    parts += [literal(suffix)] if suffix else []
    node = seq(*parts)
    framed = framed_automaton_dfa(node, CompileBudget())
    if framed is None:  # an accepting state reads the suffix's first byte: the general path
        return
    general = _general(node)
    assert same_language(framed, general)
    assert framed.num_states == general.num_states
