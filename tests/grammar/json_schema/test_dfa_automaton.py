"""A character DFA written as an automaton node where its state-elimination tree is over bounds.

``dfa_to_tree.dfa_automaton`` must describe exactly the language ``dfa_tree`` writes (checked
with ``same_language`` on the byte DFAs of both, for key classes of Hypothesis-drawn patterns
and names), and the schemas that needed it (the keys outside ``^[a-z]{1,250}$``: a chain of
252 states nests too deep for a tree; found refused on the shared splits) compile and agree
with jsonschema token by token on both routes.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.byte_dfa import same_language
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema import complement
from formcast.grammar.json_schema.char_dfa import KeyLanguageTooLarge, minimize, names_dfa, product
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.dfa_to_tree import dfa_automaton, dfa_tree
from formcast.grammar.json_schema.key_classes import KeySpace
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Automaton
from tests.grammar.schema_oracle import validator

_PATTERNS = ["^[a-z]+$", "x", "^a.{0,3}$", "[0-9]{2}", "^é|ß$", '^[^"]{1,4}$', "^\\w{0,5}$"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    patterns=st.lists(st.sampled_from(_PATTERNS), min_size=1, max_size=3, unique=True),
    names=st.lists(st.sampled_from(["a", "ab", "x1", "é", "zz", '"q"', "12"]), max_size=3),
)
def test_automaton_equals_tree(patterns, names):
    space = KeySpace(patterns, names, None)
    for members in space.classes():
        inside = [n for n in space.names if space.members_of(n) == members]
        dfas = space._dfas() + [names_dfa(inside, space.alphabet)]
        keys = minimize(
            product(dfas, lambda a, m=members: a[: len(m)] == m and not a[-1])  # noqa: B023
        )
        tree = dfa_tree(keys, space.alphabet)
        node = dfa_automaton(keys, space.alphabet, "test")
        assert (tree is None) == (node is None)
        if tree is not None:
            assert isinstance(node, Automaton)
            assert same_language(regex_to_dfa(tree), regex_to_dfa(node)), members


def _accepts(dfa, text: bytes) -> bool:
    state = dfa.walk(dfa.start_state, text)
    return state >= 0 and bool(dfa.is_accepting[state])


def test_a_long_chain_is_written_as_an_automaton():
    space = KeySpace(["^[a-z]{1,250}$"], ["name"], None)
    outside = minimize(product(space._dfas(), lambda a: not a[0]))
    with pytest.raises(KeyLanguageTooLarge):
        dfa_tree(outside, space.alphabet)
    dfa = regex_to_dfa(space.class_tree((False,)))
    for key, is_in in [("ABC", True), ("abc", False), ("a" * 250, False), ("a" * 251, True),
                       ("", True), ("a-b", True), ("name", False)]:  # fmt: skip
        assert _accepts(dfa, json.dumps(key).encode()) == is_in, key
    # the complement's text difference falls back the same way
    node = complement.text_difference(parse_regex("[a-z0-9]*"), parse_regex("[a-z]{0,240}"))
    assert isinstance(node, Automaton)
    diff = regex_to_dfa(node)
    assert _accepts(diff, b"a" * 241) and _accepts(diff, b"a1")
    assert not _accepts(diff, b"a" * 240) and not _accepts(diff, b"")


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "patternProperties": {"^[a-z]{1,250}$": {"type": "string"}},
    "additionalProperties": {"type": "integer"},
}
VALUES = [
    {"abc": "x"}, {"abc": 1}, {"ABC": 1}, {"ABC": "x"}, {"a" * 251: 1}, {"a" * 251: "x"},
    {"a" * 250: "x"}, {"name": "n", "Q-1": 2}, {"name": 3},
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_schema_keys_outside_a_long_counted_pattern(smollm2_vocab, smollm2_tokenizer, value):
    oracle = validator(SCHEMA)
    text = json.dumps(value, separators=(",", ":"))
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    for grammar in (
        compile_json_schema(SCHEMA, smollm2_vocab, strict=False, cache=False),
        compile_json_schema_cfg(SCHEMA, smollm2_vocab, strict=False),
    ):
        matcher = grammar.matcher()
        complete = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert complete == oracle.is_valid(value), (text[:40], type(grammar).__name__)
