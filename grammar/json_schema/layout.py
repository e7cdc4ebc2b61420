"""Layout: where JSON output may (or must) put whitespace, as syntax trees per nesting depth.

Five layouts (``depth`` = nesting depth of the container being written, 0 at the top):

- ``"none"``: no whitespace at all: ``{"a":1,"b":[1,2]}``.
- ``"compact"`` (the default): ``,`` and ``:`` each followed by at most one optional space,
  nothing else: both ``json.dumps(v, separators=(",", ":"))`` and ``json.dumps(v)`` texts.
  The model cannot loop on whitespace: at most one space per separator.
- ``"spaced"``: exactly ``json.dumps(v)``'s separators, ``", "`` and ``": "``, nothing else.
  Every space is forced, so jump-forward writes each key with its separators in one go.
- ``"flexible"`` with ``max_whitespace=N``: up to ``N`` JSON whitespace characters
  (space, tab, LF, CR) after ``{`` / ``[``, before ``}`` / ``]``, around ``,`` and ``:``.
- ``indent=N`` (``mode="indent"``): exactly ``json.dumps(v, indent=N)``: every member on its
  own line indented by ``N * (depth + 1)`` spaces, the closing bracket on a line indented by
  ``N * depth``, ``": "`` between key and value, empty containers as ``{}`` / ``[]``.

Member order, with any of them: properties in schema order (the default), or with
``any_order=True`` in any order, each at most once, the required ones present (see
``objects``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.regex.combinators import alt, literal, one_of, opt, repeat, seq
from formcast.grammar.regex.syntax_tree import EMPTY, Node

LAYOUT_MODES = ("none", "compact", "spaced", "flexible")
DEFAULT_MAX_WHITESPACE = 8
MAX_INDENT = 16


@dataclass(frozen=True)
class Layout:
    """Whitespace rules of the output (see module docstring); build with :func:`make_layout`."""

    mode: str = "compact"
    max_whitespace: int = 0
    indent: int = 0
    any_order: bool = False

    @property
    def is_depth_dependent(self) -> bool:
        """True if the whitespace depends on the nesting depth (``indent`` mode)."""
        return self.mode == "indent"

    def _ws(self) -> Node:
        if self.mode != "flexible":
            return EMPTY
        return repeat(one_of(" \t\n\r"), 0, self.max_whitespace)  # type: ignore[return-value]

    def _newline(self, depth: int) -> Node:
        return literal("\n" + " " * (self.indent * depth))

    def open(self, depth: int) -> Node:
        """Whitespace after ``{`` / ``[`` of a non-empty container at ``depth``."""
        return self._newline(depth + 1) if self.mode == "indent" else self._ws()

    def close(self, depth: int) -> Node:
        """Whitespace before ``}`` / ``]`` of a non-empty container at ``depth``."""
        return self._newline(depth) if self.mode == "indent" else self._ws()

    def empty(self) -> Node:
        """Whitespace between the brackets of an empty container."""
        return self._ws()

    def item_sep(self, depth: int) -> Node:
        """The separator between members of a container at ``depth``."""
        return self._separator(",", depth)

    def key_sep(self) -> Node:
        """The separator between a key and its value."""
        return self._separator(":", -1)

    def _separator(self, mark: str, depth: int) -> Node:
        if self.mode == "indent":
            return literal(": ") if mark == ":" else seq(literal(","), self._newline(depth + 1))
        if self.mode == "compact":
            return seq(literal(mark), opt(literal(" ")))
        if self.mode == "spaced":
            return literal(mark + " ")
        ws = self._ws()
        return seq(ws, literal(mark), ws)

    def container(self, bracket: str, content: Node | None, is_optional: bool, depth: int) -> Node:
        """``{...}`` / ``[...]`` (``bracket`` is ``"{}"`` or ``"[]"``) around ``content``.

        ``content`` is the member sequence (``None`` or empty: no non-empty content);
        ``is_optional`` allows the empty container too.
        """
        opening, closing = literal(bracket[0]), literal(bracket[1])
        if content is None or content == EMPTY:
            return seq(opening, self.empty(), closing)
        full: Node = seq(self.open(depth), content, self.close(depth))
        if is_optional:
            full = alt([full, self.empty()])  # type: ignore[assignment]
        return seq(opening, full, closing)

    def dumps(self, value: Any, depth: int = 0) -> str:
        """One text of ``value`` in this layout when written at ``depth`` (keys as given)."""
        if self.mode == "indent":
            text = json.dumps(value, ensure_ascii=False, indent=self.indent, allow_nan=False)
            return text.replace("\n", "\n" + " " * (self.indent * depth))
        if self.mode == "spaced":
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def key(self) -> tuple:
        """Hashable identity, for cache keys."""
        return (self.mode, self.max_whitespace, self.indent, self.any_order)


def make_layout(
    whitespace: str | int | None = "compact",
    *,
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
) -> Layout:
    """Validate the layout options of ``compile_json_schema`` and build a :class:`Layout`.

    ``whitespace`` is ``"compact"`` (default; ``None`` means the same), ``"none"``, ``"spaced"``,
    ``"flexible"`` (bounded by ``max_whitespace``, default 8), or an int ``N`` (legacy spelling
    of ``"flexible"`` with ``max_whitespace=N``; ``0`` = ``"none"``). ``indent=N`` selects the
    pretty layout and only combines with the default ``whitespace``. ``any_order`` (a bool)
    lets object members come in any order.

    Raises
    ------
    SchemaError
        An unknown mode, a bound that is not an int >= 1, ``max_whitespace`` without
        ``"flexible"``, or ``indent`` that is not an int in ``0..16`` or is combined with
        another whitespace mode, or ``any_order`` that is not a bool.
    """
    if not isinstance(any_order, bool):
        raise SchemaError(f"any_order must be True or False, got {any_order!r}")
    layout = _whitespace_layout(whitespace, max_whitespace, indent)
    return Layout(layout.mode, layout.max_whitespace, layout.indent, any_order)


def _whitespace_layout(
    whitespace: str | int | None, max_whitespace: int | None, indent: int | None
) -> Layout:
    if whitespace is None:
        whitespace = "compact"
    if isinstance(whitespace, bool):
        raise SchemaError(f"whitespace must be a layout name or an int, got {whitespace!r}")
    if isinstance(whitespace, int):
        if whitespace < 0:
            raise SchemaError(f"whitespace must be >= 0, got {whitespace}")
        if max_whitespace is not None:
            raise SchemaError("give either whitespace=N or max_whitespace=N, not both")
        if whitespace == 0:
            whitespace = "none"
        else:
            whitespace, max_whitespace = "flexible", whitespace
    if whitespace not in LAYOUT_MODES:
        raise SchemaError(
            f"whitespace must be one of {LAYOUT_MODES} (or an int), got {whitespace!r}"
        )
    if indent is not None:
        if isinstance(indent, bool) or not isinstance(indent, int) or not 0 <= indent <= MAX_INDENT:
            raise SchemaError(f"indent must be an int in 0..{MAX_INDENT}, got {indent!r}")
        if whitespace != "compact" or max_whitespace is not None:
            raise SchemaError("indent=N is a layout of its own: leave whitespace at 'compact'")
        return Layout("indent", 0, indent)
    if whitespace == "flexible":
        bound = DEFAULT_MAX_WHITESPACE if max_whitespace is None else max_whitespace
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise SchemaError(f"max_whitespace must be an int >= 1, got {max_whitespace!r}")
        return Layout("flexible", bound, 0)
    if max_whitespace is not None:
        raise SchemaError(
            f"max_whitespace only applies to whitespace='flexible', not {whitespace!r}"
        )
    return Layout(whitespace, 0, 0)
