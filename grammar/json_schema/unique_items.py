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
array that already has an item. Objects that take extra keys without bound (``"object"``:
another member can follow until the closing brace) are open too: their items are kept as
text from ``{`` to the matching ``}`` and compared as JSON values when that brace comes; only
tokens holding enough closing brackets to reach it are walked. For a string ``enum`` too
large to enumerate the arrays of (`EnumDomain`), a pending item must still start some unused
value and a new item needs an unused value: the tokens of text alone that lead to a prefix
only used values start with are found from those prefixes (`EnumDomain.dead_prefixes`; the
inner grammar allows only prefixes of values), the others are looked up or walked. Other
regular items (closed objects, bounded strings, mixed types) run their own automaton
(`ItemAutomaton`): an item must keep a new value within reach.

Counted strings. A string whose ``pattern`` / ``format`` and length bounds are too large as
one product automaton is compiled with the pattern alone, its place recorded with a
:class:`~formcast.grammar.json_schema.length_guard.LengthGuard`; the cursor runs the
guard's automaton over the string and counts its characters, and a token is allowed iff
the text after it can still complete within the bounds (``LengthGuard.fits``): exactly the
product automaton's mask, without its states.

Counted arrays. An array whose ``maxItems`` would take its items written out that many
times (``arrays._counts_items``) is compiled with ``minItems`` and an unbounded tail, its
place recorded with the bound; the cursor counts the separators of that array's frame and
refuses the one that would start item ``maxItems + 1``. Only bounds past the vocabulary's
most commas in a token (plus one) are counted, so no token can open such an array and pass
its bound within itself; the mask walks the allowed tokens holding a comma only while an
open counted array is within that many separators of its bound (`JsonCursor.is_near_count`).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

import numba
import numpy as np
import torch

from formcast.bitmask import pack_row, prepared_rows
from formcast.errors import GrammarError
from formcast.grammar.index.kernels import set_bit_ids, set_ids_among
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.json_schema.item_automaton import ItemAutomaton, item_key
from formcast.grammar.json_schema.length_guard import INFINITE, LengthGuard
from formcast.grammar.json_schema.unique_plan import (
    ANY_KIND,
    ELEMENT,
    OBJECT_KIND,
    EnumDomain,
    Kind,
    MemberKey,
    Path,
    path_matches,
    pattern_positions,
)
from formcast.grammar.json_schema.values import equality_key

if TYPE_CHECKING:
    from formcast.grammar.index.vocabulary import Vocabulary
    from formcast.grammar.protocol import Grammar, Matcher

_WHITESPACE = frozenset(b" \t\n\r")
_SCALAR = frozenset(b"-+.0123456789eEtruefalsn")  # bytes of numbers and true/false/null
_NUMBER = frozenset(b"-+.0123456789eE")
_QUOTE, _BACKSLASH, _BRACKET = 0x22, 0x5C, 0x5B
# item-automaton masks: at most this many candidate tokens are walked one by one, more are
# looked up in the automaton's token index (a whole-vocabulary walk on a state's first visit)
_FEW_WALKED = 64
# cursor states -> the quoted tokens refused there, per matcher (_forbidden_free: guard,
# string automaton state, open containers, missing characters; _forbidden_open)
_MAX_FREE_MEMO = 256
_NO_IDS = np.zeros(0, dtype=np.int64)
_MANY_IDS = 64  # refused ids cleared from a mask with one vectorised pass above this many


class _PackedRefusal(NamedTuple):
    """Refused tokens as a packed row (many, read off a table) plus a few ids."""

    words: np.ndarray  # (W,) uint32, packed like a bitmask row
    ids: np.ndarray  # (k,) int64


_BETWEEN, _STRING, _ESCAPE, _HEX, _LITERAL = range(5)  # cursor modes
_ZERO_TEXTS = (b"0", b"-0")
# any-value items: the literals whose every prefix completes one way only, with their keys
_LITERAL_KEYS = tuple(
    (text, equality_key(json.loads(text))) for text in (b"true", b"false", b"null")
)
# any-value items: bytes after a string item's closing quote that complete or start nothing
_INERT_AFTER_STRING = frozenset(b",] \t\n\r")
_STARTS_NEXT = frozenset(b", \t\n\r")  # bytes between an item and the next in its array
_NUMBER_STARTS = frozenset((b"-", *(bytes([d]) for d in b"0123456789")))
_OPENS_ITEM = frozenset((b'"', b"-", b"[", b"{"))  # first bytes of items that complete nothing
_LITERAL_LETTERS = frozenset(b"truefalsn")
_ANY_CANDIDATE_BYTES = frozenset(b'"}],:' + bytes(_WHITESPACE)) | _LITERAL_LETTERS
_TEXT_KINDS = (OBJECT_KIND, ANY_KIND)  # kinds whose container items are kept as text


def _sparse_ids(words: np.ndarray) -> np.ndarray | None:
    """The set bits of packed ``words`` as ascending ids, where there are at most as many as
    words (`UniqueItemsGrammar.sparse_candidates`); else None."""
    return set_bit_ids(words) if int(np.bitwise_count(words).sum()) <= len(words) else None


class _CountRows(NamedTuple):
    """Counted plain strings read from one state of a string (`_VocabTables._count_rows`),
    as packed ``(W,)`` uint32 rows over the vocabulary: the tokens settled by their
    characters alone (keeping the string open, or closing it with inert bytes after), the
    closing ones, the closing ones with a closer after the quote, and per ``k`` the settled
    ones adding more than ``k`` characters (``(max_chars + 1, W)``)."""

    settled: np.ndarray
    closing: np.ndarray
    closing_closer: np.ndarray
    more_chars: np.ndarray


class _Frame:
    """One open container: its instance path, the key being filled (objects), the item kind
    and the completed item values (guarded arrays)."""

    __slots__ = (
        "is_object", "path", "key", "keys", "expects_key", "kind", "seen", "seen_texts",
        "has_guarded_below", "max_items", "num_commas",
    )  # fmt: skip

    def __init__(
        self,
        is_object: bool,
        path: Path,
        key: MemberKey | None = None,
        keys: frozenset[str] = frozenset(),
        expects_key: bool = True,
        kind: Kind | None = None,
        seen: frozenset = frozenset(),
        seen_texts: frozenset[bytes] = frozenset(),
        has_guarded_below: bool | None = None,
        max_items: int | None = None,
        num_commas: int = 0,
    ) -> None:
        self.is_object = is_object
        self.path = path
        self.key = key  # the key being filled, with the keys written before it
        self.keys = keys  # the keys written so far (objects)
        self.expects_key = expects_key
        self.kind = kind
        self.seen = seen
        # the texts of the completed string items: a string has one spelling in formcast's
        # layout, so equal texts are equal values and the mask can compare bytes
        self.seen_texts = seen_texts
        # whether a guarded array may open below this container (a function of ``path`` and
        # the grammar's patterns): computed on the first mask that asks (JsonCursor.check_kind)
        # and kept, also by the copies ``but`` makes (they keep ``path``)
        self.has_guarded_below = has_guarded_below
        # a counted array (its maxItems left to the matcher): the bound, and the separators
        # read so far (the inner grammar keeps ``item (, item)*``: items = commas + 1)
        self.max_items = max_items
        self.num_commas = num_commas

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

    __slots__ = (
        "patterns",
        "stack",
        "mode",
        "hex_left",
        "is_key",
        "raw",
        "item_state",
        "object_raw",
        "object_level",
        "text_patterns",
        "text_guard",
        "text_state",
        "num_chars",
        "count_patterns",
    )

    def __init__(
        self,
        patterns: tuple[tuple[Path, Kind], ...],
        text_patterns: tuple[tuple[Path, LengthGuard], ...] = (),
        count_patterns: tuple[tuple[Path, int], ...] = (),
    ) -> None:
        self.patterns = patterns
        self.text_patterns = text_patterns
        self.count_patterns = count_patterns
        # in a string whose length the matcher counts: its guard, automaton state, and
        # characters so far
        self.text_guard: LengthGuard | None = None
        self.text_state = -1
        self.num_chars = 0
        self.stack: tuple[_Frame, ...] = ()
        self.mode = _BETWEEN
        self.hex_left = 0
        self.is_key = False
        self.raw: bytes | None = None  # the pending key or guarded item, when kept
        # in an ItemAutomaton array: the automaton's state in the pending item (-1: none);
        # the item's bytes go to the automaton alone (no frames are pushed inside it)
        self.item_state = -1
        # in an item of an "object" array: its bytes so far, and the stack height of the
        # array's frame (the item is complete when the stack is back to it)
        self.object_raw: bytes | None = None
        self.object_level = -1

    def check_kind(self) -> Kind | None:
        """Which tokens the mask must walk here (the kind whose candidates apply; None: no
        token can complete a guarded item from here).

        Inside a guarded array: its item kind (an enum without items yet only needs the
        tokens that could complete two items at once: ``"string"``). Elsewhere, where a
        guarded array may open below the current container: ``"enter"``, the tokens holding
        a ``[`` (``"enter_string"`` inside a string: a ``"`` and a ``[``), which could open
        the array and complete two equal items within one token."""
        if self.text_guard is not None:
            return "length"
        if self.object_raw is not None:  # (no guarded array inside: UniqueItemsPlan.check)
            return self.stack[self.object_level - 1].kind  # the array's: object or any
        if self.stack:
            top = self.stack[-1]
            if top.kind is not None:
                return "string" if isinstance(top.kind, EnumDomain) and not top.seen else top.kind
            is_below = top.has_guarded_below
            if is_below is None:  # (the frame's cache: its path and the patterns fix it)
                is_below = top.has_guarded_below = self._has_guarded_below(top.path)
        else:
            is_below = self._has_guarded_below(())
        if is_below:
            return "enter_string" if self.mode in (_STRING, _ESCAPE, _HEX) else "enter"
        return None

    def _has_guarded_below(self, container: tuple) -> bool:
        """May a guarded array open below the concrete ``container`` path?"""
        return any(_may_extend(pattern, container) for pattern, _ in self.patterns)

    def is_near_count(self, max_commas: int) -> bool:
        """Could a token of at most ``max_commas`` commas start an item past some open
        counted array's ``maxItems`` (one holds ``max_items - 1 - max_commas`` or more
        separators)?"""
        return any(
            frame.max_items is not None and frame.num_commas + max_commas >= frame.max_items - 1
            for frame in self.stack
        )

    def feed(self, data: bytes) -> JsonCursor | None:
        """The cursor after ``data`` (bytes the inner grammar accepted), or None if they
        complete a repeated item of a guarded array or leave an item only a repeat completes."""
        stack = list(self.stack)
        mode, hex_left, is_key = self.mode, self.hex_left, self.is_key
        raw = bytearray(self.raw) if self.raw is not None else None
        item_state = self.item_state
        object_raw = bytearray(self.object_raw) if self.object_raw is not None else None
        object_level = self.object_level
        text_guard, text_state, num_chars = self.text_guard, self.text_state, self.num_chars
        for byte in data:
            if object_raw is not None:
                object_raw.append(byte)
            if text_guard is not None:  # in a counted string (the byte is read below too)
                text_state, added = text_guard.step(text_state, byte)
                num_chars += added
                if text_state < 0:
                    return None
                if text_guard.max_len is not None and num_chars > text_guard.max_len:
                    return None
                if text_guard.is_accepting[text_state]:  # the closing quote
                    if num_chars < text_guard.min_len:
                        return None
                    text_guard = None
            if item_state >= 0:  # in an item of an ItemAutomaton array
                automaton = stack[-1].kind
                assert isinstance(automaton, ItemAutomaton) and raw is not None
                after = automaton.step(item_state, byte)
                if after >= 0:
                    item_state = after
                    raw.append(byte)
                    continue
                # the item ended before this byte (the inner grammar allowed the byte)
                if not automaton.is_accepting[item_state] or not _complete_value(stack, raw):
                    return None
                item_state, raw = -1, None
            if mode == _STRING:
                if raw is not None:
                    raw.append(byte)
                if byte == _QUOTE:
                    mode = _BETWEEN
                    if is_key:
                        top, name = stack[-1], json.loads(raw)
                        stack[-1] = top.but(
                            key=MemberKey(name, top.keys),
                            keys=top.keys | {name},
                            expects_key=False,
                        )
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
            top = stack[-1] if stack else None
            if top is not None and isinstance(top.kind, ItemAutomaton) and byte not in b",]":
                item_state = top.kind.step(top.kind.start, byte)
                if item_state < 0:
                    return None
                raw = bytearray([byte])
                stack[-1] = top.but(expects_key=False)
                continue
            if byte == 0x7B or byte == 0x5B:  # '{' '['
                path = _value_path(stack)
                if byte == 0x7B:
                    if top is not None and top.kind in _TEXT_KINDS and object_raw is None:
                        object_raw, object_level = bytearray(b"{"), len(stack)
                    stack.append(_Frame(True, path))
                else:
                    if top is not None and top.kind == ANY_KIND and object_raw is None:
                        object_raw, object_level = bytearray(b"["), len(stack)
                    # inside an item of any value no guard applies (UniqueItemsPlan.check)
                    is_free = object_raw is not None and stack[object_level - 1].kind == ANY_KIND
                    kind = None if is_free else _first_match(self.patterns, path)
                    max_items = None
                    if self.count_patterns and not is_free:
                        max_items = _first_match(self.count_patterns, path)
                    # expects_key in an ItemAutomaton array: an item must come (after ',')
                    stack.append(
                        _Frame(False, path, expects_key=False, kind=kind, max_items=max_items)
                    )
            elif byte == 0x7D or byte == 0x5D:  # '}' ']'
                if stack:
                    stack.pop()
                if object_raw is not None and len(stack) == object_level:
                    if not _complete_value(stack, object_raw):
                        return None  # the object item repeats an earlier one
                    object_raw = None
            elif byte == 0x2C:  # ','
                if stack and (stack[-1].is_object or isinstance(stack[-1].kind, ItemAutomaton)):
                    stack[-1] = stack[-1].but(expects_key=True)
                elif stack and isinstance(stack[-1].kind, EnumDomain):
                    if len(stack[-1].seen) == len(stack[-1].kind.texts):
                        return None  # another item, but every value is used
                elif stack and stack[-1].max_items is not None:
                    num_commas = stack[-1].num_commas + 1
                    if num_commas >= stack[-1].max_items:
                        return None  # item max_items + 1 would start
                    stack[-1] = stack[-1].but(num_commas=num_commas)
            elif byte == _QUOTE:
                mode = _STRING
                top = stack[-1] if stack else None
                is_key = top is not None and top.is_object and top.expects_key
                is_free = object_raw is not None and stack[object_level - 1].kind == ANY_KIND
                if not is_key and self.text_patterns and not is_free:
                    text_guard = _first_match(self.text_patterns, _value_path(stack))
                    if text_guard is not None:
                        text_state, num_chars = text_guard.step(text_guard.start, byte)[0], 0
                raw = bytearray(b'"') if is_key or (top is not None and top.kind) else None
            else:
                mode, is_key = _LITERAL, False
                top = stack[-1] if stack else None
                raw = bytearray([byte]) if top is not None and top.kind else None
        if text_guard is not None and not text_guard.fits(text_state, num_chars):
            return None  # no completion of the pending string fits its length bounds
        top = stack[-1] if stack else None
        if item_state >= 0:  # a pending item of an ItemAutomaton array
            assert top is not None and isinstance(top.kind, ItemAutomaton) and raw is not None
            if not top.kind.has_new_value(item_state, bytes(raw), top.seen):
                return None  # every completion repeats an item
        elif top is not None and isinstance(top.kind, ItemAutomaton) and top.expects_key:
            if not top.kind.has_new_value(top.kind.start, b"", top.seen):
                return None  # an item must follow, and every value is used
        elif raw is not None and not is_key and mode != _BETWEEN:  # a pending item
            assert top is not None
            if mode == _LITERAL and bytes(raw) in _ZERO_TEXTS:
                if top.kind == "integer" and 0 in top.seen:
                    return None  # "0" / "-0" can only complete as 0, already an item
            elif mode == _LITERAL and top.kind == ANY_KIND:
                pending = bytes(raw)
                for text, key in _LITERAL_KEYS:
                    if text.startswith(pending) and key in top.seen:
                        return None  # a prefix of a literal that is already an item
            elif isinstance(top.kind, EnumDomain) and not top.kind.has_unused(bytes(raw), top.seen):
                return None  # only used values start like this
        out = JsonCursor.__new__(JsonCursor)
        out.patterns = self.patterns
        out.stack = tuple(stack)
        out.mode, out.hex_left, out.is_key = mode, hex_left, is_key
        out.raw = bytes(raw) if raw is not None else None
        out.item_state = item_state
        out.object_raw = bytes(object_raw) if object_raw is not None else None
        out.object_level = object_level
        out.text_patterns = self.text_patterns
        out.count_patterns = self.count_patterns
        out.text_guard, out.text_state, out.num_chars = text_guard, text_state, num_chars
        return out


def _first_match(patterns: tuple[tuple[Path, Any], ...], path: tuple[str, ...]) -> Any:
    """The value of the first ``(path pattern, value)`` whose pattern matches ``path`` (a
    guarded array's kind, a counted string's guard, a counted array's bound), else None."""
    for pattern, value in patterns:
        if path_matches(pattern, path):
            return value
    return None


def _may_extend(pattern: Path, container: tuple) -> bool:
    """Can ``pattern`` match a path longer than the concrete ``container`` path that starts
    with it (a guarded array below the container)?"""
    return any(position < len(pattern) for position in pattern_positions(pattern, container))


def _value_path(stack: list[_Frame]) -> Path:
    """The instance path of a value that starts now."""
    if not stack:
        return ()
    top = stack[-1]
    return (*top.path, top.key if top.is_object else ELEMENT)


def _complete(stack: list[_Frame], raw: bytearray) -> bool:
    """Record the completed item ``raw`` of the guarded array on top; False if a repeat."""
    top = stack[-1]
    if top.kind == ANY_KIND:  # values of several types: compared by their equality keys
        return _complete_value(stack, raw)
    value = json.loads(raw)
    if value in top.seen:
        return False
    texts = top.seen_texts | {bytes(raw)} if isinstance(value, str) else top.seen_texts
    stack[-1] = top.but(seen=top.seen | {value}, seen_texts=texts)
    return True


def _complete_value(stack: list[_Frame], raw: bytearray) -> bool:
    """Record the completed item ``raw`` of the ItemAutomaton array on top (by its
    `equality_key`); False if it repeats an item."""
    top = stack[-1]
    text = bytes(raw)
    key = item_key(text)
    if key in top.seen:
        return False
    texts = top.seen_texts | {text} if text[:1] == b'"' else top.seen_texts
    stack[-1] = top.but(seen=top.seen | {key}, seen_texts=texts)
    return True


class UniqueItemsGrammar:
    """``inner`` with the guarded arrays' items kept distinct (see module docstring).

    Parameters
    ----------
    inner : Grammar
        The document's grammar without those ``uniqueItems``.
    patterns : tuple
        ``((path pattern, item kind), ...)`` from `UniqueItemsPlan.patterns`.
    text_patterns : tuple
        ``((path pattern, length guard), ...)`` of the counted strings.
    count_patterns : tuple
        ``((path pattern, maxItems), ...)`` of the counted arrays.
    """

    def __init__(
        self,
        inner: Grammar,
        patterns: tuple[tuple[Path, Kind], ...],
        text_patterns: tuple[tuple[Path, LengthGuard], ...] = (),
        count_patterns: tuple[tuple[Path, int], ...] = (),
    ) -> None:
        self.inner = inner
        self.patterns = patterns
        self.text_patterns = text_patterns
        self.count_patterns = count_patterns
        self.kind = inner.kind
        self.source = inner.source
        self.vocab: Vocabulary = inner.vocab
        self.tables = _VocabTables.of(inner.vocab, inner.vocab_size)
        self._words = dict(self.tables.words)
        self._sparse = dict(self.tables.sparse_ids)  # see sparse_candidates
        # a counted array's bound holds against every token: no token can open one and
        # pass it within itself (compile counts only bounds past a token's commas + 1)
        max_commas = vocab_table(inner.vocab).max_commas()
        for _, max_items in count_patterns:
            if max_items <= max_commas + 1:
                raise GrammarError(
                    f"maxItems {max_items} cannot be counted by the matcher: a token holds "
                    f"{max_commas} commas"
                )
        self.max_commas = max_commas
        # a token that opens a counted string can break its bounds within itself: close it
        # under min_len (a second quote), or pass max_len / leave it where no completion
        # fits (any quote): those tokens are walked wherever a counted value may open
        # ("open_text"; None: no counted string is at risk, e.g. a plain string whose
        # min_len is in the automaton and whose max_len passes every token)
        guards = [guard for _, guard in text_patterns]
        num_quotes = self.tables.num_quotes
        if any(
            g.has_bounded_content
            or (INFINITE if g.max_len is None else g.max_len) < self.tables.max_open_chars
            for g in guards
        ):
            risky = num_quotes > 0
        elif any(g.min_len > 0 for g in guards):
            risky = num_quotes > 1
        else:
            risky = None
        self.has_open_risk = risky is not None
        if risky is not None:
            self._words["open_text"] = pack_row(risky)
            # those tokens' ids (_forbidden_open reads just their bits)
            self.open_ids = np.flatnonzero(risky).astype(np.int64)
            for kind in ("enter", "enter_string"):
                self._words[kind] = self._words[kind] | self._words["open_text"]
            for kind in ("open_text", "enter", "enter_string"):
                self._sparse[kind] = _sparse_ids(self._words[kind])

    @property
    def vocab_size(self) -> int:
        """Logits width of the masks (the inner grammar's)."""
        return self.inner.vocab_size

    def matcher(self) -> UniqueItemsMatcher:
        """A fresh cursor at the start."""
        return UniqueItemsMatcher(self)

    def candidate_words(self, kind: Kind) -> np.ndarray:
        """``(ceil(V/32),)`` uint32, packed like a bitmask row: the tokens the mask walks for
        ``kind`` (see `JsonCursor.check_kind`): those holding a byte that ends an item
        (integers: or made of ``-`` and ``0``), that open an array, or, for an enum, all."""
        return self._words[kind if isinstance(kind, str) else "enum"]

    def has_no_candidates(self, kind: Kind) -> bool:
        """No token is a candidate of ``kind`` (e.g. ``"enter_string"`` in most vocabularies:
        no token holds a quote, a ``[`` and a comma inside it)."""
        if not isinstance(kind, str):
            return False
        ids = self.sparse_candidates(kind)
        return ids is not None and ids.size == 0

    def sparse_candidates(self, kind: str) -> np.ndarray | None:
        """``kind``'s candidate ids (ascending int64) where there are at most as many as a row
        has words (reading their bits alone is then cheaper than ANDing the row with
        `candidate_words` and listing its set bits); None: read the packed row. Found when
        the grammar is built (no mask pays for it)."""
        return self._sparse[kind]

    def __repr__(self) -> str:
        return (
            f"UniqueItemsGrammar({self.inner!r}, {len(self.patterns)} guarded arrays, "
            f"{len(self.text_patterns)} counted strings, {len(self.count_patterns)} counted "
            "arrays)"
        )


class _VocabTables:
    """Per vocabulary (built once, ~0.5 s for SmolLM2; `kernel_warmup` builds them): the
    candidate tokens of each kind as packed words, and for the tokens holding one quote with
    no backslash before it, the bytes before it (``heads``: the string-item fast path of
    `UniqueItemsMatcher._forbidden`)."""

    _built: dict[tuple[str, int], _VocabTables] = {}
    _lock = threading.Lock()

    def __init__(self, vocab: Vocabulary, vocab_size: int) -> None:
        self._token_bytes = vocab.token_bytes[:vocab_size]
        ids_of_bytes: dict[bytes, list[int]] = {}
        # string items: the tokens whose first quote ends an item and whose other bytes
        # cannot complete or start one (one quote, or a second one last), by the bytes
        # before that quote; the other tokens holding a quote are walked
        ids_by_head: dict[bytes, list[int]] = {}
        walked: list[int] = []
        names = ("string", "integer", "number", "enum", "enter", "enter_string", "object", "any",
                 "length")  # fmt: skip
        flags = {name: np.zeros(vocab_size, dtype=bool) for name in names}
        self.num_quotes = np.zeros(vocab_size, dtype=np.int8)
        self.heads: dict[int, bytes] = {}
        # string items: the tokens whose first quote closes the pending item and whose other
        # bytes only start the next item of the array (a comma, whitespace, its opening
        # quote last): by the bytes before that quote (no backslash among them)
        self.next_item_heads: dict[int, bytes] = {}
        is_inside_string = np.zeros(vocab_size, dtype=bool)
        # counted strings: the heads of the tokens whose bytes after the quote are structure
        # that opens nothing (no bracket, brace or backslash: see _forbidden_length)
        self.closing_heads: dict[int, bytes] = {}
        # number items: the bytes before the first one outside a number, for the tokens
        # with no digit after it (they complete at most the pending item)
        self.number_heads: dict[int, bytes] = {}
        self.has_digit = np.zeros(vocab_size, dtype=bool)
        # first items: only a token with a comma can complete two items (or start a second)
        self.has_comma = np.zeros(vocab_size, dtype=bool)
        self.lengths = np.array([len(data) for data in self._token_bytes], dtype=np.int64)
        # counted strings: the characters a token adds inside a string (bytes that start a
        # UTF-8 character), for the tokens without a quote or a backslash (the others walk)
        self.num_chars = np.array([_num_chars(data) for data in self._token_bytes], dtype=np.int64)
        self.is_plain_text = np.array(
            [bool(data) and _QUOTE not in data and _BACKSLASH not in data
             for data in self._token_bytes],
            dtype=bool,
        )  # fmt: skip
        self.max_chars = int(self.num_chars.max(initial=0))
        self.first_bytes = np.array([data[0] if data else -1 for data in self._token_bytes])
        # the most characters a token puts into a string it opens (after its quote)
        self.max_open_chars = vocab_table(vocab).max_chars_after_quote()
        # object items: how many '}' / ']' a token holds (it closes at most that many frames)
        self.num_closers = np.zeros(vocab_size, dtype=np.int16)
        for token_id, data in enumerate(vocab.token_bytes[:vocab_size]):
            if not data:
                continue
            for name in ("string", "integer", "number", "enum", "object", "any", "length"):
                flags[name][token_id] = _is_candidate(name, data)
            self.num_closers[token_id] = min(data.count(0x7D) + data.count(0x5D), 1000)
            self.has_digit[token_id] = any(0x30 <= b <= 0x39 for b in data)
            self.has_comma[token_id] = 0x2C in data
            end = next((k for k, b in enumerate(data) if b not in _NUMBER), len(data))
            if end < len(data) and not any(0x30 <= b <= 0x39 for b in data[end:]):
                self.number_heads[token_id] = data[:end]
            # an array opened by the token holds a repeat within it only with two items, so a
            # comma inside it (its first item alone repeats nothing, and with nothing used no
            # pending first item is a dead end)
            opens_items = _has_comma_inside_bracket(data)
            flags["enter"][token_id] = opens_items
            flags["enter_string"][token_id] = opens_items and _QUOTE in data
            num_quotes = min(data.count(_QUOTE), 2)
            self.num_quotes[token_id] = num_quotes
            head = data[: data.find(_QUOTE)]
            if num_quotes == 1 and _BACKSLASH not in head:
                self.heads[token_id] = head
                if not any(b in data[len(head) :] for b in b"[{\\"):
                    self.closing_heads[token_id] = head
            ids_of_bytes.setdefault(data, []).append(token_id)
            # in a string item (content, not after a backslash): a token whose quotes are
            # all escaped stays inside (is_inside_string)
            closed_at = _closing_quote(data)
            if closed_at < 0:
                is_inside_string[token_id] = True
            elif _BACKSLASH not in data[:closed_at]:
                rest = data[closed_at + 1 :]
                between = rest[:-1] if rest[-1:] == b'"' else rest
                if 0x2C in between and _STARTS_NEXT.issuperset(between):
                    self.next_item_heads[token_id] = data[:closed_at]
            if num_quotes and _BACKSLASH not in head:
                rest = data[len(head) + 1 :]
                if _QUOTE not in rest[:-1]:  # (a second quote only as the last byte)
                    ids_by_head.setdefault(head, []).append(token_id)
                    continue
            if num_quotes:
                walked.append(token_id)
        # tuples of ints, which the collector stops tracking (lists of one id each would be
        # ~49k objects that every full collection of a process scans)
        self._ids_of_bytes = {data: tuple(ids) for data, ids in ids_of_bytes.items()}
        self.ids_by_head = {h: np.asarray(ids, dtype=np.int64) for h, ids in ids_by_head.items()}
        self.walked_quote_ids = np.asarray(walked, dtype=np.int64)  # ascending
        # open string items: a token that closes the item with nothing but the next one's
        # opening after it repeats an item iff its head does (as a one-quote token)
        self.string_item_heads = {**self.next_item_heads, **self.heads}
        self.is_inside_string = is_inside_string  # (V,) bool, see string_item_heads
        # counted strings clear of their bounds: the tokens with a quote other than the
        # closing heads (their bytes after it may open something)
        has_quote = self.num_quotes > 0
        is_head = np.zeros(vocab_size, dtype=bool)
        is_head[list(self.closing_heads)] = True
        self.quoted_open_ids = np.flatnonzero(has_quote & ~is_head).astype(np.int64)
        # the closing heads and the characters before their quote
        self.closing_head_ids = np.asarray(sorted(self.closing_heads), dtype=np.int64)
        self.closing_head_chars = np.asarray(
            [_num_chars(self.closing_heads[t]) for t in self.closing_head_ids.tolist()],
            dtype=np.int64,
        )
        self.words = {name: pack_row(is_candidate) for name, is_candidate in flags.items()}
        self.sparse_ids = {name: _sparse_ids(words) for name, words in self.words.items()}
        self._build_any_tables(vocab_size)
        self.comma_words = pack_row(self.has_comma)  # (ceil(V/32),) uint32
        # a comma after a quote: what can leave a string and separate items (counted arrays)
        self.quoted_comma_words = pack_row(self.has_comma & (self.num_quotes > 0))
        # counted strings, as packed rows: plain tokens, the others, and per k the plain
        # tokens adding more than k characters ((max_chars + 1, ceil(V/32)) uint32)
        self.plain_words = pack_row(self.is_plain_text)
        self.other_words = pack_row(~self.is_plain_text)
        self.more_chars_words = np.stack(
            [pack_row(self.is_plain_text & (self.num_chars > k)) for k in range(self.max_chars + 1)]
        )
        self._build_plain_count_tables(vocab_size)

    def _build_plain_count_tables(self, vocab_size: int) -> None:
        """Counted plain strings (`UniqueItemsMatcher._forbidden_plain_count`): the rows of
        a content state (``content_counts``) and of each escape state (``escape_counts``:
        0 after a backslash, ``h`` with ``h`` digits of ``\\uXXXX`` left)."""
        lengths = self.lengths[:vocab_size]
        is_u = self.first_bytes[:vocab_size] == 0x75
        self.content_counts = self._count_rows(np.zeros(vocab_size, dtype=np.int64))
        self.escape_counts = {0: self._count_rows(np.where(is_u, np.minimum(lengths, 5), 1))}
        for hex_left in range(1, 5):
            self.escape_counts[hex_left] = self._count_rows(np.minimum(lengths, hex_left))

    def _count_rows(self, skipped: np.ndarray) -> _CountRows:
        """:class:`_CountRows` of the tokens read from a string's content after their first
        ``skipped`` bytes (``(V,)``: those finishing a pending escape, ASCII, adding no
        character). Settled: the rest keeps the string open (escapes included), or closes it
        with inert bytes after the quote (no quote, bracket, brace or backslash)."""
        vocab_size = len(skipped)
        is_plain = self.is_plain_text[:vocab_size]
        string_chars = self.num_chars[:vocab_size] - skipped  # (V,) the plain tokens' count
        is_settled = is_plain.copy()
        is_closing = np.zeros(vocab_size, dtype=bool)
        for token_id in np.flatnonzero(~is_plain).tolist():
            data = self._token_bytes[token_id][int(skipped[token_id]) :]
            if not data:
                continue
            num_chars, closed_at = _string_effect(data)
            string_chars[token_id] = num_chars
            if closed_at < 0:
                is_settled[token_id] = True
            elif not any(b in data[closed_at + 1 :] for b in b'"[{\\'):
                is_settled[token_id] = is_closing[token_id] = True
        return _CountRows(
            settled=pack_row(is_settled),
            closing=pack_row(is_closing),
            closing_closer=pack_row(is_closing & (self.num_closers[:vocab_size] > 0)),
            more_chars=np.stack(
                [pack_row(is_settled & (string_chars > k)) for k in range(self.max_chars + 1)]
            ),
        )

    def _build_any_tables(self, vocab_size: int) -> None:
        """Items of any value (`UniqueItemsMatcher._forbidden_any`): packed rows of the tokens
        holding a quote, a closer; those walked inside a string item (a quote, but not one
        quote with no backslash before it and inert bytes after it: ``inert_ids_by_head``);
        between items (two quotes, a closer, a comma, whitespace after another byte, a
        literal's letter last); in a pending number or literal (the kind's candidates)."""
        is_inert_head = np.zeros(vocab_size, dtype=bool)
        by_head: dict[bytes, list[int]] = {}
        is_between = np.zeros(vocab_size, dtype=bool)
        is_known = np.zeros(vocab_size, dtype=bool)  # between items: settled by a lookup
        by_text: dict[bytes, list[int]] = {}
        by_literal: dict[str, list[int]] = {}
        for token_id, data in enumerate(self._token_bytes):
            if not data:
                continue
            head = self.heads.get(token_id)
            if head is not None and _INERT_AFTER_STRING.issuperset(data[len(head) + 1 :]):
                is_inert_head[token_id] = True
                by_head.setdefault(head, []).append(token_id)
            stripped = data.lstrip(bytes(_WHITESPACE))
            if stripped[:1] == b'"' and self.num_quotes[token_id] == 1:
                continue  # it opens a string item and ends inside it
            is_between[token_id] = (
                self.num_quotes[token_id] > 1
                or self.num_closers[token_id] > 0
                or self.has_comma[token_id]
                or data[-1] in _LITERAL_LETTERS
                or any(b in _WHITESPACE for b in stripped)
            )
            if not is_between[token_id]:
                continue
            # an item the token starts and completes (a string, then inert bytes), or a
            # literal it leaves pending or completes: repeated iff that value is an item
            end = stripped.find(_QUOTE, 1) + 1 if stripped[:1] == b'"' else 0
            if end and _BACKSLASH not in stripped[:end]:
                if _INERT_AFTER_STRING.issuperset(stripped[end:]):
                    by_text.setdefault(stripped[:end], []).append(token_id)
                    is_known[token_id] = True
                continue
            if stripped[:2] in (b"[]", b"{}") and _INERT_AFTER_STRING.issuperset(stripped[2:]):
                by_literal.setdefault(item_key(stripped[:2]), []).append(token_id)
                is_known[token_id] = True
                continue
            for text, key in _LITERAL_KEYS:
                head = stripped[: len(text)]
                rest = stripped[len(text) :]
                if head and text.startswith(head) and (not rest or head == text):
                    if _INERT_AFTER_STRING.issuperset(rest):
                        by_literal.setdefault(key, []).append(token_id)
                        is_known[token_id] = True
        self.inert_ids_by_head = {h: tuple(ids) for h, ids in by_head.items()}
        # pending number items of any value: the tokens whose number bytes end the number and
        # whose other bytes only separate or close, or start the array's next item with one
        # byte that completes nothing (a quote, '-', '[', '{'); and the tokens of number
        # bytes alone, which keep the number open
        self.inert_number_heads = {}
        self.is_number_text = np.array(
            [bool(data) and _NUMBER.issuperset(data) for data in self._token_bytes], dtype=bool
        )
        for t, data in enumerate(self._token_bytes):
            head = self.number_heads.get(t)
            if head is None:
                continue
            rest = data[len(head) :]
            if rest[-1:] in _OPENS_ITEM and 0x2C in rest and 0x5D not in rest:
                rest = rest[:-1]
            if _INERT_AFTER_STRING.issuperset(rest):
                self.inert_number_heads[t] = head
        self.any_item_ids_by_text = {text: tuple(ids) for text, ids in by_text.items()}
        self.any_literal_ids = {key: tuple(ids) for key, ids in by_literal.items()}
        has_quote = self.num_quotes > 0
        self.any_words = {
            "quote": pack_row(has_quote),
            "closer": pack_row(self.num_closers > 0),
            "string_walk": pack_row(has_quote & ~is_inert_head),
            "between": pack_row(is_between & ~is_known),
            "literal": self.words["any"],
        }

    def ids_of_bytes(self, data: bytes) -> tuple[int, ...]:
        """The tokens whose bytes are ``data``."""
        return self._ids_of_bytes.get(data, ())

    def continuations(self, prefix: bytes, texts: frozenset[str]) -> set[int]:
        """The tokens whose bytes continue ``prefix`` along one of ``texts``."""
        found: set[int] = set()
        for text in texts:
            data = text.encode()
            if not data.startswith(prefix):
                continue
            rest = data[len(prefix) :]
            for end in range(1, len(rest) + 1):
                found.update(self._ids_of_bytes.get(rest[:end], ()))
        return found

    @classmethod
    def of(cls, vocab: Vocabulary, vocab_size: int) -> _VocabTables:
        key = (vocab.hash, vocab_size)
        with cls._lock:
            found = cls._built.get(key)
            if found is None:
                found = cls._built[key] = cls(vocab, vocab_size)
        return found


def _is_in(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """``(len(ids),)`` bool: which of ``ids`` are in the ascending ``sorted_ids``."""
    if sorted_ids.size == 0:
        return np.zeros(len(ids), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return sorted_ids[pos] == ids


def _is_candidate(name: str, data: bytes) -> bool:
    if name in ("enum", "length"):
        return True  # any token can lead to a prefix only used values start with / too long
    if name == "string":
        return _QUOTE in data
    if name == "object":
        return 0x7D in data  # '}': the only byte that completes an object item
    if name == "any":  # a byte that ends an item, or a letter of true/false/null
        return any(b in _ANY_CANDIDATE_BYTES for b in data)
    return not _NUMBER.issuperset(data) or (name == "integer" and set(data) <= {0x2D, 0x30})


class UniqueItemsMatcher:
    """One sequence's cursor: the inner matcher plus a `JsonCursor` per accepted step."""

    def __init__(self, grammar: UniqueItemsGrammar) -> None:
        self.grammar = grammar
        self._inner: Matcher = grammar.inner.matcher()
        self._token_bytes = grammar.vocab.token_bytes
        self._eos_ids = frozenset(grammar.vocab.eos_token_ids)
        self._cursors: list[JsonCursor] = [
            JsonCursor(grammar.patterns, grammar.text_patterns, grammar.count_patterns)
        ]
        self._scratch: torch.Tensor | None = None  # (1, W) int32 CPU row for the inner mask
        self._num_words = (grammar.vocab_size + 31) // 32  # W of the inner grammar's rows
        # cursor states -> {quoted token: refused} (_forbidden_free, _forbidden_open)
        self._free_refused: dict[tuple, dict[int, bool]] = {}

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
        bad = self._refusal(self._kind(), self._is_counting(), None)
        if bad is None:
            return np.zeros(0, dtype=np.int64)
        if isinstance(bad, _PackedRefusal):
            return np.union1d(set_bit_ids(bad.words), bad.ids)
        return bad

    def _refusal(
        self, kind: Kind | None, is_counting: bool, inner_words: np.ndarray | None
    ) -> np.ndarray | _PackedRefusal | None:
        """What the mask clears from the inner grammar's row ``inner_words`` (None: read it
        here where needed): `_forbidden` of the cursor's ``kind`` (`_kind`), and where
        ``is_counting`` (`_is_counting`) the tokens whose separators pass a counted array's
        bound; None where nothing is walked."""
        if kind is None and not is_counting:
            return None
        if inner_words is None:
            inner_words = self._inner_words()
        bad = _NO_IDS if kind is None else self._forbidden(kind, inner_words)
        if not is_counting:
            return bad
        counted = self._forbidden_counts(self._cursors[-1], inner_words)
        if counted.size == 0:
            return bad
        if isinstance(bad, _PackedRefusal):
            return _PackedRefusal(bad.words, np.union1d(bad.ids, counted))
        return np.union1d(bad, counted)

    def _is_counting(self) -> bool:
        """Is an open counted array within a token's commas of its bound?"""
        cursor = self._cursors[-1]
        return bool(cursor.count_patterns) and cursor.is_near_count(self.grammar.max_commas)

    def _forbidden_counts(self, cursor: JsonCursor, inner_words: np.ndarray) -> np.ndarray:
        """The allowed tokens holding a comma that ``feed`` refuses (a separator that starts
        an item past a counted array's ``maxItems``, or any other refusal of the cursor's:
        ``feed`` checks them all, so the union with `_forbidden` stays exact). Inside a
        string only a token with a quote can reach a separator."""
        if self._inner.is_terminated():
            return _NO_IDS
        tables = self.grammar.tables
        is_in_string = cursor.mode in (_STRING, _ESCAPE, _HEX)
        commas = tables.quoted_comma_words if is_in_string else tables.comma_words
        num_words = min(len(commas), len(inner_words))
        token_ids = set_bit_ids(inner_words[:num_words] & commas[:num_words])
        return np.asarray(self._walk_refused(cursor, token_ids), dtype=np.int64)

    def _inner_words(self) -> np.ndarray:
        """The inner grammar's mask row as uint32 words (filled into a CPU scratch row)."""
        if self._scratch is None:
            self._scratch = torch.zeros(
                (1, (self.grammar.vocab_size + 31) // 32), dtype=torch.int32
            )
        self._inner.fill_bitmask(self._scratch, 0)
        return self._scratch[0].numpy().view(np.uint32)

    def _kind(self) -> Kind | None:
        """`JsonCursor.check_kind`, or ``"open_text"`` where nothing else is walked but a
        token may open a counted string and break its bounds within itself."""
        cursor = self._cursors[-1]
        kind = cursor.check_kind()
        if kind is None and self.grammar.has_open_risk and cursor.text_guard is None:
            return "open_text"
        return kind

    def _forbidden(self, kind: Kind, inner_words: np.ndarray) -> np.ndarray | _PackedRefusal:
        """The allowed candidates (``inner_words`` AND ``kind``'s words) that ``feed`` refuses."""
        cursor = self._cursors[-1]
        tables = self.grammar.tables
        top = cursor.stack[-1] if cursor.stack else None
        # the array's first item: a token completes at most one item and starts none unless
        # it holds a comma, and one item alone repeats nothing (nor can a pending item be
        # left with only used values); a token with a comma is walked
        is_first_item = top is not None and top.kind is not None and not top.seen
        sparse = self.grammar.sparse_candidates(kind) if isinstance(kind, str) else None
        if sparse is not None and kind != "open_text" and kind != ANY_KIND and kind != "length":
            token_ids = set_ids_among(inner_words, sparse) if sparse.size else _NO_IDS
            if is_first_item and kind != "object":
                token_ids = token_ids[tables.has_comma[token_ids]]
            if token_ids.size == 0 or self._inner.is_terminated():
                return _NO_IDS
        else:
            if self._inner.is_terminated():
                return _NO_IDS
            if kind == "open_text":
                return self._forbidden_open(cursor, inner_words)
            if kind == ANY_KIND:
                return self._forbidden_any(cursor, inner_words)
            candidates = self.grammar.candidate_words(kind)
            num_words = min(len(candidates), len(inner_words))
            hits = inner_words[:num_words] & candidates[:num_words]  # (W,) uint32
            if kind == "length":
                return self._forbidden_length(cursor, hits)
            if is_first_item and kind != "object":
                hits &= tables.comma_words[:num_words]
            token_ids = set_bit_ids(hits)
            if token_ids.size == 0:
                return token_ids
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        if top is not None and isinstance(top.kind, ItemAutomaton):
            return self._forbidden_items(cursor, top.kind, top.seen, token_ids)
        if top is not None and top.kind == "string" and cursor.mode in (_BETWEEN, _STRING):
            # open string items: one spelling per string, so a token with one quote (no
            # backslash before it) repeats an item iff pending text + its head + '"' is a
            # completed item's text; between items such a token only opens one
            token_ids = token_ids[token_ids < len(tables.num_quotes)]
            if cursor.mode == _BETWEEN:
                token_ids = token_ids[tables.num_quotes[token_ids] > 1]
            elif cursor.raw is not None:
                # one spelling per string: a token that closes the item with nothing but the
                # next item's opening after it repeats an item iff pending + head + '"' is a
                # completed item's text; one that stays inside never does; the rest is walked
                pending, texts = cursor.raw, top.seen_texts
                heads, is_inside = tables.string_item_heads, tables.is_inside_string
                bad = []
                for t in token_ids.tolist():
                    head = heads.get(t)
                    if head is not None:
                        if pending + head + b'"' in texts:
                            bad.append(t)
                    elif not is_inside[t] and t not in eos_ids:
                        if cursor.feed(token_bytes[t]) is None:
                            bad.append(t)
                return np.asarray(bad, dtype=np.int64)
        if isinstance(top.kind if top else None, EnumDomain) and cursor.mode == _STRING:
            # an enum item being written: a token with one quote (no backslash before it)
            # completes it (a repeat iff its text is a completed item's); a token without a
            # quote extends it (a dead end iff only used values start like that)
            assert top is not None and isinstance(top.kind, EnumDomain)
            token_ids = token_ids[token_ids < len(tables.num_quotes)]
            pending, texts, heads = cursor.raw or b"", top.seen_texts, tables.heads
            next_heads = tables.next_item_heads
            domain, seen = top.kind, top.seen
            # a token of text alone (no quote or backslash) extends the item: a dead end iff
            # the text then is a prefix only used values start with (the inner grammar
            # allows only prefixes of values), found from those prefixes, not per token
            is_text = tables.is_plain_text[token_ids]
            bad = []
            for dead in domain.dead_prefixes(seen):
                if len(dead) > len(pending) and dead.startswith(pending):
                    bad += tables.ids_of_bytes(dead[len(pending) :])
            if bad:
                found = np.asarray(bad, dtype=np.int64)
                bad = found[_is_in(found, token_ids)].tolist()
            for t in token_ids[~is_text].tolist():
                if t in eos_ids:
                    continue
                num_quotes = tables.num_quotes[t]
                head = heads.get(t)
                if head is not None and num_quotes == 1 and 0x2C not in token_bytes[t]:
                    if pending + head + b'"' in texts:  # (no comma: no new item after it)
                        bad.append(t)
                elif (head := next_heads.get(t)) is not None:
                    # the item completes, then a comma: the next item needs an unused value
                    # (the completed item is one of the domain's values, not used before)
                    if pending + head + b'"' in texts or len(seen) + 1 >= len(domain.texts):
                        bad.append(t)
                elif cursor.feed(token_bytes[t]) is None:
                    bad.append(t)
            return np.asarray(bad, dtype=np.int64)
        if top is not None and top.kind in ("integer", "number"):
            # number items: between items only a token with a digit can complete one; inside
            # one, a token with a byte ending it and no digit after that completes exactly
            # the pending item, compared by value (numbers have several spellings)
            token_ids = token_ids[token_ids < len(tables.has_digit)]
            if cursor.mode == _BETWEEN:
                token_ids = token_ids[tables.has_digit[token_ids]]
            elif cursor.mode == _LITERAL and cursor.raw is not None:
                pending, heads = cursor.raw, tables.number_heads
                bad = []
                for t in token_ids.tolist():
                    head = heads.get(t)
                    if head is None:  # all number bytes, or digits after the end: walk it
                        if t not in eos_ids and cursor.feed(token_bytes[t]) is None:
                            bad.append(t)
                    elif json.loads(pending + head) in top.seen:
                        bad.append(t)
                return np.asarray(bad, dtype=np.int64)
        if kind == "object":
            # a token completes the pending object item only if it holds a closer for every
            # frame open inside it (the item's own included) and, in a string, a quote first
            depth = len(cursor.stack) - cursor.object_level if cursor.object_raw else 1
            token_ids = token_ids[token_ids < len(tables.num_closers)]
            token_ids = token_ids[tables.num_closers[token_ids] >= depth]
            if cursor.mode != _BETWEEN and cursor.mode != _LITERAL:
                token_ids = token_ids[tables.num_quotes[token_ids] > 0]
        bad = [
            t
            for t in token_ids.tolist()
            if t < len(token_bytes) and t not in eos_ids and cursor.feed(token_bytes[t]) is None
        ]
        return np.asarray(bad, dtype=np.int64)

    def _forbidden_any(self, cursor: JsonCursor, inner_words: np.ndarray) -> np.ndarray:
        """The tokens ``inner_words`` allows that ``feed`` refuses in an array of any values.

        Inside a container item only a token with a closer for every frame open in it can
        complete it (and, in a string, a quote first). Inside a string item only a quote ends
        it: a token with one quote (no backslash before it) and inert bytes after it repeats
        an item iff pending text + its head + ``"`` is a completed string's text (looked up by
        head), the other quote tokens are walked. Between items a token can complete one or
        leave a literal's prefix only with two quotes, a closer, a comma, whitespace after
        another byte or a literal's letter last (`_VocabTables.any_words`); before the first
        item is complete, only with a comma as well."""
        tables = self.grammar.tables
        words = tables.any_words
        num_words = min(len(inner_words), len(words["quote"]))
        hits = inner_words[:num_words].copy()  # (W,) uint32
        mode = cursor.mode
        in_container = cursor.object_raw is not None
        array = cursor.stack[cursor.object_level - 1] if in_container else cursor.stack[-1]
        if not array.seen:
            hits &= tables.comma_words[:num_words]
        if in_container:
            hits &= words["closer"][:num_words]
            if mode != _BETWEEN and mode != _LITERAL:
                hits &= words["quote"][:num_words]
            token_ids = set_bit_ids(hits)
            depth = len(cursor.stack) - cursor.object_level
            token_ids = token_ids[tables.num_closers[token_ids] >= depth]
        elif mode == _STRING and cursor.raw is not None:
            # a string item completed by a token's head: looked up; other quote tokens walk
            pending, known = cursor.raw, []
            for text in array.seen_texts:
                if len(text) > len(pending) and text.startswith(pending):
                    known.append(tables.inert_ids_by_head.get(text[len(pending) : -1], ()))
            return self._known_and_walked(cursor, hits, known, words["string_walk"])
        elif mode == _BETWEEN:
            # an item a token starts and completes, or a literal prefix: looked up
            known = [tables.any_literal_ids.get(key, ()) for key in array.seen]
            known += [tables.any_item_ids_by_text.get(text, ()) for text in array.seen_texts]
            return self._known_and_walked(cursor, hits, known, words["between"])
        else:
            name = "literal" if mode == _LITERAL else "quote"
            token_ids = set_bit_ids(hits & words[name][:num_words])
            pending = cursor.raw
            if mode == _LITERAL and pending is not None and pending[:1] in _NUMBER_STARTS:
                return self._forbidden_pending_number(cursor, array, pending, token_ids)
        return np.asarray(self._walk_refused(cursor, token_ids), dtype=np.int64)

    def _forbidden_pending_number(
        self, cursor: JsonCursor, array: _Frame, pending: bytes, token_ids: np.ndarray
    ) -> np.ndarray:
        """`_forbidden_any`'s tokens for a pending number item (``inert_number_heads``): one
        of number bytes alone keeps it open (any number has infinitely many completions);
        one whose number bytes end it with only separators and closing brackets after them,
        or the next item's first byte, completes exactly that number, refused iff its value
        is an item (by `equality_key`); the others are walked."""
        tables, seen = self.grammar.tables, array.seen
        heads = tables.inert_number_heads
        token_ids = token_ids[~tables.is_number_text[token_ids]]  # (the number stays open)
        bad, walked = [], []
        for t in token_ids.tolist():
            head = heads.get(t)
            if head is None:
                walked.append(t)
                continue
            try:
                value = json.loads(pending + head)
            except ValueError:  # not a whole number there: the walk tells
                walked.append(t)
                continue
            if equality_key(value) in seen:
                bad.append(t)
        if walked:
            bad += self._walk_refused(cursor, np.asarray(walked, dtype=np.int64))
        return np.asarray(sorted(bad), dtype=np.int64)

    def _known_and_walked(
        self, cursor: JsonCursor, hits: np.ndarray, known: list[tuple[int, ...]], walk: np.ndarray
    ) -> np.ndarray:
        """The ids of ``known`` (refused by lookup) allowed in ``hits``, and the tokens of
        ``hits & walk`` that ``feed`` refuses, ascending."""
        num_words = len(hits)
        bad = [
            t
            for ids in known
            for t in ids
            if t >> 5 < num_words and (int(hits[t >> 5]) >> (t & 31)) & 1
        ]
        bad += self._walk_refused(cursor, set_bit_ids(hits & walk[:num_words]))
        return np.asarray(sorted(bad), dtype=np.int64)

    def _walk_refused(self, cursor: JsonCursor, token_ids: np.ndarray) -> list[int]:
        """The ``token_ids`` (not EOS) whose bytes ``cursor.feed`` refuses."""
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        return [
            t
            for t in token_ids.tolist()
            if t < len(token_bytes) and t not in eos_ids and cursor.feed(token_bytes[t]) is None
        ]

    def _forbidden_items(
        self, cursor: JsonCursor, automaton: ItemAutomaton, seen: frozenset, token_ids: np.ndarray
    ) -> np.ndarray:
        """The allowed ``token_ids`` that ``feed`` refuses in an ItemAutomaton array.

        Tokens whose bytes all stay inside the pending item (or a new one, between items)
        come from the automaton's token index with their end states: most are alive by the
        per-state value bound, the rest ask `ItemAutomaton.has_new_value`. Tokens that end
        an item, or start with a separator, are walked."""
        if cursor.item_state >= 0:
            state, prefix = cursor.item_state, cursor.raw or b""
        else:
            state, prefix = automaton.start, b""
        if (
            automaton.is_string_only
            and cursor.item_state >= 0
            and automaton.is_alive_fast(np.array([automaton.start]), len(seen) + 1)[0]
        ):
            return self._forbidden_string_items(cursor, seen, prefix, token_ids)
        # tokens shorter than the way to a value-finite or accepting state are never refused
        token_ids = long_enough(
            token_ids, self.grammar.tables.lengths, int(automaton.safe_horizon[state])
        )
        if token_ids.size <= _FEW_WALKED:  # (e.g. the long tokens, far from the item's end)
            return np.asarray(self._refused_item_tokens(cursor, token_ids), dtype=np.int64)
        # (S,) the states whose completions surely hold a value not seen yet
        is_alive = automaton.alive_states(len(seen))
        undecided_ids, undecided_ends, outside_ids = split_by_end(
            token_ids, automaton.token_ends(state, self.grammar.vocab), is_alive
        )
        undecided = zip(undecided_ids.tolist(), undecided_ends.tolist(), strict=True)
        token_bytes = self._token_bytes
        if automaton.is_string_only:
            # an item's text is its key: only a token that continues the pending text along
            # an earlier item's text can lead to nothing but repeats
            suspects = self.grammar.tables.continuations(prefix, seen)
            undecided = ((t, end) for t, end in undecided if t in suspects)
        bad = [
            t
            for t, end in undecided
            if not automaton.has_new_value(end, prefix + token_bytes[t], seen, is_checked=True)
        ]
        bad += self._refused_item_tokens(cursor, outside_ids)
        return np.asarray(sorted(bad), dtype=np.int64)

    def _refused_item_tokens(self, cursor: JsonCursor, token_ids: np.ndarray) -> list[int]:
        """The ``token_ids`` that ``cursor.feed`` refuses, cursor in an ItemAutomaton array:
        inside a pending item, read off the item automaton where `_item_token_refused`
        decides; every other token walked."""
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        top = cursor.stack[-1]
        automaton, seen = top.kind, top.seen
        assert isinstance(automaton, ItemAutomaton)
        state, prefix = cursor.item_state, cursor.raw or b""
        # between items (no other frame open inside the array: its items are automaton
        # bytes) the same reading applies
        is_read = state >= 0 or (
            cursor.mode == _BETWEEN and cursor.text_guard is None and cursor.object_raw is None
        )
        bad = []
        for t in token_ids.tolist():
            if t >= len(token_bytes) or t in eos_ids:
                continue
            data = token_bytes[t]
            refused = None
            if is_read:
                refused = _item_token_refused(automaton, state, prefix, data, seen, top.expects_key)
            if refused is None:
                refused = cursor.feed(data) is None
            if refused:
                bad.append(t)
        return bad

    def _forbidden_length(
        self, cursor: JsonCursor, hits: np.ndarray
    ) -> np.ndarray | _PackedRefusal:
        """The allowed tokens (packed ``hits``, ``(W,)`` uint32) that ``feed`` refuses in a
        counted string.

        A token without a quote or backslash keeps the string open and adds its characters
        (``tables.num_chars``); it can break the bounds only if the count after it plus the
        shortest completion anywhere could pass ``max_len``, or while the count is under
        ``min_len`` where some state's completions are bounded: those are looked up with
        their end states (the guard's token index) and tested with `LengthGuard.fits`. The
        tokens with a quote or a backslash (few: they may close the string) are walked."""
        guard = cursor.text_guard
        assert guard is not None
        state, num_chars = cursor.text_state, cursor.num_chars
        tables = self.grammar.tables
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        num_words = len(hits)
        if self._is_free(cursor, guard):
            return self._forbidden_free(cursor, hits)
        room = INFINITE if guard.max_len is None else guard.max_len - num_chars
        top = cursor.stack[-1] if cursor.stack else None
        # a quote that closes the string: decided by the guard alone where the rest of the
        # token is structure feed checks nothing in (no guarded array holds the string, whose
        # item would complete at the quote; no object item kept whose end a closer could be)
        may_close_by_head = (top is None or top.kind is None) and cursor.mode == _STRING
        if guard.is_plain_count and guard.shortest_at(state) <= room:
            if guard.is_content(state):
                rows = tables.content_counts
            else:  # the rows of the bytes after the escape (whose quote closes the string)
                is_escape, hex_left = guard.escape_left(state)
                rows = tables.escape_counts[0 if is_escape else hex_left]
                may_close_by_head = top is None or top.kind is None
            return self._forbidden_plain_count(cursor, hits, room, may_close_by_head, rows)
        walked = set_bit_ids(hits & tables.other_words[:num_words]).tolist()
        # plain tokens that might leave too little room (more than ``room - max_shortest``
        # characters), or all while too few characters for min_len may remain
        most = room - guard.max_shortest  # (a plain token adding more is risky)
        if num_chars < guard.min_len and guard.has_bounded_content:
            risky_words = tables.plain_words[:num_words]
        elif most < 0:
            risky_words = tables.plain_words[:num_words]
        elif most < len(tables.more_chars_words):
            risky_words = tables.more_chars_words[most, :num_words]
        else:
            risky_words = None
        plain = _NO_IDS if risky_words is None else set_bit_ids(hits & risky_words)
        heads = tables.closing_heads if may_close_by_head else {}
        is_kept_object = cursor.object_raw is not None
        bad = []
        for t in walked:
            if t in eos_ids:
                continue
            data, head = token_bytes[t], heads.get(t)
            refused = None
            if head is not None and not (is_kept_object and tables.num_closers[t]):
                refused = guard.refuses_closing(state, num_chars, head)
            if refused is None:
                refused = cursor.feed(data) is None
            if refused:
                bad.append(t)
        if plain.size <= _FEW_WALKED:
            bad += [t for t in plain.tolist() if cursor.feed(token_bytes[t]) is None]
            return np.asarray(sorted(bad), dtype=np.int64)
        ends = guard.token_ends(state, self.grammar.vocab)[plain]  # (k,)
        added = tables.num_chars[plain] - _escape_bytes(guard, state, tables, plain)  # (k,)
        for t, end, num_added in zip(plain.tolist(), ends.tolist(), added.tolist(), strict=True):
            if end < 0 or not guard.fits(end, num_chars + num_added):
                bad.append(t)
        return np.asarray(sorted(bad), dtype=np.int64)

    def _forbidden_plain_count(
        self,
        cursor: JsonCursor,
        hits: np.ndarray,
        room: int,
        may_close_by_head: bool,
        rows: _CountRows,
    ) -> _PackedRefusal:
        """`_forbidden_length` for a guard with `LengthGuard.is_plain_count` in a state
        whose text fits (``room`` characters left), read off ``rows`` (the state's: content,
        or an escape the token's first bytes finish). A token that keeps the string open
        (escapes included) is refused iff it adds more than ``room`` characters; one whose
        quote closes it, with inert bytes after (``may_close_by_head``: nothing after the
        quote is checked there but a closer ending a kept object item), iff its characters
        before the quote do: the inner grammar follows the same string texts, so the token
        is a valid continuation and, closing, leaves it at its minLength or more. The other
        tokens with a quote or a backslash (a few) are walked."""
        num_words = len(hits)
        settled = rows.settled[:num_words]
        if not may_close_by_head:
            settled = settled & ~rows.closing[:num_words]
        elif cursor.object_raw is not None:
            settled = settled & ~rows.closing_closer[:num_words]
        refused_words = np.zeros(num_words, dtype=np.uint32)
        if room < len(rows.more_chars):
            refused_words = hits & settled & rows.more_chars[room, :num_words]
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        walked = [
            t
            for t in set_bit_ids(hits & ~settled).tolist()
            if t not in eos_ids and cursor.feed(token_bytes[t]) is None
        ]
        return _PackedRefusal(refused_words, np.asarray(walked, dtype=np.int64))

    def _forbidden_open(self, cursor: JsonCursor, inner_words: np.ndarray) -> np.ndarray:
        """The ``"open_text"`` candidates the inner grammar allows (``inner_words``: its
        packed row) that ``feed`` refuses: a few quoted tokens, their bits read alone, each
        walked once per cursor state outside counted strings (everything ``feed`` reads
        there; e.g. every position inside another string)."""
        walked = set_ids_among(inner_words, self.grammar.open_ids).tolist()
        if not walked:
            return _NO_IDS
        key = (
            "open", cursor.stack, cursor.mode, cursor.hex_left, cursor.is_key, cursor.raw,
            cursor.item_state, cursor.object_raw, cursor.object_level,
        )  # fmt: skip
        return np.asarray(self._refused_once(cursor, key, walked), dtype=np.int64)

    def _refused_once(self, cursor: JsonCursor, key: tuple, walked: list[int]) -> list[int]:
        """The ``walked`` tokens ``cursor.feed`` refuses, each verdict kept under ``key`` (a
        cursor state that fixes it) for the next mask there."""
        decided = self._free_refused.get(key)
        if decided is None:
            if len(self._free_refused) >= _MAX_FREE_MEMO:
                self._free_refused.pop(next(iter(self._free_refused)))
            decided = self._free_refused[key] = {}
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        bad = []
        for t in walked:
            refused = decided.get(t)
            if refused is None:
                refused = t not in eos_ids and cursor.feed(token_bytes[t]) is None
                decided[t] = refused
            if refused:
                bad.append(t)
        return bad

    def _is_free(self, cursor: JsonCursor, guard: LengthGuard) -> bool:
        """Is the counted string pending at ``cursor`` in plain content with room for the
        most characters a token adds, every open state able to reach ``min_len`` (no
        content state with boundedly many characters ahead), outside guarded arrays and
        kept object items? Then only closing the string early can break its bounds."""
        if cursor.mode != _STRING:
            return False
        room = INFINITE if guard.max_len is None else guard.max_len - cursor.num_chars
        if room < self.grammar.tables.max_chars:
            return False
        if cursor.num_chars < guard.min_len and guard.has_bounded_content:
            return False
        top = cursor.stack[-1] if cursor.stack else None
        return (
            (top is None or top.kind is None) and cursor.object_raw is None and cursor.raw is None
        )

    def _forbidden_free(self, cursor: JsonCursor, hits: np.ndarray) -> np.ndarray:
        """`_forbidden_length` where `_is_free`. A token without a quote stays in the string,
        whose automaton the inner grammar already follows there (the same texts), within the
        bounds: never refused. A token whose one quote closes the string and whose other
        bytes open nothing (``closing_heads``) is refused iff its characters before the
        quote leave the string under ``min_len`` (read off a table). The other quoted tokens
        the inner grammar allows (a few) are walked, each once per (string automaton state,
        open containers, characters still missing): what they do after the quote depends
        on nothing else."""
        tables = self.grammar.tables
        guard = cursor.text_guard
        assert guard is not None
        missing = max(guard.min_len - cursor.num_chars, 0)
        bad_heads = _NO_IDS
        if missing:
            short = tables.closing_head_chars < missing
            bad_heads = set_ids_among(hits, tables.closing_head_ids[short])
        walked = set_ids_among(hits, tables.quoted_open_ids).tolist()
        if not walked:
            return bad_heads
        key = (id(guard), cursor.text_state, cursor.stack, missing)
        bad = self._refused_once(cursor, key, walked)
        if not bad:
            return bad_heads
        return np.asarray(sorted({*bad_heads.tolist(), *bad}), dtype=np.int64)

    def _forbidden_string_items(
        self, cursor: JsonCursor, seen: frozenset, prefix: bytes, token_ids: np.ndarray
    ) -> np.ndarray:
        """`_forbidden_items` for string items (an item's text is its key) inside a pending
        item, where a new item always has a new value within reach (the start state has
        more values than the items so far and the pending one). A token can be refused only
        if it continues the pending text along an earlier item's text (walked), or if it
        holds a quote: one that ends the item at its first quote is refused iff the text so
        far plus its bytes before that quote, closed, is an earlier item's (looked up by
        those bytes); the others are walked."""
        tables = self.grammar.tables
        token_bytes, eos_ids = self._token_bytes, self._eos_ids
        suspects = list(tables.continuations(prefix, seen))
        bad: list[int] = []
        for text in seen:
            data = text.encode()
            if data.startswith(prefix) and len(data) > len(prefix):
                found = tables.ids_by_head.get(data[len(prefix) : -1])
                if found is not None:
                    bad += found[_is_in(found, token_ids)].tolist()
        walked = np.concatenate([np.asarray(suspects, dtype=np.int64), tables.walked_quote_ids])
        walked = walked[_is_in(walked, token_ids)]
        bad += [
            t
            for t in walked.tolist()
            if t not in eos_ids and t < len(token_bytes) and cursor.feed(token_bytes[t]) is None
        ]
        return np.unique(np.asarray(bad, dtype=np.int64))

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """The inner mask, less the tokens that would repeat an item."""
        self._inner.fill_bitmask(bitmask, row)
        kind, is_counting = self._kind(), self._is_counting()
        if not is_counting and (kind is None or self.grammar.has_no_candidates(kind)):
            return
        # the numpy rows the inner fill prepared (kept process-wide: a fresh torch index and
        # numpy view cost 5-30 us on a mask's path, the cached one well under 1 us)
        rows = prepared_rows(bitmask, self._num_words, self.grammar.vocab_size)
        is_cpu = rows is not None and 0 <= row < rows.shape[0]
        if is_cpu:
            assert rows is not None
            inner_words = rows[row].view(np.uint32)  # (W,)
        else:
            target = bitmask[row] if bitmask.dim() == 2 else bitmask  # (W,) int32
            is_cpu = target.device.type == "cpu" and target.is_contiguous()
            inner_words = target.numpy().view(np.uint32) if is_cpu else self._inner_words()
        bad = self._refusal(kind, is_counting, inner_words)
        assert bad is not None
        if isinstance(bad, _PackedRefusal):
            num_words = len(bad.words)
            if is_cpu:
                inner_words[:num_words] &= ~bad.words
            else:
                keep = torch.from_numpy((~bad.words).view(np.int32)).to(target.device)
                target[:num_words] &= keep
            bad = bad.ids
        if bad.size == 0:
            return
        words = bad >> 5
        if is_cpu and bad.size > _MANY_IDS:
            clear = np.zeros(len(inner_words), dtype=np.uint32)  # (W,) the bits to clear
            np.bitwise_or.at(clear, words, np.left_shift(1, bad & 31).astype(np.uint32))
            inner_words &= ~clear
            return
        if is_cpu:
            # in place through the numpy view (a torch index-put costs ~0.3 ms here)
            for word, bit in zip(words.tolist(), (bad & 31).tolist(), strict=True):
                inner_words[word] &= np.uint32(~(1 << bit) & 0xFFFFFFFF)
            return
        # bit b of a word cleared: AND with ~(1 << b), as int32 (bit 31 is the sign bit)
        clear = np.full(int(words.max()) + 1, -1, dtype=np.int64)
        for word, bit in zip(words.tolist(), (bad & 31).tolist(), strict=True):
            clear[word] &= ~(1 << bit)
        used = np.unique(words)
        masks = torch.from_numpy(clear[used].astype(np.uint32).view(np.int32))
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
        twin._scratch = None
        twin._free_refused = {}
        return twin

    def __repr__(self) -> str:
        return f"UniqueItemsMatcher(accepted={self.num_accepted}, inner={self._inner!r})"


def _escape_bytes(
    guard: LengthGuard, state: int, tables: _VocabTables, token_ids: np.ndarray | None = None
) -> np.ndarray:
    """``(V,)`` (or over ``token_ids``) int64: the leading bytes of each token without a
    quote or a backslash that finish an escape pending at ``state`` (after a backslash: the
    escaped byte, ``u`` with four hex digits; inside ``\\uXXXX``: the digits left). They
    are ASCII, each counted once in ``tables.num_chars``, and add no character."""
    ids = slice(None) if token_ids is None else token_ids
    is_escape, hex_left = guard.escape_left(state)
    lengths = tables.lengths[ids]
    if is_escape:
        return np.where(tables.first_bytes[ids] == 0x75, np.minimum(lengths, 5), 1)  # \u
    return np.minimum(lengths, hex_left)


def _string_effect(data: bytes) -> tuple[int, int]:
    """``(characters, index of the closing quote or -1)`` of ``data`` read from a JSON
    string's content: a byte there starts a character unless it continues a UTF-8 one or is
    the closing quote; an escape is one character, counted at its backslash."""
    num_chars, hex_left, is_escape = 0, 0, False
    for index, byte in enumerate(data):
        if hex_left:
            hex_left -= 1
        elif is_escape:
            is_escape = False
            hex_left = 4 if byte == 0x75 else 0  # \uXXXX
        elif byte == _QUOTE:
            return num_chars, index
        else:
            is_escape = byte == _BACKSLASH
            num_chars += not 0x80 <= byte < 0xC0
    return num_chars, -1


def _num_chars(data: bytes) -> int:
    """Characters ``data`` adds inside a string: its bytes that start a UTF-8 character."""
    return sum(1 for b in data if not 0x80 <= b < 0xC0)


def _closing_quote(data: bytes) -> int:
    """The index of the first quote of ``data`` that no backslash escapes, read from inside a
    string's content (-1: none, the token stays inside the string)."""
    is_escaped = False
    for i, byte in enumerate(data):
        if is_escaped:
            is_escaped = False
        elif byte == _BACKSLASH:
            is_escaped = True
        elif byte == _QUOTE:
            return i
    return -1


def _has_comma_inside_bracket(data: bytes) -> bool:
    """Does some ``[`` of ``data`` have a comma after it before the bracket that closes it
    (nested brackets and braces counted; quotes ignored, so a comma in a string counts too:
    an over-approximation, which only walks more tokens)?"""
    for i, byte in enumerate(data):
        if byte != _BRACKET:
            continue
        depth = 0
        for later in data[i + 1 :]:
            if later == 0x2C:
                return True
            if later in b"[{":
                depth += 1
            elif later in b"]}":
                if depth == 0:
                    break
                depth -= 1
    return False


def _item_token_refused(
    automaton: ItemAutomaton,
    state: int,
    prefix: bytes,
    data: bytes,
    seen: frozenset,
    expects_item: bool = False,
) -> bool | None:
    """Does `JsonCursor.feed` refuse ``data`` in an ItemAutomaton array, read inside a
    pending item (``prefix`` so far, in ``state``) or between items (``state`` -1; with
    ``expects_item``, after a comma: an item must come), or None where only the walk can
    tell?

    An item's bytes go to its automaton until one has no move (feed's rule): a token that
    stays inside is refused iff every completion of the item repeats an item; one that ends
    it is refused iff the item is incomplete there or repeats an item. Between items,
    whitespace, then a comma (the next item must come: some unused value must remain) or
    the next item's bytes, walked the same way with the completed item in ``seen``. A
    closing bracket leaves the array: without a comma after it the rest can only be
    whitespace and closing brackets, and no frame that a closing bracket ends checks
    anything here (no guarded array lies inside an item of another); with one, only the
    walk can tell (None)."""
    i, num_bytes = 0, len(data)
    item_start = 0
    completed = None  # an item completed in the token, not in ``seen`` yet (keyed lazily)

    def has_new_value(state: int, text: bytes) -> bool:
        nonlocal seen, completed
        if automaton.surely_has_new(state, len(seen) + (completed is not None)):
            return True
        if completed is not None:
            seen, completed = seen | {item_key(completed)}, None
        return automaton.has_new_value(state, text, seen, is_checked=True)

    while True:
        if state < 0:  # between items
            while i < num_bytes and data[i] in _WHITESPACE:
                i += 1
            if i < num_bytes and data[i] == 0x2C:
                expects_item = True
                i += 1
                while i < num_bytes and data[i] in _WHITESPACE:
                    i += 1
            if i == num_bytes:
                return expects_item and not has_new_value(automaton.start, b"")
            if data[i] == 0x5D:  # ']': the array closes
                return None if 0x2C in data[i:] else False
            state, prefix, item_start, expects_item = automaton.start, b"", i, False
        while i < num_bytes:
            after = automaton.step(state, data[i])
            if after < 0:
                break
            state = after
            i += 1
        if i == num_bytes:
            return not has_new_value(state, prefix + data[item_start:])
        if not automaton.is_accepting[state]:
            return True
        if completed is not None:
            seen, completed = seen | {item_key(completed)}, None
        item = prefix + data[item_start:i]
        if seen and item_key(item) in seen:
            return True
        completed = item
        state = -1


@numba.njit(cache=True, nogil=True)
def long_enough(token_ids, lengths, min_length):  # pragma: no cover - jitted
    """The ``token_ids`` (ascending int64) with an entry in ``lengths`` of at least
    ``min_length`` bytes, in order (one pass)."""
    out = np.empty(token_ids.shape[0], np.int64)
    k = 0
    for t in token_ids:
        if t < lengths.shape[0] and lengths[t] >= min_length:
            out[k] = t
            k += 1
    return out[:k]


@numba.njit(cache=True, nogil=True)
def split_by_end(token_ids, ends, is_alive):  # pragma: no cover - jitted
    """Split ``token_ids`` by their end state in an item automaton (``ends``, ``(V,)``, ``-1``
    where a token leaves the item): ``(undecided ids, their end states, outside ids)``, in
    order; a token inside the item whose end state ``is_alive`` (``(S,)``, from
    `ItemAutomaton.is_alive_fast`) is dropped."""
    num = token_ids.shape[0]
    undecided = np.empty(num, np.int64)
    undecided_ends = np.empty(num, np.int64)
    outside = np.empty(num, np.int64)
    k = m = 0
    for t in token_ids:
        end = ends[t]
        if end < 0:
            outside[m] = t
            m += 1
        elif not is_alive[end]:
            undecided[k] = t
            undecided_ends[k] = end
            k += 1
    return undecided[:k], undecided_ends[:k], outside[:m]
