"""Character sets as sorted code-point intervals, and their JSON-string encodings.

A JSON string *content* language is described at the character level (what the decoded
string holds) and then encoded into the JSON text the model writes. formcast writes strings
the way ``json.dumps(..., ensure_ascii=False)`` does: every character raw except ``"`` -> ``\\"``,
``\\`` -> ``\\\\``, the short escapes ``\\b \\f \\n \\r \\t``, and other C0 controls as ``\\u00xx``
(lowercase hex). Surrogate code points (U+D800..U+DFFF) cannot be encoded in UTF-8 text and are
never produced. So every character has exactly one spelling, and lengths count characters.
"""

from __future__ import annotations

from formcast.grammar.json_schema.regex_text import alt, trie_alt

Intervals = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
SURROGATES: Intervals = ((0xD800, 0xDFFF),)
UNIVERSE: Intervals = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))

# ECMA-262 character classes (ASCII \d \w; \s = WhiteSpace + LineTerminator).
ECMA_DIGIT: Intervals = ((0x30, 0x39),)
ECMA_WORD: Intervals = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
ECMA_SPACE: Intervals = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
ECMA_LINE_TERMINATORS: Intervals = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))

_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}


def normalize(intervals: list[tuple[int, int]] | Intervals) -> Intervals:
    """Sort, merge overlapping/adjacent intervals and drop surrogates."""
    merged: list[list[int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return intersect(tuple((a, b) for a, b in merged), UNIVERSE, _normalized=True)


def intersect(a: Intervals, b: Intervals, *, _normalized: bool = False) -> Intervals:
    """Set intersection of two interval lists (both sorted and merged)."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def complement(a: Intervals) -> Intervals:
    """``UNIVERSE`` minus ``a``."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in a:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return intersect(tuple(out), UNIVERSE)


def union(*sets: Intervals) -> Intervals:
    """Set union."""
    return normalize([iv for s in sets for iv in s])


def encode_char(cp: int) -> str:
    """The JSON text of one character (inside the quotes), as ``json.dumps`` writes it."""
    if cp in _SHORT_ESCAPES:
        return "\\" + _SHORT_ESCAPES[cp]
    if cp < 0x20:
        return f"\\u{cp:04x}"
    return chr(cp)


def _class_char(cp: int) -> str:
    """A code point written safely inside a regex character class."""
    c = chr(cp)
    if c.isascii() and (c.isalnum() or c in " _!#%&',:;<=>@`~\"/"):
        return c
    if cp < 0x80:
        return "\\" + c if c in "\\]^-[.*+?(){}|$" else f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def class_regex(intervals: Intervals) -> str | None:
    """A positive character class matching exactly ``intervals`` (raw, no JSON escaping)."""
    if not intervals:
        return None
    if len(intervals) == 1 and intervals[0][0] == intervals[0][1]:
        c = _class_char(intervals[0][0])
        return c if c != " " else " "
    parts = []
    for lo, hi in intervals:
        if lo == hi:
            parts.append(_class_char(lo))
        elif hi == lo + 1:
            parts.append(_class_char(lo) + _class_char(hi))
        else:
            parts.append(f"{_class_char(lo)}-{_class_char(hi)}")
    return "[" + "".join(parts) + "]"


_RAW = complement(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))


def encode_charset(intervals: Intervals) -> str | None:
    """Regex over JSON text for one character of ``intervals``, in formcast's encoding."""
    raw = class_regex(intersect(intervals, _RAW))
    specials = [cp for lo, hi in intersect(intervals, ((0x00, 0x22),)) for cp in range(lo, hi + 1)]
    specials = [cp for cp in specials if cp < 0x20 or cp == 0x22]
    specials += [0x5C] if intersect(intervals, ((0x5C, 0x5C),)) else []
    short = sorted(_SHORT_ESCAPES[cp] for cp in specials if cp in _SHORT_ESCAPES)
    long = [encode_char(cp)[2:] for cp in specials if cp not in _SHORT_ESCAPES]
    branches: list[str | None] = [raw]
    if short:
        escaped = "".join("\\\\" if s == "\\" else s for s in short)
        branches.append("\\\\" + (escaped if len(short) == 1 else f"[{escaped}]"))
    if long:
        tail = trie_alt(long)
        branches.append("\\\\u" + (tail if "|" not in tail else f"(?:{tail})"))  # type: ignore[operator]
    return alt(branches)


JSON_CHAR = encode_charset(UNIVERSE)
