"""Context-free grammars are cut down to what the vocabulary's tokens can write.

Found by fuzzing (tests/fuzz): SmolLM2's vocabulary has no token holding the bytes 0x04 0x06
0x13 0x14 0x16 0x1d 0xf1 0xf2 (0xf1 / 0xf2 lead U+40000..U+BFFFF). ``start: "a" "\\U00040000"``
compiled, its first mask allowed ``a`` and the next one no token at all: a `DeadEndError` in
the engine step, which fails every request of that step. ``prepare_grammar`` now restricts each
terminal to the writable bytes and drops the rules that need a terminal with no writable
string; a grammar left with no sentence is a `GrammarError` at compile time.
"""

from __future__ import annotations

import pytest

from formcast.errors import GrammarError
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.json_schema.compile import compile_json_schema


def _allowed_bytes(matcher, vocab) -> set[bytes]:
    return {vocab[int(t)] for t in matcher.allowed_token_ids() if int(t) not in vocab.eos_token_ids}


@pytest.mark.parametrize(
    "text", ['start: "a" "\U00040000"', 'start: "a" x\nx: /\\x04+/', 'start: ("a" | "b") "\x1d"']
)
def test_grammar_that_needs_unwritable_bytes_is_refused(smollm2_vocab, text):
    with pytest.raises(GrammarError, match="no token holds"):
        compile_lark(text, smollm2_vocab, cache=False)


def test_rules_with_unwritable_terminals_are_never_entered(smollm2_vocab):
    """Before: the first mask allowed ``a``, after which no token fits."""
    grammar = compile_lark('start: "a" x | "b"\nx: /\\x04/', smollm2_vocab, cache=False)
    assert _allowed_bytes(grammar.matcher(), smollm2_vocab) == {b"b"}


def test_pruned_rules_are_not_reported_unreachable(smollm2_vocab):
    """``x`` and ``y`` become unreachable only because ``start: x`` needs U+40000."""
    text = 'start: x | "c"\nx: "a" "\U00040000" y\ny: "q"'
    matcher = compile_lark(text, smollm2_vocab, cache=False).matcher()
    assert _allowed_bytes(matcher, smollm2_vocab) == {b"c"}
    with pytest.raises(GrammarError, match="unreachable"):  # a rule unreachable as written
        compile_lark('start: "c"\nx: "a"', smollm2_vocab, cache=False)


def test_writable_parts_of_terminals_and_rules_are_kept(smollm2_vocab):
    """The cut removes only what cannot be written."""
    matcher = compile_lark('start: "a" /[\\x04b]/', smollm2_vocab, cache=False).matcher()
    assert matcher.accept_bytes(b"a") and _allowed_bytes(matcher, smollm2_vocab) == {b"b"}
    matcher = compile_lark('start: "a"+\n%ignore /\\x04/', smollm2_vocab, cache=False).matcher()
    assert matcher.accept_bytes(b"aa") and matcher.is_accepting()
    grammar = compile_lark('start: "a" x | "a" "b"\nx: /\\x04/', smollm2_vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"a") and _allowed_bytes(matcher, smollm2_vocab) == {b"b"}


def test_recursive_schema_with_an_unwritable_enum_value(smollm2_vocab):
    """The structural (context-free) route of JSON Schema: the enum keeps its writable value."""
    node = {
        "type": "object",
        "properties": {"k": {"enum": ["\U00040000", "ok"]}, "next": {"$ref": "#/$defs/n"}},
        "required": ["k"],
    }
    schema = {"$defs": {"n": node}, "$ref": "#/$defs/n"}
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert type(grammar).__name__ == "CompiledCFG"
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'{"k":"')
    allowed = _allowed_bytes(matcher, smollm2_vocab)
    assert allowed and all(piece.startswith(b"o") for piece in allowed)
    with pytest.raises(GrammarError, match="no token holds"):
        node["properties"]["k"] = {"const": "\U00040000"}
        compile_json_schema(schema, smollm2_vocab, cache=False)
