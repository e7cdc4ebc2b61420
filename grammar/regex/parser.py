"""Regex parser: pattern text -> dialect-free syntax tree (:mod:`formcast.grammar.regex.syntax_tree`).

Two dialects. ``"python"`` follows ``re`` for str patterns: Unicode ``\\d \\w \\s`` (unless the
``a`` flag), ``.`` excludes only ``\\n`` (everything with ``s``), flags ``a i m s u x``
(global at the start, or scoped ``(?i:...)``). ``"ecma"`` follows ECMA-262 with the ``u`` flag,
as JSON Schema ``pattern`` does: ASCII ``\\d \\w``, ``\\s`` = WhiteSpace + LineTerminator,
``.`` excludes ``\\n \\r \\u2028 \\u2029``, ``(?<name>...)`` groups, ``\\u{...}``, ``\\cX``,
``[^]``. Constructs a finite automaton cannot express (lookaround, backreferences, word
boundaries, conditionals, atomic groups, possessive quantifiers) raise :class:`GrammarError`
with the offset of the construct; so does anything malformed. One exception: a positive
lookahead that starts with a counted repetition, ``(?=X{m,n}...)`` (a length guard, see
:class:`~formcast.grammar.regex.syntax_tree.Lookahead`), which the automaton builder turns into an
intersection when that is exact and refuses otherwise.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.regex import char_classes
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    Anchor,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Repeat,
)

DIALECTS = ("python", "ecma")
_PY_FLAGS = "aiLmsux"
_SUPPORTED_FLAGS = "aimsux"
_SIMPLE_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_HEX = "0123456789abcdefABCDEF"


# a candidate for the text of one character class (checked against _CLASS_MEMO's keys, which
# are exact spans consumed by the parser, so a wrong candidate is only a miss)
_CLASS_SPAN = re.compile(r"\[\^?\]?(?:\\.|[^\]\\])*\]", re.DOTALL)
_CLASS_MEMO: dict[tuple[str, _Flags, str], char_classes.Ranges] = {}
_CLASS_MEMO_SIZE = 4096


@dataclass(frozen=True)
class _Flags:
    is_ignorecase: bool = False
    is_dotall: bool = False
    is_verbose: bool = False
    is_ascii: bool = False


# characters that are literal in both dialects, outside a class, without the verbose flag
_LITERAL_RUN = re.compile(r"[^\\()\[\]{}|.^$*+?]+")


def parse_regex(pattern: str, dialect: str = "python") -> Node:
    """Parse ``pattern`` into a syntax tree with anchors still in place.

    Raises
    ------
    GrammarError
        Malformed or unsupported syntax; ``position`` is the offset in ``pattern``.
    """
    if dialect not in DIALECTS:
        raise GrammarError(f"unknown regex dialect {dialect!r}; expected one of {DIALECTS}")
    if not isinstance(pattern, str):
        raise GrammarError(f"a regex pattern must be str, not {type(pattern).__name__}")
    try:
        return _Parser(pattern, dialect).parse()
    except RecursionError:
        raise GrammarError(
            f"regex ({dialect} dialect): groups nested too deeply to parse "
            f"({len(pattern)} characters; Python's recursion limit)"
        ) from None


class _Parser:
    def __init__(self, text: str, dialect: str) -> None:
        self.text = text
        self.dialect = dialect
        self.i = 0
        self.is_python = dialect == "python"

    # -- helpers ----------------------------------------------------------------------------

    def error(self, message: str, position: int | None = None) -> GrammarError:
        return GrammarError(
            f"regex ({self.dialect} dialect): {message}",
            position=self.i if position is None else position,
        )

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def skip_verbose(self, flags: _Flags) -> None:
        if not flags.is_verbose:
            return
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch in " \t\n\r\f\v":
                self.i += 1
            elif ch == "#":
                while self.i < len(self.text) and self.text[self.i] != "\n":
                    self.i += 1
            else:
                break

    # -- structure --------------------------------------------------------------------------

    def parse(self) -> Node:
        flags = self.global_flags()
        node = self.alternation(flags)
        if self.i < len(self.text):
            raise self.error("unbalanced parenthesis ')'")
        return node

    def global_flags(self) -> _Flags:
        flags = _Flags()
        if not self.is_python:
            return flags
        while self.startswith("(?") and self.peek(2) in _PY_FLAGS and self.peek(2):
            j = self.i + 2
            while j < len(self.text) and self.text[j] in _PY_FLAGS:
                j += 1
            if j >= len(self.text) or self.text[j] != ")":
                break
            flags = self.apply_flags(flags, self.text[self.i + 2 : j], "", self.i + 2)
            self.i = j + 1
        return flags

    def apply_flags(self, flags: _Flags, on: str, off: str, position: int) -> _Flags:
        for letter in on + off:
            if letter not in _SUPPORTED_FLAGS:
                name = {"L": "LOCALE"}.get(letter, letter)
                raise self.error(f"inline flag {name!r} is not supported", position)
        if "a" in on and "u" in on:
            raise self.error("flags 'a' and 'u' are incompatible", position)
        return _Flags(
            is_ignorecase=("i" in on) or (flags.is_ignorecase and "i" not in off),
            is_dotall=("s" in on) or (flags.is_dotall and "s" not in off),
            is_verbose=("x" in on) or (flags.is_verbose and "x" not in off),
            is_ascii=("a" in on) or (flags.is_ascii and "u" not in on),
        )

    def alternation(self, flags: _Flags) -> Node:
        options = [self.concat(flags)]
        while self.peek() == "|":
            self.i += 1
            options.append(self.concat(flags))
        return options[0] if len(options) == 1 else Alternation(tuple(options))

    def concat(self, flags: _Flags) -> Node:
        items: list[Node] = []
        text = self.text
        while True:
            self.skip_verbose(flags)
            if not flags.is_verbose:
                # a run of plain characters: one literal each (the last one is left to the
                # general path when a quantifier may follow it)
                run = _LITERAL_RUN.match(text, self.i)
                if run is not None:
                    end = run.end()
                    if end < len(text) and text[end] in "*+?{":
                        end -= 1
                    if flags.is_ignorecase:
                        items.extend(
                            self.literal(ord(text[j]), j, flags) for j in range(self.i, end)
                        )
                    else:
                        items.extend(
                            CharSet(((cp, cp),) if not 0xD800 <= cp <= 0xDFFF else (), j)
                            for j, cp in enumerate(map(ord, text[self.i : end]), self.i)
                        )
                    self.i = end
            ch = text[self.i] if self.i < len(text) else ""
            if ch == "" or ch in "|)":
                break
            atom = self.atom(flags)
            if atom is None:
                continue
            items.append(self.quantifiers(atom, flags))
        if len(items) == 1:
            return items[0]
        return Concat(tuple(items))

    def quantifiers(self, atom: Node, flags: _Flags) -> Node:
        self.skip_verbose(flags)
        bounds = self.quantifier()
        if bounds is None:
            return atom
        lo, hi, qpos = bounds
        if isinstance(atom, (Anchor, Lookahead)):
            raise self.error("nothing to repeat (an anchor cannot be quantified)", qpos)
        if self.peek() == "?":
            self.i += 1  # lazy: same language under fullmatch
        elif self.peek() == "+":
            if self.is_python:
                raise self.error("possessive quantifiers are not supported", self.i)
            raise self.error("nothing to repeat", self.i)
        self.skip_verbose(flags)
        if self.quantifier(probe=True) is not None:
            raise self.error("multiple repeat", self.i)
        return Repeat(atom, lo, hi, qpos)

    def quantifier(self, probe: bool = False) -> tuple[int, int | None, int] | None:
        ch = self.peek()
        pos = self.i
        if ch in ("*", "+", "?") and ch:
            if not probe:
                self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch] + (pos,)
        if ch != "{":
            return None
        j = self.i + 1
        lo_start = j
        while j < len(self.text) and self.text[j].isdigit() and self.text[j].isascii():
            j += 1
        lo_text = self.text[lo_start:j]
        hi_text: str | None = lo_text
        has_comma = j < len(self.text) and self.text[j] == ","
        if has_comma:
            j += 1
            hi_start = j
            while j < len(self.text) and self.text[j].isdigit() and self.text[j].isascii():
                j += 1
            hi_text = self.text[hi_start:j]
        if j >= len(self.text) or self.text[j] != "}":
            return None
        if not lo_text and (not self.is_python or not has_comma):
            return None  # "{}" (and "{,n}" in ECMA) is a literal brace
        lo = int(lo_text) if lo_text else 0
        hi = int(hi_text) if hi_text else None
        if hi is not None and hi < lo:
            raise self.error("min repeat greater than max repeat", pos)
        if not probe:
            self.i = j + 1
        return lo, hi, pos

    def atom(self, flags: _Flags) -> Node | None:
        ch = self.peek()
        pos = self.i
        if ch == "(":
            return self.group(flags)
        if ch == "[":
            return self.char_class(flags)
        if ch == ".":
            self.i += 1
            return CharSet(char_classes.dot(self.dialect, flags.is_dotall), pos)
        if ch == "^":
            self.i += 1
            return Anchor("start", pos)
        if ch == "$":
            self.i += 1
            return Anchor("end", pos)
        if ch == "\\":
            return self.escape(flags)
        if ch in "*+?":
            raise self.error("nothing to repeat")
        if ch == "{" and self.quantifier(probe=True) is not None:
            raise self.error("nothing to repeat")
        self.i += 1
        return self.literal(ord(ch), pos, flags)

    def literal(self, cp: int, pos: int, flags: _Flags) -> CharSet:
        if not flags.is_ignorecase:
            is_surrogate = char_classes.SURROGATES[0] <= cp <= char_classes.SURROGATES[1]
            return CharSet(() if is_surrogate else ((cp, cp),), pos)
        return CharSet(self.fold(((cp, cp),), flags), pos)

    def fold(self, ranges: char_classes.Ranges, flags: _Flags) -> char_classes.Ranges:
        if not flags.is_ignorecase:
            return char_classes.normalize(ranges)
        if flags.is_ascii:
            extra = []
            for lo, hi in ranges:
                for a, b, delta in ((0x41, 0x5A, 32), (0x61, 0x7A, -32)):
                    if lo <= b and hi >= a:
                        extra.append((max(lo, a) + delta, min(hi, b) + delta))
            return char_classes.union(char_classes.normalize(ranges), char_classes.normalize(extra))
        return char_classes.ignore_case(char_classes.normalize(ranges))

    def group(self, flags: _Flags) -> Node | None:
        open_pos = self.i
        self.i += 1
        inner_flags = flags
        if self.peek() == "?":
            kind = self.text[self.i : self.i + 4]
            if kind.startswith("?:"):
                self.i += 2
            elif kind.startswith("?="):
                return self.lookahead(flags, open_pos)
            elif kind.startswith("?!"):
                raise self.error("lookahead is not supported by a finite automaton", open_pos)
            elif kind.startswith(("?<=", "?<!")):
                raise self.error("lookbehind is not supported by a finite automaton", open_pos)
            elif kind.startswith("?P=") and self.is_python:
                raise self.error("backreference is not supported", open_pos)
            elif kind.startswith("?P<") and self.is_python:
                self.i += 3
                self.group_name(">")
            elif kind.startswith("?<") and not self.is_python:
                self.i += 2
                self.group_name(">")
            elif kind.startswith("?#") and self.is_python:
                end = self.text.find(")", self.i)
                if end < 0:
                    raise self.error("missing ), unterminated comment", open_pos)
                self.i = end + 1
                return None
            elif kind.startswith("?("):
                raise self.error("conditional groups are not supported", open_pos)
            elif kind.startswith("?>"):
                raise self.error("atomic groups are not supported", open_pos)
            elif self.is_python and (self.peek(1) in _PY_FLAGS + "-") and self.peek(1):
                inner_flags = self.scoped_flags(flags, open_pos)
            else:
                raise self.error(f"unknown group extension '(?{self.peek(1)}'", open_pos)
        node = self.alternation(inner_flags)
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", open_pos)
        self.i += 1
        return node

    def lookahead(self, flags: _Flags, open_pos: int) -> Lookahead:
        """``(?=guard)`` where ``guard`` starts with a counted repetition (a length guard).

        Only this form is accepted (what the JSON Schema compiler writes for ``minLength`` /
        ``maxLength`` over a ``pattern``); whether it is an exact intersection is checked when
        the automaton is built (see :class:`~formcast.grammar.regex.syntax_tree.Lookahead`).
        """
        self.i += 2
        guard = self.alternation(flags)
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", open_pos)
        self.i += 1
        first = guard.items[0] if isinstance(guard, Concat) and guard.items else guard
        if not isinstance(first, Repeat):
            raise self.error(
                "lookahead is not supported by a finite automaton (only a length guard "
                "(?=X{m,n}...) followed by text it delimits)",
                open_pos,
            )
        return Lookahead(guard, open_pos)

    def group_name(self, close: str) -> None:
        end = self.text.find(close, self.i)
        name = self.text[self.i : end] if end >= 0 else ""
        if end < 0 or not name.isidentifier():
            raise self.error(f"bad group name {name!r}")
        self.i = end + 1

    def scoped_flags(self, flags: _Flags, open_pos: int) -> _Flags:
        self.i += 1
        start = self.i
        while self.peek() and self.peek() in _PY_FLAGS:
            self.i += 1
        on = self.text[start : self.i]
        off = ""
        if self.peek() == "-":
            self.i += 1
            off_start = self.i
            while self.peek() and self.peek() in _PY_FLAGS:
                self.i += 1
            off = self.text[off_start : self.i]
            if not off:
                raise self.error("missing flag after '-'")
            if set(off) - set("imsx"):
                raise self.error(f"flags {off!r} cannot be turned off")
        if self.peek() == ")":
            raise self.error("global flags not at the start of the expression", open_pos)
        if self.peek() != ":":
            raise self.error("missing ':' after inline flags", self.i)
        self.i += 1
        return self.apply_flags(flags, on, off, start)

    # -- escapes ----------------------------------------------------------------------------

    def escape(self, flags: _Flags) -> Node:
        pos = self.i
        self.i += 1
        ch = self.peek()
        if ch == "":
            raise self.error("bad escape (end of pattern)", pos)
        if ch in "dDwWsS":
            self.i += 1
            return CharSet(self.category(ch, flags), pos)
        if ch in "bB":
            raise self.error(f"word boundary '\\{ch}' is not supported", pos)
        if self.is_python and ch in "AZ":
            self.i += 1
            return Anchor("start" if ch == "A" else "end", pos)
        if ch.isdigit() and ch != "0" and ch.isascii():
            if self.is_python and self.is_octal_escape():
                return self.literal(self.octal(), pos, flags)
            raise self.error("backreferences are not supported", pos)
        if ch == "k" and not self.is_python:
            raise self.error("backreferences are not supported", pos)
        return self.literal(self.char_escape(pos, in_class=False), pos, flags)

    def category(self, letter: str, flags: _Flags) -> char_classes.Ranges:
        ranges = char_classes.category(
            letter.lower(), self.dialect, flags.is_ascii and self.is_python
        )
        return char_classes.complement(ranges) if letter.isupper() else ranges

    def is_octal_escape(self) -> bool:
        digits = self.text[self.i : self.i + 3]
        return len(digits) == 3 and all(d in "01234567" for d in digits)

    def octal(self) -> int:
        start = self.i
        while self.i < len(self.text) and self.i - start < 3 and self.text[self.i] in "01234567":
            self.i += 1
        value = int(self.text[start : self.i], 8)
        if value > 0o377:
            raise self.error(
                f"octal escape value \\{self.text[start : self.i]} outside range", start
            )
        return value

    def hex_digits(self, count: int, pos: int, what: str) -> int:
        digits = self.text[self.i : self.i + count]
        if len(digits) != count or any(d not in _HEX for d in digits):
            raise self.error(f"incomplete escape {what}", pos)
        self.i += count
        return int(digits, 16)

    def char_escape(self, pos: int, in_class: bool) -> int:
        """Decode a single-character escape after the backslash; return the code point."""
        ch = self.peek()
        self.i += 1
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if ch == "a" and self.is_python:
            return 0x07
        if ch == "b" and in_class:
            return 0x08
        if ch == "x":
            return self.hex_digits(2, pos, "\\x")
        if ch == "u":
            if not self.is_python and self.peek() == "{":
                end = self.text.find("}", self.i)
                digits = self.text[self.i + 1 : end] if end > 0 else ""
                if not digits or any(d not in _HEX for d in digits) or int(digits, 16) > 0x10FFFF:
                    raise self.error("bad escape \\u{...}", pos)
                self.i = end + 1
                return int(digits, 16)
            value = self.hex_digits(4, pos, "\\u")
            if not self.is_python and 0xD800 <= value <= 0xDBFF and self.startswith("\\u"):
                save = self.i
                self.i += 2
                try:
                    low = self.hex_digits(4, pos, "\\u")
                except GrammarError:
                    low = -1
                if 0xDC00 <= low <= 0xDFFF:
                    return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                self.i = save
            return value
        if ch == "U" and self.is_python:
            value = self.hex_digits(8, pos, "\\U")
            if value > 0x10FFFF:
                raise self.error(f"bad escape \\U{value:08x}", pos)
            return value
        if ch == "N" and self.is_python:
            end = self.text.find("}", self.i)
            if self.peek() != "{" or end < 0:
                raise self.error("missing {...} after \\N", pos)
            name = self.text[self.i + 1 : end]
            try:
                value = ord(unicodedata.lookup(name))
            except KeyError as exc:
                raise self.error(f"undefined character name {name!r}", pos) from exc
            self.i = end + 1
            return value
        if ch == "0":
            if self.is_python:
                self.i -= 1
                return self.octal()
            if self.peek().isdigit():
                raise self.error("octal escapes are not allowed in ECMA patterns", pos)
            return 0
        if ch == "c" and not self.is_python:
            letter = self.peek()
            if not (letter.isascii() and letter.isalpha()):
                raise self.error("bad escape \\c (expected a letter)", pos)
            self.i += 1
            return ord(letter) % 32
        if ch in "pP":
            raise self.error(f"Unicode property escape '\\{ch}' is not supported", pos)
        if ch.isascii() and ch.isalnum():
            if in_class and self.is_python and ch in "1234567":
                self.i -= 1
                return self.octal()
            raise self.error(f"bad escape '\\{ch}'", pos)
        # identity escape; ECMA (u flag) allows only syntax characters here, but every engine
        # reads other escaped punctuation as the literal character, and so do we
        return ord(ch)

    # -- classes ----------------------------------------------------------------------------

    def char_class(self, flags: _Flags) -> CharSet:
        # memo by the exact text a previous parse consumed (the same classes recur hundreds of
        # times in JSON Schema regexes): a class's parse reads nothing past its closing "]",
        # so text starting with a consumed span parses to the same set
        open_pos = self.i
        span = _CLASS_SPAN.match(self.text, open_pos)
        if span is not None:
            found = _CLASS_MEMO.get((span.group(), flags, self.dialect))
            if found is not None:
                self.i = span.end()
                return CharSet(found, open_pos)
        node = self.parse_char_class(flags)
        if len(_CLASS_MEMO) >= _CLASS_MEMO_SIZE:
            _CLASS_MEMO.clear()
        _CLASS_MEMO[(self.text[open_pos : self.i], flags, self.dialect)] = node.ranges
        return node

    def parse_char_class(self, flags: _Flags) -> CharSet:
        open_pos = self.i
        self.i += 1
        is_negated = self.peek() == "^"
        if is_negated:
            self.i += 1
        items: list[tuple[int, int]] = []
        first = True
        while True:
            ch = self.peek()
            if ch == "":
                raise self.error("unterminated character set", open_pos)
            if ch == "]" and (not first or not self.is_python):
                self.i += 1
                break
            first = False
            lo_pos = self.i
            lo = self.class_atom(flags)
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_pos = self.i
                hi = self.class_atom(flags)
                if isinstance(lo, tuple) or isinstance(hi, tuple):
                    raise self.error(
                        "bad character range (a class escape cannot be an end)", lo_pos
                    )
                if hi < lo:
                    raise self.error(f"bad character range {chr(lo)!r}-{chr(hi)!r}", hi_pos)
                items.append((lo, hi))
            elif isinstance(lo, tuple):
                items.extend(lo)
            else:
                items.append((lo, lo))
        ranges = self.fold(char_classes.normalize(items), flags)
        return CharSet(char_classes.complement(ranges) if is_negated else ranges, open_pos)

    def class_atom(self, flags: _Flags) -> int | char_classes.Ranges:
        ch = self.peek()
        if ch != "\\":
            self.i += 1
            return ord(ch)
        pos = self.i
        self.i += 1
        esc = self.peek()
        if esc in "dDwWsS" and esc:
            self.i += 1
            return self.category(esc, flags)
        if esc == "":
            raise self.error("unterminated character set", pos)
        if esc.isdigit() and esc != "0" and not self.is_python:
            raise self.error("backreferences / octal escapes are not allowed in a class", pos)
        return self.char_escape(pos, in_class=True)


caches.register(
    "regex.char_classes", f"{_CLASS_MEMO_SIZE} bracket classes, then emptied", _CLASS_MEMO.clear
)
