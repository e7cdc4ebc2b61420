"""Regex syntax tree: code point sets, concatenation, alternation, counted repetition, anchors,
and the positive lookahead that formcast uses as a length guard (an intersection).

The parser resolves every dialect question (what ``\\w`` or ``.`` means, case folding) into
explicit code point sets, so the tree is dialect-free: it denotes a set of strings, and
:func:`to_python_regex` spells that set back as an equivalent Python ``re`` pattern (this is
how an ECMA-262 ``pattern`` can be embedded in a larger Python-dialect regex).
"""

from __future__ import annotations

from dataclasses import dataclass

from formcast.errors import GrammarError
from formcast.grammar.regex.char_classes import ANY, Ranges, to_class_text


@dataclass(frozen=True, slots=True)
class CharSet:
    """One code point from ``ranges``; ``pos`` is its offset in the pattern text."""

    ranges: Ranges
    pos: int


@dataclass(frozen=True, slots=True)
class Concat:
    """The items one after another (the empty concatenation matches the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alternation:
    """Any one of the options."""

    options: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item`` repeated ``min_count`` to ``max_count`` times (``None`` = unbounded)."""

    item: Node
    min_count: int
    max_count: int | None
    pos: int


@dataclass(frozen=True, slots=True)
class Anchor:
    """``^``/``\\A`` (``kind="start"``) or ``$``/``\\Z`` (``kind="end"``) at offset ``pos``."""

    kind: str
    pos: int


@dataclass(frozen=True, slots=True)
class Lookahead:
    """``(?=guard)``: the rest of the enclosing group must also match ``guard``.

    Inside a concatenation ``(?=A)R`` (``R`` = the items after it, up to the end of its group)
    denotes ``A & R`` (intersection) whenever no string of ``A`` is a proper prefix of a
    string of ``R`` or vice versa; then it equals ``re``'s lookahead for every continuation
    after the group. The automaton builder checks that condition and refuses otherwise.
    """

    guard: Node
    pos: int


Node = CharSet | Concat | Alternation | Repeat | Anchor | Lookahead
EMPTY = Concat(())


def strip_anchors(node: Node) -> Node:
    """Remove anchors that sit at the ends of the pattern; refuse any other anchor.

    The whole pattern must fullmatch, so a ``^`` that can only be reached at offset 0 and a
    ``$`` that can only be followed by the end of the text match the empty string there.
    Anchors elsewhere (inside repeated groups, after text) need multiline or lookaround
    semantics a DFA over the output cannot give, so they raise :class:`GrammarError`.
    """
    return _strip(node, at_start=True, at_end=True)


def _strip(node: Node, *, at_start: bool, at_end: bool) -> Node:
    if isinstance(node, Anchor):
        ok = at_start if node.kind == "start" else at_end
        if not ok:
            symbol = "^" if node.kind == "start" else "$"
            raise GrammarError(
                f"anchor {symbol!r} is only supported at the {node.kind} of the pattern "
                "(the whole pattern must fullmatch; multiline anchors are not supported)",
                position=node.pos,
            )
        return EMPTY
    if isinstance(node, CharSet):
        return node
    if isinstance(node, Concat):
        items = node.items
        # item k is at the start (end) iff every item before (after) it is an anchor
        first = next((k for k, x in enumerate(items) if not isinstance(x, Anchor)), len(items))
        last = next(
            (k for k in range(len(items) - 1, -1, -1) if not isinstance(items[k], Anchor)), -1
        )
        out = list(items)
        is_changed = False
        for k, item in enumerate(items):
            if not isinstance(item, CharSet):
                out[k] = _strip(item, at_start=at_start and k <= first, at_end=at_end and k >= last)
                is_changed |= out[k] is not item
        return Concat(tuple(out)) if is_changed else node
    if isinstance(node, Alternation):
        options = tuple(_strip(o, at_start=at_start, at_end=at_end) for o in node.options)
        same = all(a is b for a, b in zip(options, node.options, strict=True))
        return node if same else Alternation(options)
    if isinstance(node, Repeat):
        once = node.max_count is not None and node.max_count <= 1
        inner = _strip(node.item, at_start=at_start and once, at_end=at_end and once)
        return (
            node if inner is node.item else Repeat(inner, node.min_count, node.max_count, node.pos)
        )
    if isinstance(node, Lookahead):
        return Lookahead(_strip(node.guard, at_start=False, at_end=False), node.pos)
    return node


def search_form(node: Node) -> Node:
    """The tree that fullmatches exactly the strings in which ``node`` is found (search).

    Each top-level alternative anchored with ``^`` (``$``) keeps its start (end); an
    unanchored side gets any-text ``[\\s\\S]*``. Anchors anywhere else are refused as in
    :func:`strip_anchors`.
    """
    options = node.options if isinstance(node, Alternation) else (node,)
    any_text = Repeat(CharSet(ANY, -1), 0, None, -1)
    out = []
    for option in options:
        items = option.items if isinstance(option, Concat) else (option,)
        lead = 0
        while lead < len(items) and isinstance(items[lead], Anchor) and items[lead].kind == "start":
            lead += 1
        tail = len(items)
        while tail > lead and isinstance(items[tail - 1], Anchor) and items[tail - 1].kind == "end":
            tail -= 1
        core = _strip(Concat(items[lead:tail]), at_start=lead > 0, at_end=tail < len(items))
        parts = ([] if lead else [any_text]) + [core] + ([] if tail < len(items) else [any_text])
        out.append(Concat(tuple(parts)))
    return out[0] if len(out) == 1 else Alternation(tuple(out))


def to_python_regex(node: Node) -> str:
    """An equivalent Python ``re`` pattern (fullmatch semantics, no flags needed)."""
    if isinstance(node, CharSet):
        if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
            return _literal(node.ranges[0][0])
        return to_class_text(node.ranges)
    if isinstance(node, Concat):
        # a nested group holding a lookahead keeps its parentheses: the lookahead's scope (the
        # rest of its group) must not grow to the items after the group
        return "".join(
            _atom(item)
            if isinstance(item, Alternation) or _is_guarded(item)
            else to_python_regex(item)
            for item in node.items
        )
    if isinstance(node, Alternation):
        return "|".join(to_python_regex(o) for o in node.options)
    if isinstance(node, Repeat):
        hi = "" if node.max_count is None else str(node.max_count)
        return f"{_atom(node.item)}{{{node.min_count},{hi}}}"
    if isinstance(node, Lookahead):
        return f"(?={to_python_regex(node.guard)})"
    return "^" if node.kind == "start" else "$"


def _is_guarded(node: Node) -> bool:
    return isinstance(node, Concat) and any(isinstance(x, Lookahead) for x in node.items)


def _atom(node: Node) -> str:
    text = to_python_regex(node)
    if isinstance(node, CharSet):
        return text
    return f"(?:{text})"


def _literal(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch in " _-,:;\"'<>=/@#%&~`!"):
        return ch
    return to_class_text(((cp, cp),))
