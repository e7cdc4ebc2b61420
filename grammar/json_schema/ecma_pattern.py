"""ECMA-262 ``pattern`` (and formcast's own format regexes) -> branches of character-level trees.

A JSON Schema ``pattern`` is ECMA-262 and *unanchored*: a string is valid if some substring
matches. It is parsed by :func:`~formcast.grammar.regex.parser.parse_regex` in the ``"ecma"``
dialect, which already gives every construct its ECMA meaning (``\\d`` = ``[0-9]``, ``\\w`` =
``[A-Za-z0-9_]``, ``\\s`` = the WhiteSpace and LineTerminator set, ``.`` = any character but
``\\n \\r \\u2028 \\u2029``, ``$`` = end of input only) and refuses what an automaton cannot
express (backreferences, lookbehind, word boundaries, ...) with :class:`PatternRefused`. Anchors
at the ends of the whole pattern anchor its branches (at the ends of top-level alternatives,
also inside a first or last group of alternatives: ``(^a|b)c`` is ``^ac|bc``); one anywhere
else holds where ECMA (no multiline flag) has it hold: ``^`` at offset 0, ``$`` at the end, so
what a ``^`` follows matches only its empty text and ``/^a$/`` matches nothing
(:func:`_anchored_parts`; refused only inside a repetition of several copies). Lookaheads are
refused.

The result is a list of :class:`Branch` (character-level syntax tree nodes plus whether each end
is anchored); unanchored ends get ``Σ*`` padding (:func:`padded`). :func:`encode` turns
character-level nodes into a tree over the JSON text of the string (every code point set
through :func:`~formcast.grammar.json_schema.charset.encode_charset`, structure kept), and
:func:`pattern_tree` gives the JSON string content of the strings a pattern finds a match in.
:func:`with_length` folds ``minLength`` / ``maxLength`` into a branch when that is exact.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.json_schema.charset import UNIVERSE, encode_charset
from formcast.grammar.regex.combinators import alt, repeat, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import (
    EMPTY,
    Alternation,
    Anchor,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Reference,
    Repeat,
    children,
)

# ``Σ*``: any text (the padding of an unanchored end)
SIGMA_STAR = Repeat(CharSet(UNIVERSE, -1), 0, None, -1)

_LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")
_LOOKAROUND_REFUSAL = "lookaround assertions cannot be expressed by an automaton"
_ANCHOR_REFUSAL = "anchors ^ / $ are only supported at the ends of alternatives"


class PatternRefused(ValueError):
    """A pattern construct has no exact finite-automaton (or no ECMA-compatible) meaning."""


@dataclass(frozen=True)
class Branch:
    """One alternative of a pattern: character-level ``nodes`` (``CharSet``, ``Concat``,
    ``Alternation``, ``Repeat`` only) plus anchoring at either end."""

    nodes: tuple[Node, ...]
    start_anchored: bool
    end_anchored: bool


def parse_ecma(pattern: str) -> list[Branch]:
    """Parse an ECMA-262 ``pattern`` into branches.

    Parameters
    ----------
    pattern : str
        A JSON Schema ``pattern`` (ECMA-262 with the ``u`` flag; unanchored).

    Returns
    -------
    list[Branch]
        Alternatives whose union is the pattern (the top-level ones, a first or last group
        of anchored alternatives distributed), each with its anchoring.

    Raises
    ------
    PatternRefused
        Syntax the ``"ecma"`` parser refuses (its message, with the position), a lookahead,
        or an anchor inside a repetition of several copies (a leading ``^(?!X)`` is handled
        above this module: `pattern_intersection.parse_pattern`).
    """
    return _parsed_branches(pattern, "ecma", is_anchored=False)


def leading_negative_lookahead(pattern: str) -> tuple[str, str] | None:
    """``(X, R)`` for a pattern ``^(?!X)R`` (X's closing parenthesis found by scanning
    escapes, classes and nested groups), else None."""
    if not pattern.startswith("^(?!"):
        return None
    depth, i, in_class = 1, 4, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return pattern[4:i], pattern[i + 1 :]
        i += 1
    return None


def format_branches(pattern: str) -> list[Branch]:
    """Branches of one of formcast's own format regexes (``formats``), fully anchored.

    Parameters
    ----------
    pattern : str
        A Python-dialect regex that describes whole strings (``^`` / ``$`` at its ends are
        optional: the branches are anchored at both ends either way).

    Returns
    -------
    list[Branch]
        The top-level alternatives, all anchored at both ends.

    Raises
    ------
    PatternRefused
        The regex does not parse, holds a lookahead or an anchor away from its ends.
    """
    return _parsed_branches(pattern, "python", is_anchored=True)


def _parsed_branches(pattern: str, dialect: str, *, is_anchored: bool) -> list[Branch]:
    """``pattern`` parsed in ``dialect`` and split into branches (anchored at both ends when
    ``is_anchored``); parse errors become ``PatternRefused``. Memoised (a schema repeats its
    formats and patterns; branches are immutable)."""
    return list(_parsed_branches_memo(pattern, dialect, is_anchored))


@functools.lru_cache(maxsize=1024)
def _parsed_branches_memo(pattern: str, dialect: str, is_anchored: bool) -> tuple[Branch, ...]:
    try:
        tree = parse_regex(pattern, dialect)
    except GrammarError as exc:
        at = exc.position
        if at is not None and pattern.startswith(_LOOKAROUNDS, at):
            raise PatternRefused(f"{_LOOKAROUND_REFUSAL}: {exc}") from exc
        raise PatternRefused(str(exc)) from exc
    _check_character_level(tree, allow_anchors=True)
    return tuple(_split(tree, start=is_anchored, end=is_anchored))


def branches_of(node: Node) -> list[Branch]:
    """Fully anchored branches of a character-level tree (one per top-level alternative).

    Parameters
    ----------
    node : Node
        A tree without anchors, lookaheads or references (e.g. a state elimination result).

    Returns
    -------
    list[Branch]
        Branches whose union (each anchored at both ends) is exactly ``node``'s language.

    Raises
    ------
    PatternRefused
        ``node`` is not character-level.
    """
    _check_character_level(node, allow_anchors=False)
    options = node.options if isinstance(node, Alternation) else (node,)
    return [Branch(_flat_items(option), True, True) for option in options]


def _split(node: Node, *, start: bool, end: bool) -> list[Branch]:
    """Branches of ``node`` below anchoring ``start`` / ``end``.

    Anchors are peeled off the ends of the (flattened) concatenation. An alternation left
    first (last) whose options hold anchors is distributed over the rest, ``(^a|b)c`` =
    ``^ac | bc`` (the strings a union finds a match in are the union of the strings each
    option does), which also splits a top-level group of anchored alternatives. Any other
    anchor is placed by :func:`_anchored_parts`.
    """
    items = _flat_items(node)
    lead = 0
    while lead < len(items) and _is_anchor(items[lead], "start"):
        lead += 1
    tail = len(items)
    while tail > lead and _is_anchor(items[tail - 1], "end"):
        tail -= 1
    core = items[lead:tail]
    start, end = start or lead > 0, end or tail < len(items)
    if core and isinstance(core[0], Alternation) and _find_anchor(core[0]) is not None:
        rest = core[1:]
        return [
            b
            for option in core[0].options
            for b in _split(Concat((option, *rest)), start=start, end=end)
        ]
    if core and isinstance(core[-1], Alternation) and _find_anchor(core[-1]) is not None:
        rest = core[:-1]
        return [
            b
            for option in core[-1].options
            for b in _split(Concat((*rest, option)), start=start, end=end)
        ]
    if not any(_find_anchor(item) is not None for item in core):
        return [Branch(core, start, end)]
    # an anchor away from the ends: the text before a ^ is empty and at the input's start,
    # the text after a $ empty and at its end (as `_anchored_parts` places them)
    return [
        Branch(_flat_items(part), start or at_start, end or at_end)
        for (at_start, at_end), part in _anchored_parts(Concat(core)).items()
    ]


def _anchored_parts(node: Node) -> dict[tuple[bool, bool], Node]:
    """``node`` without its anchors: ``{(at_start, at_end): part}``, where ``part`` holds
    the texts ``node`` matches whose match must begin at the input's start (``at_start``) and
    / or end at its end (``at_end``); flag pairs no text has are absent.

    Without the multiline flag ``^`` holds only at offset 0 and ``$`` only at the end of
    the input. In ``X Y``, a ``Y`` text that must begin at the start leaves ``X`` only its
    empty text (where it has one), and an ``X`` text that must end at the end leaves ``Y``
    only its empty text; so ``a?^b`` is ``^b``, ``a^b`` matches nothing and ``a$b?`` is
    ``a$``. At most four parts per node (one per flag pair): alternatives with equal flags
    are one union.

    Raises
    ------
    PatternRefused
        An anchor inside a repetition of more than one copy.
    """
    if _find_anchor(node) is None:
        return {(False, False): node}
    if isinstance(node, Anchor):
        return {(node.kind == "start", node.kind == "end"): EMPTY}
    parts: dict[tuple[bool, bool], Node] = {}
    if isinstance(node, Alternation):
        for option in node.options:
            for flags, part in _anchored_parts(option).items():
                parts[flags] = alt((parts.get(flags), part))  # type: ignore[assignment]
        return parts
    if isinstance(node, Repeat) and node.max_count == 1:  # X? is X | (empty), X{1} is X
        parts = _anchored_parts(node.item)
        if node.min_count == 0:
            parts[(False, False)] = alt((parts.get((False, False)), EMPTY))  # type: ignore[assignment]
        return parts
    if not isinstance(node, Concat):  # a repetition (lookaheads are refused before)
        anchor = _find_anchor(node)
        position = anchor.pos if anchor is not None else -1
        raise PatternRefused(f"{_ANCHOR_REFUSAL} (anchor at position {position}, repeated)")
    parts = {(False, False): EMPTY}
    for item in node.items:
        grown: dict[tuple[bool, bool], Node] = {}
        item_parts = _anchored_parts(item)
        for (left_start, left_end), left in parts.items():
            for (right_start, right_end), right in item_parts.items():
                # a right text at the start: the left one is empty; a left text at the end:
                # the right one is empty (None: no such text)
                head = _empty_part(left) if right_start else left
                tail = _empty_part(right) if left_end else right
                joined = None if head is None or tail is None else seq(head, tail)
                if joined is not None:
                    flags = (left_start or right_start, left_end or right_end)
                    grown[flags] = alt((grown.get(flags), joined))  # type: ignore[assignment]
        parts = grown
    return parts


def _empty_part(node: Node) -> Node | None:
    """The empty text if ``node`` matches it, else ``None`` (no text)."""
    return EMPTY if width((node,))[0] == 0 else None


def _is_anchor(node: Node, kind: str) -> bool:
    return isinstance(node, Anchor) and node.kind == kind


def _flat_items(node: Node) -> tuple[Node, ...]:
    """The items of ``node`` as a concatenation, nested concatenations spliced in."""
    if not isinstance(node, Concat):
        return (node,)
    out: list[Node] = []
    stack = [iter(node.items)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
        elif isinstance(item, Concat):
            stack.append(iter(item.items))
        else:
            out.append(item)
    return tuple(out)


def _find_anchor(node: Node) -> Anchor | None:
    """The first anchor anywhere in ``node`` (``None`` if it has none)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Anchor):
            return current
        stack.extend(reversed(children(current)))
    return None


def _check_character_level(node: Node, *, allow_anchors: bool) -> None:
    """Refuse lookaheads and references (and anchors unless ``allow_anchors``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Lookahead):
            raise PatternRefused(f"{_LOOKAROUND_REFUSAL} (at position {current.pos})")
        if isinstance(current, Reference):
            raise PatternRefused("a grammar rule reference is not a pattern construct")
        if isinstance(current, Anchor) and not allow_anchors:
            raise PatternRefused(f"{_ANCHOR_REFUSAL} (anchor at position {current.pos})")
        stack.extend(children(current))


def width(nodes: Sequence[Node]) -> tuple[int, int | None]:
    """Minimum and maximum number of characters ``nodes`` match in sequence.

    Parameters
    ----------
    nodes : Sequence[Node]
        Character-level nodes.

    Returns
    -------
    tuple[int, int | None]
        ``(min, max)``; ``max`` is ``None`` when unbounded.
    """
    lo: int = 0
    hi: int | None = 0
    for node in nodes:
        nlo, nhi = _node_width(node)
        lo += nlo
        hi = None if hi is None or nhi is None else hi + nhi
    return lo, hi


def _node_width(node: Node) -> tuple[int, int | None]:
    if isinstance(node, CharSet):
        return 1, 1
    if isinstance(node, Concat):
        return width(node.items)
    if isinstance(node, Alternation):
        widths = [_node_width(option) for option in node.options]
        highs = [w[1] for w in widths]
        high = None if None in highs else max(h for h in highs if h is not None)
        return min(w[0] for w in widths), high
    if isinstance(node, Repeat):
        slo, shi = _node_width(node.item)
        if node.max_count == 0 or shi == 0:
            return node.min_count * slo, 0
        high = None if node.max_count is None or shi is None else node.max_count * shi
        return node.min_count * slo, high
    raise PatternRefused(f"not a character-level node: {type(node).__name__}")


def padded(branch: Branch) -> tuple[Node, ...]:
    """The branch's nodes with ``Σ*`` added at its unanchored ends.

    Parameters
    ----------
    branch : Branch
        One alternative of a pattern.

    Returns
    -------
    tuple[Node, ...]
        Nodes whose concatenation (fullmatch) is the strings this branch finds a match in.
    """
    return (
        (() if branch.start_anchored else (SIGMA_STAR,))
        + branch.nodes
        + (() if branch.end_anchored else (SIGMA_STAR,))
    )


def with_length(
    nodes: Sequence[Node], min_len: int, max_len: int | None
) -> tuple[Node, ...] | None:
    """``nodes`` intersected with "length in ``[min_len, max_len]``".

    Exact when the node widths already fit (the bounds are redundant) or when exactly one node
    has variable width and it repeats a one-character item (its counter absorbs the bounds).

    Parameters
    ----------
    nodes : Sequence[Node]
        Character-level nodes (e.g. :func:`padded`).
    min_len, max_len : int, int | None
        The length bounds (``max_len=None``: unbounded).

    Returns
    -------
    tuple[Node, ...] | None
        The restricted nodes, or ``None`` when no string of ``nodes`` has such a length.

    Raises
    ------
    PatternRefused
        The bounds cannot be folded into the nodes exactly.
    """
    return _with_length_memo(tuple(nodes), min_len, max_len)


@functools.lru_cache(maxsize=1024)  # pure: a format or pattern recurs with the same bounds
def _with_length_memo(
    nodes: tuple[Node, ...], min_len: int, max_len: int | None
) -> tuple[Node, ...] | None:
    widths = [_node_width(node) for node in nodes]
    lo = sum(w[0] for w in widths)
    highs = [w[1] for w in widths]
    hi = None if None in highs else sum(highs)  # type: ignore[arg-type]
    if lo >= min_len and (max_len is None or (hi is not None and hi <= max_len)):
        return nodes
    if (max_len is not None and lo > max_len) or (hi is not None and hi < min_len):
        return None
    variable = [i for i, (wlo, whi) in enumerate(widths) if wlo != whi]
    if len(variable) != 1:
        raise PatternRefused("length bounds cannot be intersected with this pattern exactly")
    i = variable[0]
    node = nodes[i]
    if not isinstance(node, Repeat) or _node_width(node.item) != (1, 1):
        raise PatternRefused("length bounds cannot be intersected with this pattern exactly")
    fixed = lo - widths[i][0]
    new_lo = max(node.min_count, min_len - fixed)
    new_hi = max_len - fixed if max_len is not None else None
    if node.max_count is not None:
        new_hi = node.max_count if new_hi is None else min(node.max_count, new_hi)
    if new_hi is not None and new_hi < new_lo:
        return None
    return nodes[:i] + (Repeat(node.item, new_lo, new_hi, node.pos),) + nodes[i + 1 :]


def encode(nodes: Sequence[Node]) -> Node | None:
    """The JSON string texts of the strings ``nodes`` match in sequence.

    Parameters
    ----------
    nodes : Sequence[Node]
        Character-level nodes.

    Returns
    -------
    Node | None
        A tree over JSON text (the content between the quotes; every code point set written
        by :func:`~formcast.grammar.json_schema.charset.encode_charset`), or ``None`` when the
        language is empty. The encoding is a prefix code applied character by character, so
        the tree keeps the structure of ``nodes``.

    Raises
    ------
    PatternRefused
        A node is not character-level.
    """
    return _encode_memo(tuple(nodes))


@functools.lru_cache(maxsize=1024)
def _encode_memo(nodes: tuple[Node, ...]) -> Node | None:
    return seq(*(_encode_node(node) for node in nodes))


def _encode_node(node: Node) -> Node | None:
    if isinstance(node, CharSet):
        return encode_charset(node.ranges)
    if isinstance(node, Concat):
        return encode(node.items)
    if isinstance(node, Alternation):
        return alt(_encode_node(option) for option in node.options)
    if isinstance(node, Repeat):
        return repeat(_encode_node(node.item), node.min_count, node.max_count)
    if isinstance(node, Anchor):
        raise PatternRefused(f"{_ANCHOR_REFUSAL} (anchor at position {node.pos})")
    if isinstance(node, Lookahead):
        raise PatternRefused(f"{_LOOKAROUND_REFUSAL} (at position {node.pos})")
    raise PatternRefused("a grammar rule reference is not a pattern construct")


def pattern_tree(branches: Sequence[Branch]) -> Node | None:
    """JSON string content (no quotes) of the strings in which a pattern finds a match.

    Parameters
    ----------
    branches : Sequence[Branch]
        The pattern's branches (:func:`parse_ecma`, :func:`format_branches`, ...).

    Returns
    -------
    Node | None
        The union of the encoded padded branches; ``None`` when no string matches.
    """
    return alt(encode(padded(branch)) for branch in branches)


def _clear_memos() -> None:
    _parsed_branches_memo.cache_clear()
    _encode_memo.cache_clear()
    _with_length_memo.cache_clear()


caches.register(
    "json_schema.pattern_branches",
    "LRU: 1024 parsed patterns, 1024 length bounds applied and 1024 encodings",
    _clear_memos,
)
