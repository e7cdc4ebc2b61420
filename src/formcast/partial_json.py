"""parse_partial_json: the value a prefix of a JSON text describes so far, for streaming.

Rules for the unfinished end of the text:

- an open object or array is closed where the text stops;
- an unfinished string is cut where the text stops (a dangling escape is dropped);
- an unfinished key, a key without a value yet, and a literal or number that cannot yet be
  read (``tr``, ``-``, ``1.``, ``1e``) are left out;
- a number that can be read is kept as read (``12`` may still become ``123``).

So every snapshot of a growing JSON text is a structural prefix of the final value: keys and
items only get added, and only the last one of each open container may still change.

Checked prefix by prefix against the maintained ``partial-json-parser`` (tests/api): the
same snapshots, except that it reads ``1.`` / ``1e`` as ``1`` and keeps a lone high-surrogate
escape, where these rules wait for text that can be read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from formcast.errors import OutputError

NOTHING: Any = type("Nothing", (), {"__repr__": lambda self: "NOTHING"})()
"""Returned when the prefix describes no value yet (empty, ``"-"``, ``"tr"``, ...)."""

_WHITESPACE = " \t\n\r"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_HEX = re.compile(r"[0-9a-fA-F]{0,4}")
_NUMBER_CHARS = frozenset("+-0123456789.eE")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    """Recursive descent over a JSON prefix; ``pos`` reaching ``len(text)`` means "cut here"."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    @property
    def is_at_end(self) -> bool:
        return self.pos >= len(self.text)

    def fail(self, what: str) -> OutputError:
        return OutputError(
            f"not a JSON prefix: {what} at offset {self.pos}: {self.text[: self.pos + 1]!r}",
            text=self.text,
        )

    def skip_whitespace(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
            self.pos += 1

    def value(self) -> Any:
        self.skip_whitespace()
        if self.is_at_end:
            return NOTHING
        char = self.text[self.pos]
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            return self.string_parts()[0]
        if char in "-0123456789":
            return self.number()
        return self.literal()

    def object(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        self.pos += 1  # "{"
        while True:
            self.skip_whitespace()
            if self.is_at_end:
                return result
            char = self.text[self.pos]
            if char == "}":
                self.pos += 1
                return result
            if char == ",":
                self.pos += 1
                continue
            if char != '"':
                raise self.fail("expected a key")
            key, is_closed = self.string_parts()
            if not is_closed:
                return result  # the key itself is unfinished
            self.skip_whitespace()
            if self.is_at_end:
                return result
            if self.text[self.pos] != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            item = self.value()
            if item is not NOTHING:
                result[key] = item
            if self.is_at_end:
                return result

    def array(self) -> list[Any]:
        result: list[Any] = []
        self.pos += 1  # "["
        while True:
            self.skip_whitespace()
            if self.is_at_end:
                return result
            char = self.text[self.pos]
            if char == "]":
                self.pos += 1
                return result
            if char == ",":
                self.pos += 1
                continue
            item = self.value()
            if item is not NOTHING:
                result.append(item)
            if self.is_at_end:
                return result

    def string_parts(self) -> tuple[str, bool]:
        """A string from its opening quote, and whether its closing quote was reached."""
        self.pos += 1  # opening quote
        parts: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == '"':
                self.pos += 1
                return "".join(parts), True
            if char != "\\":
                parts.append(char)
                self.pos += 1
                continue
            escape = text[self.pos + 1 : self.pos + 2]
            if not escape:
                self.pos = len(text)  # dangling backslash
                break
            if escape == "u":
                code = self.hex4(self.pos + 2)
                if code is None:
                    self.pos = len(text)  # unfinished \uXXXX
                    break
                self.pos += 6
                if 0xD800 <= code < 0xDC00:  # a high surrogate: its low half may follow
                    rest = text[self.pos : self.pos + 2]
                    if rest == "\\u"[: len(rest)] and self.pos + 6 > len(text):
                        self.pos = len(text)  # the pair is unfinished: wait for it
                        break
                    low = self.hex4(self.pos + 2) if rest == "\\u" else None
                    if low is not None and 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        self.pos += 6
                parts.append(chr(code))
                continue
            if escape not in _ESCAPES:
                raise self.fail(f"bad escape \\{escape}")
            parts.append(_ESCAPES[escape])
            self.pos += 2
        return "".join(parts), False

    def hex4(self, start: int) -> int | None:
        """The 4 hex digits at ``start`` (None if the text ends first)."""
        digits = self.text[start : start + 4]
        if not _HEX.fullmatch(digits):
            raise self.fail(f"bad \\u escape {digits!r}")
        return int(digits, 16) if len(digits) == 4 else None

    def number(self) -> Any:
        end = self.pos
        while end < len(self.text) and self.text[end] in _NUMBER_CHARS:
            end += 1
        token = self.text[self.pos : end]
        is_cut = end == len(self.text)
        self.pos = end
        if _NUMBER.fullmatch(token):
            return json.loads(token)
        if is_cut:
            return NOTHING  # "-", "1.", "1e+": not readable yet
        raise self.fail(f"bad number {token!r}")

    def literal(self) -> Any:
        rest = self.text[self.pos : self.pos + 5]
        for word, value in _LITERALS.items():
            if rest.startswith(word):
                self.pos += len(word)
                return value
            if word.startswith(rest) and self.pos + len(rest) == len(self.text):
                self.pos = len(self.text)
                return NOTHING
        raise self.fail("unexpected character")


def parse_partial_json(text: str) -> Any:
    """The value described so far by ``text``, a prefix of a JSON text (see module docstring).

    Returns `NOTHING` when the prefix does not describe a value yet.

    Raises
    ------
    OutputError
        If ``text`` is not a prefix of any JSON text.
    """
    parser = _Parser(text)
    value = parser.value()
    parser.skip_whitespace()
    if not parser.is_at_end:
        raise parser.fail("trailing characters")
    return value
