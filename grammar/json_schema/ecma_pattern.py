"""ECMA-262 ``pattern`` (and formcast's own format regexes) -> JSON-string content regex.

A JSON Schema ``pattern`` is ECMA-262 and *unanchored*: a string is valid if some substring
matches. It is parsed with Python's regex parser (the syntax of the constructs we accept is the
same) and every node is then given its ECMA meaning: ``\\d`` = ``[0-9]``, ``\\w`` =
``[A-Za-z0-9_]``, ``\\s`` = the ECMA WhiteSpace and LineTerminator set, ``.`` = any character but
``\\n \\r \\u2028 \\u2029``, ``$`` = end of input only. Lookarounds, backreferences, word
boundaries, inline flags, ``\\A``/``\\Z`` and possessive/atomic constructs are refused.
The result is a list of ``Branch`` (a sequence of nodes plus whether each end is anchored);
unanchored ends get ``Σ*`` padding. The encoder then writes Python-dialect regex text over the
JSON text of the string (see ``schema_charset``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from formcast.grammar.json_schema import charset
from formcast.grammar.json_schema.regex_text import alt, group, repeat

try:  # Python >= 3.11
    from re import _constants as sre_c  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

INF = None  # unbounded width / repetition


class PatternRefused(ValueError):
    """A pattern construct has no exact finite-automaton (or no ECMA-compatible) meaning."""


# A synthetic node: one character from a set (used for Σ padding and length pushing).
_ANYCHAR = ("ANYCHAR", None)

_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z_])")


@dataclass
class Branch:
    """One alternative of a pattern: ``nodes`` plus anchoring at either end."""

    nodes: list
    start_anchored: bool
    end_anchored: bool


def parse_ecma(pattern: str) -> list[Branch]:
    """Parse an ECMA-262 pattern into anchored branches (raises ``PatternRefused``)."""
    if "\\k<" in pattern:
        raise PatternRefused("backreference \\k<name> cannot be expressed by an automaton")
    if "[^]" in pattern or "[]" in pattern:
        raise PatternRefused("ECMA empty classes [] / [^] are not supported")
    text = _NAMED_GROUP.sub("(?P<", pattern)
    try:
        with warnings.catch_warnings():
            # "Possible nested set" ([[, --, && in a class): a future Python syntax; today
            # (and in ECMA-262) these characters are literals, which is what we compile
            warnings.simplefilter("ignore", FutureWarning)
            parsed = sre_parse.parse(text)
    except re.error as exc:
        raise PatternRefused(f"pattern does not parse: {exc}") from exc
    if parsed.state.flags & ~(sre_c.SRE_FLAG_UNICODE):
        raise PatternRefused("inline flags such as (?i) are not ECMA-262 syntax")
    branches = _branches(list(parsed.data), False, False)
    for b in branches:
        encode(b.nodes)  # refuses lookarounds, backreferences, flags, ... up front
    return branches


def parse_python(pattern: str) -> list[Branch]:
    """Parse one of formcast's own (fully anchored, class-explicit) format regexes."""
    return _branches(list(sre_parse.parse(pattern).data), True, True)


def _branches(nodes: list, start: bool, end: bool) -> list[Branch]:
    if nodes and nodes[0] == (sre_c.AT, sre_c.AT_BEGINNING):
        nodes, start = nodes[1:], True
    if nodes and nodes[-1] == (sre_c.AT, sre_c.AT_END):
        nodes, end = nodes[:-1], True
    if len(nodes) == 1:
        op, av = nodes[0]
        if op is sre_c.BRANCH and _has_anchor(nodes):
            out: list[Branch] = []
            for sub in av[1]:
                out += _branches(list(sub.data), start, end)
            return out
        if op is sre_c.SUBPATTERN and not av[1] and not av[2] and _has_anchor(nodes):
            return _branches(list(av[3].data), start, end)
    if _has_anchor(nodes):
        raise PatternRefused("anchors ^ / $ are only supported at the ends of alternatives")
    return [Branch(nodes, start, end)]


def _has_anchor(nodes: list) -> bool:
    for op, av in nodes:
        if op is sre_c.AT:
            return True
        if op is sre_c.BRANCH and any(_has_anchor(list(s.data)) for s in av[1]):
            return True
        if op is sre_c.SUBPATTERN and _has_anchor(list(av[3].data)):
            return True
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) and _has_anchor(list(av[2].data)):
            return True
    return False


def width(nodes: list) -> tuple[int, int | None]:
    """Minimum and maximum number of characters ``nodes`` match (``None`` = unbounded)."""
    lo, hi = 0, 0
    for node in nodes:
        nlo, nhi = _node_width(node)
        lo += nlo
        hi = None if hi is None or nhi is None else hi + nhi
    return lo, hi


def _node_width(node: tuple) -> tuple[int, int | None]:
    op, av = node
    if op in (sre_c.LITERAL, sre_c.NOT_LITERAL, sre_c.ANY, sre_c.IN) or op == "ANYCHAR":
        return 1, 1
    if op is sre_c.AT:
        return 0, 0
    if op is sre_c.SUBPATTERN:
        return width(list(av[3].data))
    if op is sre_c.BRANCH:
        ws = [width(list(s.data)) for s in av[1]]
        his = [w[1] for w in ws]
        return min(w[0] for w in ws), None if None in his else max(his)  # type: ignore[type-var]
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, "REPEAT"):
        lo, hi, sub = av
        slo, shi = width(list(sub.data) if hasattr(sub, "data") else sub)
        rhi = None if hi is None or hi == sre_c.MAXREPEAT else hi
        return lo * slo, (None if rhi is None or shi is None else rhi * shi)
    raise PatternRefused(f"unsupported regex construct {op}")


def charset_of(node: tuple) -> charset.Intervals:
    """The set of characters a single-character node matches (ECMA meaning)."""
    op, av = node
    if op == "ANYCHAR":
        return charset.UNIVERSE
    if op is sre_c.LITERAL:
        return charset.normalize([(av, av)])
    if op is sre_c.NOT_LITERAL:
        return charset.complement(charset.normalize([(av, av)]))
    if op is sre_c.ANY:
        return charset.complement(charset.ECMA_LINE_TERMINATORS)
    if op is sre_c.IN:
        negate = False
        parts: list[tuple[int, int]] = []
        for iop, iav in av:
            if iop is sre_c.NEGATE:
                negate = True
            elif iop is sre_c.LITERAL:
                parts.append((iav, iav))
            elif iop is sre_c.RANGE:
                parts.append(iav)
            elif iop is sre_c.CATEGORY:
                parts += _category(iav)
            else:
                raise PatternRefused(f"unsupported class item {iop}")
        s = charset.normalize(parts)
        return charset.complement(s) if negate else s
    raise PatternRefused(f"not a single-character node: {op}")


def _category(cat: object) -> charset.Intervals:
    table = {
        sre_c.CATEGORY_DIGIT: (charset.ECMA_DIGIT, False),
        sre_c.CATEGORY_NOT_DIGIT: (charset.ECMA_DIGIT, True),
        sre_c.CATEGORY_WORD: (charset.ECMA_WORD, False),
        sre_c.CATEGORY_NOT_WORD: (charset.ECMA_WORD, True),
        sre_c.CATEGORY_SPACE: (charset.ECMA_SPACE, False),
        sre_c.CATEGORY_NOT_SPACE: (charset.ECMA_SPACE, True),
    }
    if cat not in table:
        raise PatternRefused(f"unsupported category {cat}")
    base, negate = table[cat]
    return charset.complement(base) if negate else base


def encode(nodes: list) -> str | None:
    """Regex over JSON text for the character-level sequence ``nodes``."""
    out: list[str] = []
    for node in nodes:
        rx = _encode_node(node)
        if rx is None:
            return None
        out.append(rx if "|" not in rx or rx.startswith("(?:") and _single(rx) else f"(?:{rx})")
    return "".join(out)


def _single(rx: str) -> bool:
    return group(rx) == rx


def _encode_node(node: tuple) -> str | None:
    op, av = node
    if op in (sre_c.LITERAL, sre_c.NOT_LITERAL, sre_c.ANY, sre_c.IN) or op == "ANYCHAR":
        return charset.encode_charset(charset_of(node))
    if op is sre_c.SUBPATTERN:
        if av[1] or av[2]:
            raise PatternRefused("inline flags are not ECMA-262 syntax")
        return encode(list(av[3].data))
    if op is sre_c.BRANCH:
        return alt(encode(list(s.data)) for s in av[1])
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, "REPEAT"):
        lo, hi, sub = av
        inner = encode(list(sub.data) if hasattr(sub, "data") else sub)
        return repeat(inner, lo, None if hi is None or hi == sre_c.MAXREPEAT else hi)
    if op is sre_c.AT:
        raise PatternRefused("anchors are only supported at the ends of alternatives")
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        raise PatternRefused("lookaround assertions cannot be expressed by an automaton")
    if op in (sre_c.GROUPREF, sre_c.GROUPREF_EXISTS):
        raise PatternRefused("backreferences cannot be expressed by an automaton")
    raise PatternRefused(f"unsupported regex construct {op}")


def padded(branch: Branch) -> list:
    """The branch's nodes with ``Σ*`` added at unanchored ends."""
    any_star = ("REPEAT", (0, None, [_ANYCHAR]))
    return (
        ([] if branch.start_anchored else [any_star])
        + branch.nodes
        + ([] if branch.end_anchored else [any_star])
    )


def with_length(nodes: list, min_len: int, max_len: int | None) -> list | None:
    """``nodes`` intersected with "length in [min_len, max_len]", or ``None`` if empty.

    Exact when the node widths already fit (constraint redundant) or when exactly one node has
    variable width and it repeats a single character (its bounds absorb the constraint).
    Otherwise raises ``PatternRefused``.
    """
    lo, hi = width(nodes)
    if lo >= min_len and (max_len is None or (hi is not None and hi <= max_len)):
        return nodes
    if max_len is not None and lo > max_len or (hi is not None and hi < min_len):
        return None
    variable = [i for i, n in enumerate(nodes) if _node_width(n)[0] != _node_width(n)[1]]
    if len(variable) != 1:
        raise PatternRefused("length bounds cannot be intersected with this pattern exactly")
    i = variable[0]
    op, av = nodes[i]
    if op not in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, "REPEAT"):
        raise PatternRefused("length bounds cannot be intersected with this pattern exactly")
    rlo, rhi, sub = av
    sub_nodes = list(sub.data) if hasattr(sub, "data") else sub
    if width(sub_nodes) != (1, 1):
        raise PatternRefused("length bounds cannot be intersected with this pattern exactly")
    fixed = lo - _node_width(nodes[i])[0]
    rhi = None if rhi is None or rhi == sre_c.MAXREPEAT else rhi
    new_lo = max(rlo, min_len - fixed)
    new_hi = max_len - fixed if max_len is not None else None
    if rhi is not None:
        new_hi = rhi if new_hi is None else min(rhi, new_hi)
    if new_hi is not None and new_hi < new_lo:
        return None
    return nodes[:i] + [("REPEAT", (new_lo, new_hi, sub_nodes))] + nodes[i + 1 :]
