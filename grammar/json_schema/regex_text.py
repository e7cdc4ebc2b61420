"""Regex text combinators used by the JSON Schema compiler.

Every function takes and returns Python-dialect regex *text*. ``None`` stands for the empty
language (an unsatisfiable subschema): combinators propagate it, so ``seq`` with an empty
part is empty and ``alt`` drops empty branches. Only non-capturing groups are emitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Characters that need no grouping to be quantified: a single literal or escape or class.
_ATOM = re.compile(r"^(?:[^\\\[\]()|*+?{}^$.]|\\.|\\u[0-9a-fA-F]{4}|\[(?:[^\]\\]|\\.)*\])$")


def group(rx: str) -> str:
    """Wrap ``rx`` so that a following quantifier applies to all of it."""
    if _ATOM.match(rx) or (rx.startswith("(?:") and _balanced_group(rx)):
        return rx
    return f"(?:{rx})"


# structural tokens: an escape or a whole class (skipped), or one of ``( ) |``; literal runs in
# between are skipped by the regex engine, not by Python (an unterminated class runs to the end)
_STRUCTURAL = re.compile(r"\\.|\[(?:[^\]\\]|\\.|\\\Z)*(?:\]|\Z)|[()|]", re.DOTALL)


def _balanced_group(rx: str) -> bool:
    """True if ``rx`` is one group ``(?:...)`` spanning the whole text."""
    depth = 0
    last = len(rx) - 1
    for match in _STRUCTURAL.finditer(rx):
        c = match.group()
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 1 and match.start() != last:
                return False
            depth -= 1
    return True


def _has_top_level_bar(rx: str) -> bool:
    """True if ``rx`` has a ``|`` outside every group and class."""
    if "|" not in rx:
        return False
    depth = 0
    for match in _STRUCTURAL.finditer(rx):
        c = match.group()
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
    return False


def seq(*parts: str | None) -> str | None:
    """Concatenation; empty if any part is empty."""
    if any(p is None for p in parts):
        return None
    return "".join(f"(?:{p})" if _has_top_level_bar(p) else p for p in parts)  # type: ignore[arg-type]


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
        branches.append(re.escape(head) + (f"(?:{rest})" if _has_top_level_bar(rest) else rest))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "|".join(branches)
    if has_empty:
        return group(body) + "?"
    return body


def _class_escape(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c
