"""Independent oracles for regex grammar tests (no formcast automaton code is used here).

``is_viable_prefix`` answers "does some string of the language start with these bytes?" with
the third-party ``regex`` package's partial fullmatch on decoded text. Bytes that end inside a
UTF-8 character are completed with every *representative* code point of the possible range:
membership of any class in the test patterns only changes next to a code point written in the
pattern (or at the ends of the code space / around the surrogate gap / line terminators), so
testing one code point per such interval is exhaustive.
"""

from __future__ import annotations

from functools import cache

import regex

_FIXED_POINTS = (
    0x00,
    0x09,
    0x0A,
    0x0B,
    0x0D,
    0x7F,
    0x80,
    0x7FF,
    0x800,
    0xD7FF,
    0xE000,
    0xFFFF,
    0x10000,
    0x2028,
    0x2029,
    0x10FFFF,
)


@cache
def _category_boundaries(letter: str) -> tuple[int, ...]:
    """Code points where membership in ``regex``'s ``\\<letter>`` class changes."""
    everything = "".join(map(chr, range(0x110000)))
    points = []
    for m in regex.finditer(f"\\{letter}+", everything):
        points += [m.start(), m.end() - 1]
    return tuple(points)


def representatives(pattern: str) -> list[int]:
    """Code points on both sides of every boundary a class in ``pattern`` can have."""
    points: set[int] = set()
    anchors = list(map(ord, pattern)) + list(_FIXED_POINTS)
    for letter in "dws":
        if f"\\{letter}" in pattern.lower():
            anchors += _category_boundaries(letter)
    for cp in anchors:
        points.update((cp - 1, cp, cp + 1))
    return sorted(p for p in points if 0 <= p <= 0x10FFFF and not 0xD800 <= p <= 0xDFFF)


def utf8_prefix_range(tail: bytes) -> tuple[int, int] | None:
    """Code points whose UTF-8 encoding starts with ``tail`` (an incomplete character)."""
    lead = tail[0]
    if 0xC2 <= lead <= 0xDF:
        n, bits, lo_cp, hi_cp = 2, lead & 0x1F, 0x80, 0x7FF
    elif 0xE0 <= lead <= 0xEF:
        n, bits, lo_cp, hi_cp = 3, lead & 0x0F, 0x800, 0xFFFF
    elif 0xF0 <= lead <= 0xF4:
        n, bits, lo_cp, hi_cp = 4, lead & 0x07, 0x10000, 0x10FFFF
    else:
        return None
    if len(tail) >= n or any(not 0x80 <= b <= 0xBF for b in tail[1:]):
        return None
    value = bits
    for b in tail[1:]:
        value = (value << 6) | (b & 0x3F)
    missing = 6 * (n - len(tail))
    lo, hi = max(value << missing, lo_cp), min(((value + 1) << missing) - 1, hi_cp)
    if lo > hi:
        return None
    return lo, hi


def split_incomplete(data: bytes) -> tuple[str, tuple[int, int] | None] | None:
    """``(decoded head, code point range of the unfinished tail or None)``; None if invalid."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    for k in (1, 2, 3):
        if len(data) < k:
            break
        try:
            head = data[:-k].decode("utf-8")
        except UnicodeDecodeError:
            continue
        rng = utf8_prefix_range(data[-k:])
        if rng is not None:
            return head, rng
    return None


def is_viable_prefix(pattern: str, data: bytes, reps: list[int]) -> bool:
    """True iff some string fullmatching ``pattern`` has UTF-8 encoding starting with ``data``."""
    split = split_incomplete(data)
    if split is None:
        return False
    head, rng = split
    if rng is None:
        return regex.fullmatch(pattern, head, partial=True) is not None
    lo, hi = rng
    candidates = [c for c in reps if lo <= c <= hi] + [lo, hi]
    candidates = [c for c in candidates if not 0xD800 <= c <= 0xDFFF]
    return any(regex.fullmatch(pattern, head + chr(c), partial=True) for c in candidates)
