"""Surrogates have no UTF-8 encoding: no automaton accepts their (invalid) byte forms.

Found by fuzzing (tests/fuzz): ``GrammarSpec.choice(["\\ud800", "a"])`` compiled a grammar
that allowed the bytes ``ED A0 80`` (a lone surrogate passed through ``surrogatepass``), so
generation could finish with output that is not UTF-8; a JSON Schema ``const`` / ``enum``
value or property name with a lone surrogate did the same. The regex parser already read a
surrogate as the empty set; `byte_sequences` now leaves surrogates out for every caller.
"""

from __future__ import annotations

import pytest

from formcast.errors import GrammarError
from formcast.grammar.automata.utf8_sequences import byte_sequences
from formcast.grammar.index.compile import compile_choice
from formcast.grammar.json_schema.compile import compile_json_schema


def test_byte_sequences_leave_surrogates_out():
    assert byte_sequences(((0xD800, 0xDFFF),)) == []
    assert byte_sequences(((0xD7FF, 0xE000),)) == [
        ((0xED, 0xED), (0x9F, 0x9F), (0xBF, 0xBF)),
        ((0xEE, 0xEE), (0x80, 0x80), (0x80, 0x80)),
    ]


def test_choice_with_a_lone_surrogate(smollm2_vocab):
    grammar = compile_choice(["\ud800", "a"], smollm2_vocab, cache=False)
    allowed = {smollm2_vocab[int(t)] for t in grammar.matcher().allowed_token_ids()}
    assert allowed == {b"a"}
    with pytest.raises(GrammarError, match="matches no string"):
        compile_choice(["\udfff"], smollm2_vocab, cache=False)


def test_schema_values_and_keys_with_a_lone_surrogate(smollm2_vocab):
    grammar = compile_json_schema({"enum": ["\ud800", "a"]}, smollm2_vocab, cache=False)
    matcher = grammar.matcher()
    assert not matcher.accept_bytes(b'"\xed\xa0\x80"')
    assert matcher.accept_bytes(b'"a"') and matcher.is_accepting()
    for schema in (
        {"const": "\ud800"},
        {"type": "object", "properties": {"\ud800": {"type": "null"}}, "required": ["\ud800"]},
    ):
        with pytest.raises(GrammarError):
            compile_json_schema(schema, smollm2_vocab, cache=False)
