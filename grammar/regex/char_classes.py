"""Code point sets: sorted disjoint inclusive ranges, and the regex classes of both dialects.

A set is a tuple of ``(lo, hi)`` pairs, sorted, disjoint, non-adjacent, inclusive, never
containing a surrogate (U+D800..U+DFFF): surrogates have no UTF-8 encoding, so no output text
can contain one. Python-dialect ``\\d \\w \\s`` are taken from ``re`` itself (by scanning every
code point once), so they agree with ``re`` by construction; ECMA-262 classes are spelled out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from formcast.grammar import caches

Ranges = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
EMPTY: Ranges = ()
ANY: Ranges = ((0, SURROGATES[0] - 1), (SURROGATES[1] + 1, MAX_CODE_POINT))

# ECMA-262 WhiteSpace and LineTerminator code points (what ECMA ``\s`` matches).
ECMA_SPACE: Ranges = (
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
ECMA_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sort, merge overlapping/adjacent ranges and cut out the surrogate block."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out: list[tuple[int, int]] = []
    for lo, hi in merged:
        lo, hi = max(lo, 0), min(hi, MAX_CODE_POINT)
        if lo <= SURROGATES[1] and hi >= SURROGATES[0]:  # overlaps the surrogate block
            if lo < SURROGATES[0]:
                out.append((lo, SURROGATES[0] - 1))
            if hi > SURROGATES[1]:
                out.append((SURROGATES[1] + 1, hi))
        elif lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def union(*sets: Ranges) -> Ranges:
    """The union of code point sets."""
    return normalize(r for s in sets for r in s)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """The intersection of two code point sets (both normalised)."""
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


def complement(ranges: Ranges) -> Ranges:
    """Every (non-surrogate) code point not in ``ranges``."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in normalize(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return normalize(out)


def contains(ranges: Ranges, code_point: int) -> bool:
    """True if ``code_point`` lies in one of ``ranges``."""
    return any(lo <= code_point <= hi for lo, hi in ranges)


@cache
def _all_code_points() -> str:
    """Every code point (surrogates included, harmlessly) as one string, for ``re`` scans."""
    return "".join(map(chr, range(MAX_CODE_POINT + 1)))


def _scan(pattern: str, flags: int = 0) -> Ranges:
    """The code points that ``re`` matches with a one-character class pattern."""
    spans = re.finditer(f"(?:{pattern})+", _all_code_points(), flags)
    return normalize((m.start(), m.end() - 1) for m in spans)


@cache
def category(letter: str, dialect: str, is_ascii: bool = False) -> Ranges:
    """The set of ``\\d``, ``\\w``, ``\\s`` (``letter`` in ``"dws"``) in a dialect.

    Python (``re``, str patterns): Unicode ``str.isdecimal`` / ``isalnum() or "_"`` /
    ``isspace`` unless ``is_ascii`` (the ``a`` flag). ECMA-262: ASCII ``\\d``, ``\\w``;
    ``\\s`` is WhiteSpace plus LineTerminator.
    """
    if dialect == "ecma" or is_ascii:
        if letter == "d":
            return ((0x30, 0x39),)
        if letter == "w":
            return normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
        if dialect == "ecma":
            return normalize(ECMA_SPACE)
        return normalize([(0x09, 0x0D), (0x20, 0x20)])
    return _scan("\\" + letter)


def dot(dialect: str, is_dotall: bool) -> Ranges:
    """What ``.`` matches: Python excludes ``\\n``; ECMA excludes every line terminator."""
    if is_dotall:
        return ANY
    if dialect == "ecma":
        return complement(ECMA_LINE_TERMINATORS)
    return complement(((0x0A, 0x0A),))


@cache
def _lower_table() -> dict[int, list[int]]:
    """``re``'s simple lowercase mapping inverted: lowercase code point -> all code points."""
    import _sre  # re's own case tables (Python's simple case mapping)

    groups: dict[int, list[int]] = {}
    for cp in range(MAX_CODE_POINT + 1):
        if _sre.unicode_iscased(cp):
            groups.setdefault(_sre.unicode_tolower(cp), []).append(cp)
    return groups


def ignore_case(ranges: Ranges) -> Ranges:
    """Close a set under ``re``'s IGNORECASE equivalence (Unicode str patterns).

    Single code points use ``re``'s simple case tables (``lower(c) == lower(x)`` plus the
    extra cases ``re`` adds); larger sets are scanned with ``re`` itself, which is exact by
    construction.
    """
    import _sre
    from re import _casefix  # type: ignore[attr-defined]

    if sum(hi - lo + 1 for lo, hi in ranges) <= 8:
        out: list[tuple[int, int]] = []
        for lo, hi in ranges:
            for cp in range(lo, hi + 1):
                out.append((cp, cp))
                if not _sre.unicode_iscased(cp):
                    continue
                low = _sre.unicode_tolower(cp)
                for key in (low, *_casefix._EXTRA_CASES.get(low, ())):
                    out.extend((other, other) for other in _lower_table().get(key, [key]))
        return normalize(out)
    return _scan(to_class_text(ranges), re.IGNORECASE)


def to_class_text(ranges: Ranges, negate: bool = False) -> str:
    """A Python ``re`` character class matching exactly ``ranges`` (``[^]`` form if negated)."""
    parts = []
    for lo, hi in ranges:
        parts.append(_escape(lo) if lo == hi else f"{_escape(lo)}-{_escape(hi)}")
    body = "".join(parts)
    if not body:
        return "[^\\x00-\\U0010ffff]" if not negate else "[\\x00-\\U0010ffff]"
    return f"[{'^' if negate else ''}{body}]"


def _escape(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


caches.register(
    "regex.class_tables", "constant: one per class letter and dialect", category.cache_clear
)
