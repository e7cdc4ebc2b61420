"""DFA grammars are cut down to what the vocabulary's tokens can write (no dead ends).

Found by the compile fuzzer (tests/fuzz): SmolLM2's byte-level vocabulary has no token
holding the bytes 0x04 0x06 0x13 0x14 0x16 0x1d 0xf1 0xf2 (0xf1 / 0xf2 lead every character of
U+40000..U+BFFFF). ``{"const": {"\\U00040000": null}}`` compiled, and its masks allowed
``{"`` and then no token at all: a `DeadEndError` in the engine step, which fails every
request of that step. ``compile_dfa`` now restricts the DFA to the bytes some token holds and
trims it, so every state a mask can lead to still has an allowed token (or accepts), and a
grammar that needs an unwritable byte everywhere is a `GrammarError` at compile time.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from formcast.errors import GrammarError
from formcast.grammar.automata.byte_dfa import restrict_bytes, same_language
from formcast.grammar.index.compile import compile_choice, compile_regex, regex_to_dfa
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema.compile import compile_json_schema


def _every_state_continues(grammar) -> bool:
    """True if every DFA state of ``grammar`` accepts or allows some token."""
    dfa = grammar.dfa
    return all(
        dfa.is_accepting[state] or np.any(grammar.index.row(state) != 0)
        for state in range(dfa.num_states)
    )


def test_restrict_bytes_keeps_the_strings_of_allowed_bytes():
    is_allowed = np.ones(256, dtype=bool)
    is_allowed[0x04] = False
    restricted = restrict_bytes(regex_to_dfa("a\x04c|ab|[\x00-\x05]x"), is_allowed)
    assert same_language(restricted, regex_to_dfa("ab|[\x00-\x03\x05]x"))
    with pytest.raises(GrammarError):
        restrict_bytes(regex_to_dfa("\x04+"), is_allowed)


@pytest.mark.parametrize(
    "schema",
    [
        {"const": {"\U00040000": None}},  # the fuzzer's find
        {"const": "\U000abcde"},
        {"type": "string", "pattern": "^\U00040000$"},
        {"enum": ["\U00040000", "\U000b0000"]},
    ],
)
def test_schema_that_needs_unwritable_bytes_is_refused(smollm2_vocab, schema):
    with pytest.raises(GrammarError, match="no token holds .*0xf[12]"):
        compile_json_schema(schema, smollm2_vocab, cache=False)


def test_regex_and_choice_that_need_unwritable_bytes_are_refused(smollm2_vocab):
    with pytest.raises(GrammarError, match=r"no token holds \(0x04\)"):
        compile_regex("\x04", smollm2_vocab, cache=False)
    with pytest.raises(GrammarError, match="0x1d"):
        compile_choice(["\x1d", "\x1d\x1d"], smollm2_vocab, cache=False)


def test_unwritable_branches_are_never_entered(smollm2_vocab):
    """``a\\x04|b``: before the fix the mask allowed ``a`` and then nothing."""
    grammar = compile_regex("a\x04|b", smollm2_vocab, cache=False)
    allowed = {smollm2_vocab[int(t)] for t in grammar.matcher().allowed_token_ids()}
    assert allowed == {b"b"}
    schema = {
        "type": "object",
        "properties": {"k": {"enum": ["\U00040000", "ok"]}},
        "required": ["k"],
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False, route="regex")
    assert _every_state_continues(grammar)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'{"k":"')
    assert matcher.accept_bytes(b'ok"}') and matcher.is_accepting()


def test_writable_grammars_are_unchanged(smollm2_vocab):
    """A language that only loses strings through transitions no token walks keeps its DFA
    (a JSON string still allows every writable character)."""
    dfa = regex_to_dfa('"[^"\\\\]{0,8}"')
    grammar = compile_regex('"[^"\\\\]{0,8}"', smollm2_vocab, cache=False)
    assert grammar.dfa is dfa
    assert _every_state_continues(grammar)


def test_container_markers_are_kept_when_the_vocabulary_lacks_them():
    """``AnyValueGrammar`` writes nested containers as marker bytes 0x01 / 0x02 in its DFAs;
    they stand for text, so a vocabulary without those bytes must not cut them out."""
    pieces = [bytes([b]) for b in range(256) if b not in (0x01, 0x02)]
    vocab = Vocabulary(
        token_bytes=(*pieces, b""),
        eos_token_ids=frozenset({len(pieces)}),
        special_token_ids=frozenset({len(pieces)}),
        vocab_size=len(pieces) + 1,
        kind="byte_level",
        num_tokenizer_tokens=len(pieces) + 1,
    )
    value = [[{"a": [1]}], 2]
    for layout in ({}, {"indent": 2}):  # indent: markers 0x02^depth 0x01
        grammar = compile_json_schema({"type": "array"}, vocab, cache=False, **layout)
        text = json.dumps(value, indent=2) if layout else json.dumps(value, separators=(",", ":"))
        matcher = grammar.matcher()
        assert type(grammar).__name__ == "AnyValueGrammar"
        assert matcher.accept_bytes(text.encode()) and matcher.is_accepting(), (layout, text)
