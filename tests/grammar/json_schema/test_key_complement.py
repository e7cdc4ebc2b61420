"""The extra-key language of an open object: the automaton and the regex tree are the same
language (minimal DFAs equal up to state numbering), every declared name is refused and
other keys accepted; objects compiled with either form accept and refuse the same texts."""

from __future__ import annotations

import json
import re

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import ByteDFA, trim
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.key_complement import key_complement
from formcast.grammar.regex.syntax_tree import Automaton, subtrees, to_python_regex

NAME_CHARS = st.sampled_from(
    list("abcz_-:$ 09") + ['"', "\\", "\n", "\x01", "\x7f", "é", "€", "😀"]
)
NAMES = st.lists(st.text(NAME_CHARS, min_size=0, max_size=6), min_size=1, max_size=8, unique=True)


def _canonical(dfa) -> tuple:
    """The DFA renumbered breadth first from its start over bytes 0..255 (equal for equal
    minimal DFAs)."""
    rows = dfa.transitions[:, dfa.byte_to_class]  # (S, 256)
    order = {dfa.start_state: 0}
    queue = [dfa.start_state]
    for state in queue:
        for nxt in rows[state].tolist():
            if nxt >= 0 and nxt not in order:
                order[nxt] = len(order)
                queue.append(nxt)
    table = tuple(
        tuple(order[n] if n >= 0 else -1 for n in rows[state].tolist()) for state in queue
    )
    return table, tuple(bool(dfa.is_accepting[state]) for state in queue)


@given(NAMES)
@settings(max_examples=150, deadline=None)
# a name end and an inner node with the same continuation ("a" and "ca" both go on with
# "b" only): the merge must keep them apart
@example(["ab", "a", "cab"])
@example(["a", "b", "xa", "xb", "ya"])
def test_the_automaton_and_the_tree_are_one_language(names):
    automaton = key_complement(names, None, as_automaton=True)
    tree = key_complement(names, None, as_automaton=False)
    assert any(isinstance(node, Automaton) for node in subtrees(automaton))
    assert not any(isinstance(node, Automaton) for node in subtrees(tree))
    assert _canonical(regex_to_dfa(automaton)) == _canonical(regex_to_dfa(tree))


@given(NAMES)
@settings(max_examples=150, deadline=None)
def test_the_automaton_is_built_minimal_and_trimmed(names):
    """The bottom-up merge of trie nodes is the minimisation (no state merges after it) and
    every state is reachable and reaches acceptance (the Automaton invariant)."""
    node = key_complement(names, None, as_automaton=True)
    (automaton,) = [part for part in subtrees(node) if isinstance(part, Automaton)]
    table = automaton.transitions().copy()
    accepting = np.frombuffer(automaton.accepting, dtype=np.uint8).astype(bool)
    trimmed = trim(table, automaton.classes().copy(), accepting)
    assert trimmed.num_states == len(accepting)
    assert minimize(trimmed, CompileBudget()).num_states == len(accepting)
    assert _canonical(trimmed) == _canonical(ByteDFA(table, automaton.classes(), accepting))


@given(NAMES, st.lists(st.text(NAME_CHARS, max_size=7), max_size=10))
@settings(max_examples=100, deadline=None)
def test_declared_names_are_refused_and_other_keys_accepted(names, others):
    dfa = regex_to_dfa(key_complement(names, None))
    pattern = re.compile(to_python_regex(key_complement(names, None, as_automaton=False)))

    def accepts(key: str) -> bool:
        state = dfa.walk(dfa.start_state, json.dumps(key, ensure_ascii=False).encode("utf-8"))
        return state >= 0 and bool(dfa.is_accepting[state])

    for key in names + others:
        text = json.dumps(key, ensure_ascii=False)
        assert accepts(key) == (key not in names) == bool(pattern.fullmatch(text)), key


def test_open_objects_compile_the_same_either_way(smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "idx": {"type": "string"},
            'é"q': {"type": "null"},
        },
        "required": ["id"],
        "additionalProperties": {"type": "boolean"},
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False, route="regex")
    pattern = re.compile(json_schema_to_regex(schema))  # the tree form (regex text)
    texts = [
        '{"id":1}',
        '{"id":1,"idx":"a","é\\"q":null}',
        '{"id":1,"i":true}',
        '{"id":1,"idxx":false}',
        '{"id":1,"é\\"":true}',
        '{"id":1,"id":true}',  # a declared name as an extra key
        '{"id":1,"idx":true}',
        '{"id":1,"é\\"q":true}',
        '{"id":1,"":true,"\\u0001":false}',
    ]
    for text in texts:
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        is_accepted = all(matcher.accept_token(t) for t in ids) and matcher.is_accepting()
        assert is_accepted == bool(pattern.fullmatch(text)), text
    assert not pattern.fullmatch('{"id":1,"id":true}') and pattern.fullmatch('{"id":1,"i":true}')
