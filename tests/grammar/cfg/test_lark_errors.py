"""compile_lark: Lark features and compile-time errors (with position or rule name)."""

from __future__ import annotations

import lark
import pytest

from formcast.errors import GrammarError
from formcast.grammar.cfg.lark_frontend import compile_lark


def accepts(grammar, text: str) -> bool:
    matcher = grammar.matcher()
    return matcher.accept_bytes(text.encode()) and matcher.is_accepting()


FEATURES = r"""
start: greeting ~ 2..3 [TAIL] item*
?greeting: HI | "yo"i
item: "-" NUMBER?
HI: /hi+/i
TAIL: "!"
%import common.NUMBER
%import common.WS
%ignore WS
"""


@pytest.mark.parametrize(
    "text",
    [
        "hi yo",
        "HIII Yo hi",
        "hi hi!",
        "hi hi - 3 - -1.5",
        "hiyo-",
        "  hi  yo  ",
        "hi",
        "hi hi hi hi",
    ],
)
def test_features_agree_with_lark(smollm2_vocab, text):
    grammar = compile_lark(FEATURES, smollm2_vocab)
    parser = lark.Lark(FEATURES, parser="earley", lexer="dynamic_complete")
    try:
        parser.parse(text)
        expected = True
    except lark.exceptions.LarkError:
        expected = False
    assert accepts(grammar, text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('start: "a" (', "line 1"),
        ("start: missing", "missing"),
        ('start: "a"\nunused: "b"', "unused"),
        ('start: "a" loop\nloop: "b" loop', "loop"),
        ("start: A\nA: /(?=a)a/", "A"),
        ('start: "a"', None),
    ],
)
def test_errors_name_the_problem(smollm2_vocab, text, needle):
    if needle is None:
        assert accepts(compile_lark(text, smollm2_vocab), "a")
        return
    with pytest.raises(GrammarError, match=needle):
        compile_lark(text, smollm2_vocab)


def test_malformed_grammar_has_position(smollm2_vocab):
    with pytest.raises(GrammarError) as info:
        compile_lark('start: "a"\n  | ) oops', smollm2_vocab)
    assert info.value.position is not None


def test_lenient_unreachable_warns(smollm2_vocab):
    with pytest.warns(UserWarning, match="unused"):
        grammar = compile_lark('start: "a"\nunused: "b"', smollm2_vocab, lenient=True, cache=False)
    assert accepts(grammar, "a")


def test_left_recursion_and_empty_rules(smollm2_vocab):
    grammar = compile_lark('start: start "x" | e\ne: | "y"', smollm2_vocab)
    for text, expected in [("", True), ("y", True), ("xxx", True), ("yxx", True), ("xy", False)]:
        assert accepts(grammar, text) == expected, text
