"""Character sets as sorted code-point intervals, and their JSON-string encodings.

A JSON string *content* language is described at the character level (what the decoded
string holds) and then encoded into the JSON text the model writes. formcast writes strings
the way ``json.dumps(..., ensure_ascii=False)`` does: every character raw except ``"`` -> ``\\"``,
``\\`` -> ``\\\\``, the short escapes ``\\b \\f \\n \\r \\t``, and other C0 controls as ``\\u00xx``
(lowercase hex). Surrogate code points (U+D800..U+DFFF) cannot be encoded in UTF-8 text and are
never produced. So every character has exactly one spelling, and lengths count characters.

The set algebra (``normalize``, ``union``, ``intersect``, ``complement``) is
:mod:`formcast.grammar.regex.char_classes`, re-exported here for the JSON Schema modules.
"""

from __future__ import annotations

from formcast.grammar.regex.char_classes import (
    ANY,
    ECMA_LINE_TERMINATORS,
    ECMA_SPACE,
    MAX_CODE_POINT,
    Ranges,
    category,
    complement,
    intersect,
    normalize,
    union,
)
from formcast.grammar.regex.combinators import alt, chars, literal, one_of, seq, trie_alt
from formcast.grammar.regex.syntax_tree import Node

# the one code point set type and its algebra live in the regex stage (surrogate-free,
# sorted, merged ranges); JSON string content uses them as they are
Intervals = Ranges
UNIVERSE: Intervals = ANY

# ECMA-262 character classes (ASCII \d \w; \s = WhiteSpace + LineTerminator).
ECMA_DIGIT: Intervals = category("d", "ecma")
ECMA_WORD: Intervals = category("w", "ecma")

_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}


def encode_char(cp: int) -> str:
    """The JSON text of one character (inside the quotes), as ``json.dumps`` writes it."""
    if cp in _SHORT_ESCAPES:
        return "\\" + _SHORT_ESCAPES[cp]
    if cp < 0x20:
        return f"\\u{cp:04x}"
    return chr(cp)


_RAW = complement(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))


def encode_charset(intervals: Intervals) -> Node | None:
    """The JSON texts of one character of ``intervals``, in formcast's encoding (a tree over
    JSON text; ``None`` for the empty set)."""
    raw = chars(intersect(intervals, _RAW))
    specials = [cp for lo, hi in intersect(intervals, ((0x00, 0x22),)) for cp in range(lo, hi + 1)]
    specials = [cp for cp in specials if cp < 0x20 or cp == 0x22]
    specials += [0x5C] if intersect(intervals, ((0x5C, 0x5C),)) else []
    short = "".join(sorted(_SHORT_ESCAPES[cp] for cp in specials if cp in _SHORT_ESCAPES))
    long = [encode_char(cp)[2:] for cp in specials if cp not in _SHORT_ESCAPES]
    options: list[Node | None] = [raw]
    if short:
        options.append(seq(literal("\\"), one_of(short)))
    if long:
        options.append(seq(literal("\\u"), trie_alt(long)))
    return alt(options)


JSON_CHAR: Node = encode_charset(UNIVERSE)  # type: ignore[assignment]


__all__ = [
    "ECMA_DIGIT",
    "ECMA_LINE_TERMINATORS",
    "ECMA_SPACE",
    "ECMA_WORD",
    "JSON_CHAR",
    "MAX_CODE_POINT",
    "UNIVERSE",
    "Intervals",
    "complement",
    "encode_char",
    "encode_charset",
    "intersect",
    "normalize",
    "union",
]
