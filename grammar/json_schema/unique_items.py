"""UniqueItemsGrammar: a JSON grammar whose ``uniqueItems`` arrays the matcher enforces.

The inner grammar (a DFA-indexed or any-value grammar) describes the document with those
arrays' ``uniqueItems`` removed; :mod:`~formcast.grammar.json_schema.unique_plan` lists
their places (instance path patterns) and item kinds. The matcher runs the inner matcher and
beside it a byte-level JSON cursor (`JsonCursor`) that knows the instance path of every
open container and, in a guarded array, the set of item values completed so far (Python
values of ``json.loads``, compared as jsonschema compares them: ``1 == 1.0``).

Exactness. A token is allowed iff the inner grammar allows it and feeding its bytes to the
cursor completes no item equal to an earlier one of the same array (an item completes at its
closing quote, or at the byte after a number), and leaves no item that can only complete as
a repeat. For the open kinds (strings whose automaton has a cycle ahead of every state,
unbounded numbers; see ``arrays._open_item_kind``) every proper prefix of an item has
infinitely many completions, so the second case never arises, except for integers once: the
text ``0`` (or ``-0``) can only complete as 0, so it is excluded when 0 is already an item.
Only tokens that hold a byte ending an item (a quote for strings; any byte outside
``-+.0-9eE`` for numbers), plus for integers those made of ``-`` and ``0``, can do either;
the mask checks those of the allowed tokens, one cursor walk each, and only inside a guarded
array that already has an item. For a string ``enum`` too large to enumerate the arrays of
(`EnumDomain`), a pending item must still start some unused value and a new item needs an
unused value: every allowed token is checked there.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from formcast.grammar.json_schema.unique_plan import ELEMENT, EnumDomain, Kind, Path, path_matches

if TYPE_CHECKING:
    from formcast.grammar.index.vocabulary import Vocabulary
    from formcast.grammar.protocol import Grammar, Matcher

_WHITESPACE = frozenset(b" \t\n\r")
_SCALAR = frozenset(b"-+.0123456789eEtruefalsn")  # bytes of numbers and true/false/null
_NUMBER = frozenset(b"-+.0123456789eE")
_QUOTE, _BACKSLASH = 0x22, 0x5C
_BETWEEN, _STRING, _ESCAPE, _HEX, _LITERAL = range(5)  # cursor modes
_ZERO_TEXTS = (b"0", b"-0")
# (vocabulary hash, width, item kind or "enum") -> (V,) bool candidate tokens (see UniqueItemsGrammar)
_CANDIDATES: dict[tuple[str, int, str], np.ndarray] = {}


class _Frame:
    """One open container: its instance path, the key being filled (objects), the item kind
    and the completed item values (guarded arrays)."""

    __slots__ = ("is_object", "path", "key", "expects_key", "kind", "seen")

    def __init__(
        self,
        is_object: bool,
        path: Path,
        key: str | None = None,
        expects_key: bool = True,
        kind: Kind | None = None,
        seen: frozenset = frozenset(),
    ) -> None:
        self.is_object = is_object
        self.path = path
        self.key = key
        self.expects_key = expects_key
        self.kind = kind
        self.seen = seen

    def but(self, **changes: Any) -> _Frame:
        """A copy with ``changes`` (frames are shared between cursors, never mutated)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return _Frame(**fields)


class JsonCursor:
    """An immutable position in a JSON text: container stack, lexical mode, pending bytes.

    Parameters
    ----------
    patterns : tuple
        ``((path pattern, item kind), ...)`` of the guarded arrays.
    """

    __slots__ = ("patterns", "stack", "mode", "hex_left", "is_key", "raw")

    def __init__(self, patterns: tuple[tuple[Path, Kind], ...]) -> None:
        self.patterns = patterns
        self.stack: tuple[_Frame, ...] = ()
        self.mode = _BETWEEN
        self.hex_left = 0
        self.is_key = False
        self.raw: bytes | None = None  # the pending key or guarded item, when kept

    @property
    def guarded_frame(self) -> _Frame | None:
        """The innermost container if it is a guarded array with at least one item."""
        if self.stack:
            top = self.stack[-1]
            if top.kind is not None and top.seen:
                return top
        return None

    def _kind_at(self, path: tuple[str, ...]) -> Kind | None:
        for pattern, kind in self.patterns:
            if path_matches(pattern, path):
                return kind
        return None

    def feed(self, data: bytes) -> JsonCursor | None:
        """The cursor after ``data`` (bytes the inner grammar accepted), or None if they
        complete a repeated item of a guarded array or leave an item only a repeat completes."""
        stack = list(self.stack)
        mode, hex_left, is_key = self.mode, self.hex_left, self.is_key
        raw = bytearray(self.raw) if self.raw is not None else None
        for byte in data:
            if mode == _STRING:
                if raw is not None:
                    raw.append(byte)
                if byte == _QUOTE:
                    mode = _BETWEEN
                    if is_key:
                        top = stack[-1]
                        stack[-1] = top.but(key=json.loads(raw), expects_key=False)
                    elif raw is not None and not _complete(stack, raw):
                        return None
                    raw = None
                elif byte == _BACKSLASH:
                    mode = _ESCAPE
                continue
            if mode == _ESCAPE:
                if raw is not None:
                    raw.append(byte)
                mode, hex_left = (_HEX, 4) if byte == 0x75 else (_STRING, 0)  # \u
                continue
            if mode == _HEX:
                if raw is not None:
                    raw.append(byte)
                hex_left -= 1
                if hex_left == 0:
                    mode = _STRING
                continue
            if mode == _LITERAL:
                if byte in _SCALAR:
                    if raw is not None:
                        raw.append(byte)
                    continue
                mode = _BETWEEN
                if raw is not None and not _complete(stack, raw):
                    return None
                raw = None
            # between values: structure, whitespace, or the first byte of a scalar
            if byte in _WHITESPACE or byte == 0x3A:  # ':'
                continue
            if byte == 0x7B or byte == 0x5B:  # '{' '['
                path = _value_path(stack)
                if byte == 0x7B:
                    stack.append(_Frame(True, path))
                else:
                    stack.append(_Frame(False, path, kind=self._kind_at(path)))
            elif byte == 0x7D or byte == 0x5D:  # '}' ']'
                if stack:
                    stack.pop()
            elif byte == 0x2C:  # ','
                if stack and stack[-1].is_object:
                    stack[-1] = stack[-1].but(expects_key=True)
                elif stack and isinstance(stack[-1].kind, EnumDomain):
                    if len(stack[-1].seen) == len(stack[-1].kind.texts):
                        return None  # another item, but every value is used
            elif byte == _QUOTE:
                mode = _STRING
                top = stack[-1] if stack else None
                is_key = top is not None and top.is_object and top.expects_key
                raw = bytearray(b'"') if is_key or (top is not None and top.kind) else None
            else:
                mode, is_key = _LITERAL, False
                top = stack[-1] if stack else None
                raw = bytearray([byte]) if top is not None and top.kind else None
        if raw is not None and not is_key and mode != _BETWEEN:  # a pending item
            top = stack[-1]
            if mode == _LITERAL and bytes(raw) in _ZERO_TEXTS:
                if top.kind == "integer" and 0 in top.seen:
                    return None  # "0" / "-0" can only complete as 0, already an item
            elif isinstance(top.kind, EnumDomain) and not top.kind.has_unused(bytes(raw), top.seen):
                return None  # only used values start like this
        out = JsonCursor.__new__(JsonCursor)
        out.patterns = self.patterns
        out.stack = tuple(stack)
        out.mode, out.hex_left, out.is_key = mode, hex_left, is_key
        out.raw = bytes(raw) if raw is not None else None
        return out


def _value_path(stack: list[_Frame]) -> Path:
    """The instance path of a value that starts now."""
    if not stack:
        return ()
    top = stack[-1]
    return (*top.path, top.key if top.is_object else ELEMENT)


def _complete(stack: list[_Frame], raw: bytearray) -> bool:
    """Record the completed item ``raw`` of the guarded array on top; False if a repeat."""
    top = stack[-1]
    value = json.loads(raw)
    if value in top.seen:
        return False
    stack[-1] = top.but(seen=top.seen | {value})
    return True


class UniqueItemsGrammar:
    """``inner`` with the guarded arrays' items kept distinct (see module docstring).

    Parameters
    ----------
    inner : Grammar
        The document's grammar without those ``uniqueItems``.
    patterns : tuple
        ``((path pattern, item kind), ...)`` from `UniqueItemsPlan.patterns`.
    """

    def __init__(self, inner: Grammar, patterns: tuple[tuple[Path, Kind], ...]) -> None:
        self.inner = inner
        self.patterns = patterns
        self.kind = inner.kind
        self.source = inner.source
        self.vocab: Vocabulary = inner.vocab

    @property
    def vocab_size(self) -> int:
        """Logits width of the masks (the inner grammar's)."""
        return self.inner.vocab_size

    def matcher(self) -> UniqueItemsMatcher:
        """A fresh cursor at the start."""
        return UniqueItemsMatcher(self)

    def candidates(self, kind: Kind) -> np.ndarray:
        """``(V,)`` bool: the tokens that can end an item of ``kind`` or (integers) lead to
        the item text ``0`` / ``-0`` (built once per vocabulary and kind)."""
        key = (self.vocab.hash, self.vocab_size, kind if isinstance(kind, str) else "enum")
        found = _CANDIDATES.get(key)
        if found is None and not isinstance(kind, str):
            found = np.ones(self.vocab_size, dtype=bool)  # any token can reach a used value
            _CANDIDATES[key] = found
        if found is None:
            found = np.zeros(self.vocab_size, dtype=bool)
            for token_id, data in enumerate(self.vocab.token_bytes):
                if not data:
                    continue
                if kind == "string":
                    found[token_id] = _QUOTE in data
                else:
                    found[token_id] = not _NUMBER.issuperset(data) or (
                        kind == "integer" and set(data) <= {0x2D, 0x30}
                    )
            _CANDIDATES[key] = found
        return found

    def __repr__(self) -> str:
        return f"UniqueItemsGrammar({self.inner!r}, {len(self.patterns)} guarded arrays)"


class UniqueItemsMatcher:
    """One sequence's cursor: the inner matcher plus a `JsonCursor` per accepted step."""

    def __init__(self, grammar: UniqueItemsGrammar) -> None:
        self.grammar = grammar
        self._inner: Matcher = grammar.inner.matcher()
        self._token_bytes = grammar.vocab.token_bytes
        self._eos_ids = frozenset(grammar.vocab.eos_token_ids)
        self._cursors: list[JsonCursor] = [JsonCursor(grammar.patterns)]

    @property
    def num_accepted(self) -> int:
        """Steps accepted so far (tokens, byte strings and EOS)."""
        return self._inner.num_accepted

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if not allowed."""
        if not self._inner.accept_token(token_id):
            return False
        if token_id in self._eos_ids:
            self._cursors.append(self._cursors[-1])
            return True
        return self._follow(self._token_bytes[token_id])

    def accept_tokens(self, token_ids: list[int] | np.ndarray) -> int:
        """Advance token by token; how many were accepted before the first reject."""
        for count, token_id in enumerate(token_ids):
            if not self.accept_token(int(token_id)):
                return count
        return len(token_ids)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (one step); False (and no change) if not allowed."""
        if not self._inner.accept_bytes(data):
            return False
        return self._follow(data)

    def _follow(self, data: bytes) -> bool:
        cursor = self._cursors[-1].feed(data)
        if cursor is None:
            self._inner.rollback(1)
            return False
        self._cursors.append(cursor)
        return True

    def forbidden_token_ids(self) -> np.ndarray:
        """Ids the inner grammar allows but that repeat an item (ascending)."""
        cursor = self._cursors[-1]
        frame = cursor.guarded_frame
        if frame is None or self._inner.is_terminated():
            return np.zeros(0, dtype=np.int64)
        allowed = self._inner.allowed_token_ids()
        candidates = self.grammar.candidates(frame.kind)
        in_vocab = allowed[allowed < len(candidates)]
        checked = in_vocab[candidates[in_vocab]].tolist()
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        bad = [t for t in checked if t not in eos_ids and cursor.feed(token_bytes[t]) is None]
        return np.asarray(bad, dtype=np.int64)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """The inner mask, less the tokens that would repeat an item."""
        self._inner.fill_bitmask(bitmask, row)
        bad = self.forbidden_token_ids()
        if bad.size == 0:
            return
        words = bad >> 5
        # bit b of a word cleared: AND with ~(1 << b), as int32 (bit 31 is the sign bit)
        clear = np.full(int(words.max()) + 1, -1, dtype=np.int64)
        for word, bit in zip(words.tolist(), (bad & 31).tolist(), strict=True):
            clear[word] &= ~(1 << bit)
        used = np.unique(words)
        masks = torch.from_numpy(clear[used].astype(np.uint32).view(np.int32))
        target = bitmask[row] if bitmask.dim() == 2 else bitmask
        index = torch.from_numpy(used).to(target.device)
        target[index] = target[index] & masks.to(target.device)

    def allowed_token_ids(self) -> np.ndarray:
        """Ascending ids of every allowed token."""
        allowed = self._inner.allowed_token_ids()
        bad = self.forbidden_token_ids()
        return allowed if bad.size == 0 else np.setdiff1d(allowed, bad, assume_unique=True)

    def forced_bytes(self) -> bytes:
        """The inner grammar's forced bytes, unless they would repeat an item (then none)."""
        forced = self._inner.forced_bytes()
        if forced and self._cursors[-1].feed(forced) is None:
            return b""
        return forced

    def is_accepting(self) -> bool:
        """True if the output so far is complete."""
        return self._inner.is_accepting()

    def is_terminated(self) -> bool:
        """True once nothing more may be generated."""
        return self._inner.is_terminated()

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted steps."""
        self._inner.rollback(num_tokens)
        if num_tokens > 0:
            del self._cursors[-num_tokens:]

    def reset(self) -> None:
        """Back to the start."""
        self._inner.reset()
        del self._cursors[1:]

    def fork(self) -> UniqueItemsMatcher:
        """An independent copy at the same position."""
        twin = UniqueItemsMatcher.__new__(UniqueItemsMatcher)
        twin.grammar = self.grammar
        twin._inner = self._inner.fork()
        twin._token_bytes = self._token_bytes
        twin._eos_ids = self._eos_ids
        twin._cursors = list(self._cursors)
        return twin

    def __repr__(self) -> str:
        return f"UniqueItemsMatcher(accepted={self.num_accepted}, inner={self._inner!r})"
