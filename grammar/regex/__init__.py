"""formcast.grammar.regex — stage 1: regex text (Python and ECMA dialects) -> syntax tree; tree
combinators for grammars that build expressions directly (JSON Schema)."""

from formcast.grammar.regex.combinators import alt, literal, opt, repeat, seq, star, trie_alt
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    Anchor,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Reference,
    Repeat,
    to_python_regex,
)

__all__ = [
    "Alternation",
    "Anchor",
    "CharSet",
    "Concat",
    "Lookahead",
    "Node",
    "Reference",
    "Repeat",
    "alt",
    "literal",
    "opt",
    "parse_regex",
    "repeat",
    "seq",
    "star",
    "to_python_regex",
    "trie_alt",
]
