"""Regex text combinators used by the JSON Schema compiler.

Every function takes and returns Python-dialect regex *text*. ``None`` stands for the empty
language (an unsatisfiable subschema): combinators propagate it, so ``seq`` with an empty
part is empty and ``alt`` drops empty branches. Only non-capturing groups are emitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# Characters that need no grouping to be quantified: a single literal or escape or class.
_ATOM = re.compile(r"^(?:[^\\\[\]()|*+?{}^$.]|\\.|\\u[0-9a-fA-F]{4}|\[(?:[^\]\\]|\\.)*\])$")


def group(rx: str) -> str:
    """Wrap ``rx`` so that a following quantifier applies to all of it."""
    if _ATOM.match(rx) or (rx.startswith("(?:") and _balanced_group(rx)):
        return rx
    return f"(?:{rx})"


def _structure(rx: str) -> Iterator[tuple[int, str, int]]:
    """(index, char, depth) of every character of ``rx`` outside classes and escapes.

    ``depth`` counts the groups open *before* the character, so a ``)`` closing a top-level
    group is reported with depth 1.
    """
    depth = 0
    in_class = False
    i = 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        else:
            yield i, c, depth
            depth += (c == "(") - (c == ")")
        i += 1


def _balanced_group(rx: str) -> bool:
    """True if ``rx`` is one group ``(?:...)`` spanning the whole text."""
    return all(not (c == ")" and depth == 1 and i != len(rx) - 1) for i, c, depth in _structure(rx))


def seq(*parts: str | None) -> str | None:
    """Concatenation; empty if any part is empty."""
    if any(p is None for p in parts):
        return None
    return "".join(p if "|" not in _top_level(p) else f"(?:{p})" for p in parts)  # type: ignore[arg-type]


def _top_level(rx: str) -> str:
    """The characters of ``rx`` outside every group and class (to spot top-level ``|``)."""
    return "".join(c for _, c, depth in _structure(rx) if depth == 0 and c not in "()")


def alt(branches: Iterable[str | None]) -> str | None:
    """Union; empty branches are dropped, duplicates removed (first occurrence kept)."""
    kept: list[str] = []
    seen: set[str] = set()
    for b in branches:
        if b is not None and b not in seen:
            seen.add(b)
            kept.append(b)
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return "|".join(kept)


def opt(rx: str | None) -> str:
    """Zero or one occurrence; ``opt(None)`` is the empty string."""
    if rx is None or rx == "":
        return ""
    return group(rx) + "?"


def repeat(rx: str | None, lo: int, hi: int | None) -> str | None:
    """``rx{lo,hi}`` (``hi=None``: unbounded); empty language repeated zero times is ``""``."""
    if hi is not None and hi < lo:
        return None
    if rx is None:
        return "" if lo == 0 else None
    if rx == "" or hi == 0:
        return ""
    g = group(rx)
    if (lo, hi) == (0, None):
        return g + "*"
    if (lo, hi) == (1, None):
        return g + "+"
    if (lo, hi) == (0, 1):
        return g + "?"
    if (lo, hi) == (1, 1):
        return rx
    if hi is None:
        return f"{g}{{{lo},}}"
    if lo == hi:
        return f"{g}{{{lo}}}"
    return f"{g}{{{lo},{hi}}}"


def literal(text: str) -> str:
    """Regex matching exactly ``text``."""
    return re.escape(text)


def trie_alt(words: Iterable[str]) -> str | None:
    """Union of literal ``words`` factored as a trie (small DFA, short regex)."""
    uniq = sorted(set(words))
    if not uniq:
        return None
    return _trie(uniq)


def _trie(words: list[str]) -> str:
    has_empty = "" in words
    by_head: dict[str, list[str]] = {}
    for w in words:
        if w:
            by_head.setdefault(w[0], []).append(w[1:])
    leaves = [h for h, tails in by_head.items() if tails == [""]]
    branches = []
    if len(leaves) > 1:
        branches.append("[" + "".join(_class_escape(h) for h in sorted(leaves)) + "]")
    for head, tails in by_head.items():
        if len(leaves) > 1 and head in leaves:
            continue
        rest = _trie(tails)
        branches.append(re.escape(head) + (rest if "|" not in _top_level(rest) else f"(?:{rest})"))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "|".join(branches)
    if has_empty:
        return group(body) + "?"
    return body


def _class_escape(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c
