"""formcast.grammar.regex — stage 1: regex text (Python and ECMA dialects) -> syntax tree."""

from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    Anchor,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Repeat,
)

__all__ = [
    "Alternation",
    "Anchor",
    "CharSet",
    "Concat",
    "Lookahead",
    "Node",
    "Repeat",
    "parse_regex",
]
