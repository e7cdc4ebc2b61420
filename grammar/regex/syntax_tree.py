"""Regex syntax tree: code point sets, concatenation, alternation, counted repetition, anchors,
the positive lookahead that formcast uses as a length guard (an intersection), and references
to the rules of a larger grammar.

The parser resolves every dialect question (what ``\\w`` or ``.`` means, case folding) into
explicit code point sets, so the tree is dialect-free: it denotes a set of strings, and
:func:`to_python_regex` spells that set back as an equivalent Python ``re`` pattern (this is
how an ECMA-262 ``pattern`` can be embedded in a larger Python-dialect regex). Grammars that
build large expressions (JSON Schema) build trees directly
(:mod:`~formcast.grammar.regex.combinators`); nothing is printed and parsed again.

Positions (``pos``, offsets in the pattern text for error messages) take no part in
equality: equal trees denote equal languages, whatever text they were parsed from, so trees
serve as memo keys (each node stores its hash, computed from its children's at construction,
so hashing a large tree costs O(1); built from ints only, so the stored hash is the same in
every process and a pickled tree stays consistent). Every node knows ``num_chars``, the
length of its :func:`to_python_regex` text, without printing it (the size measure of compile
budgets; invariant: ``node.num_chars == len(to_python_regex(node))`` for trees without
references).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.regex.char_classes import ANY, Ranges, to_class_text

# the printed length of a reference (a Plane 16 code point escape, as rule placeholders were)
REFERENCE_CHARS = 10


@dataclass(frozen=True, slots=True)
class CharSet:
    """One code point from ``ranges``; ``pos`` is its offset in the pattern text (-1: built)."""

    ranges: Ranges
    pos: int = field(compare=False)
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_chars", len(_charset_text(self.ranges)))
        object.__setattr__(self, "hash_value", hash((1, self.ranges)))

    def __hash__(self) -> int:
        return self.hash_value


def _scan(children: tuple[Node, ...], tag: int) -> tuple[int, int, bool, bool, bool, int, int]:
    """What a :class:`Concat` (``tag`` 2) or :class:`Alternation` (3) stores about its
    children: ``(their printed characters, the node's hash, a child is a lookahead, has a
    reference, has an anchor, largest count, children printed as a group of their own)``.

    The hash is that of ``tag`` and the children's stored hashes (ints): hashing the node
    tuple itself would call each child's Python-level ``__hash__``. One pass, dispatching on
    the exact type (the node classes are final)."""
    size = largest = num_groups = 0
    has_look = has_ref = has_anc = False
    hashes = [tag]
    for child in children:
        size += child.num_chars
        hashes.append(child.hash_value)
        kind = type(child)
        if kind is CharSet:
            continue
        if kind is Concat or kind is Alternation or kind is Repeat:
            has_ref = has_ref or child.has_reference  # type: ignore[union-attr]
            has_anc = has_anc or child.has_anchor  # type: ignore[union-attr]
            largest = max(largest, child.largest_count)  # type: ignore[union-attr]
            if kind is Alternation or (kind is Concat and child.has_lookahead):  # type: ignore[union-attr]
                num_groups += 1
        elif kind is Lookahead:
            has_look = True
            has_anc = has_anc or child.has_anchor  # type: ignore[union-attr]
            largest = max(largest, child.largest_count)  # type: ignore[union-attr]
        else:
            has_ref = has_ref or kind is Reference
            has_anc = has_anc or kind is Anchor
    return size, hash(tuple(hashes)), has_look, has_ref, has_anc, largest, num_groups


@dataclass(frozen=True, slots=True, init=False)
class Concat:
    """The items one after another (the empty concatenation matches the empty string)."""

    items: tuple[Node, ...]
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)
    # an item is a lookahead: printed as a group of its own (see ``is_guarded``)
    has_lookahead: bool = field(default=False, compare=False, repr=False)
    has_reference: bool = field(default=False, compare=False, repr=False)  # see has_reference
    has_anchor: bool = field(default=False, compare=False, repr=False)  # see has_anchor
    largest_count: int = field(default=0, compare=False, repr=False)  # see largest_count

    def __init__(self, items: tuple[Node, ...]) -> None:
        # every field set once (a generated frozen __init__ sets each twice: ~1 us a node)
        size, hash_value, has_look, has_ref, has_anc, largest, num_groups = _scan(items, 2)
        put = object.__setattr__
        put(self, "items", items)
        put(self, "num_chars", size + 4 * num_groups)  # "(?:" ... ")" around each group
        put(self, "hash_value", hash_value)
        put(self, "has_lookahead", has_look)
        put(self, "has_reference", has_ref)
        put(self, "has_anchor", has_anc)
        put(self, "largest_count", largest)

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True, init=False)
class Alternation:
    """Any one of the options."""

    options: tuple[Node, ...]
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)
    has_reference: bool = field(default=False, compare=False, repr=False)  # see has_reference
    has_anchor: bool = field(default=False, compare=False, repr=False)  # see has_anchor
    largest_count: int = field(default=0, compare=False, repr=False)  # see largest_count

    def __init__(self, options: tuple[Node, ...]) -> None:
        size, hash_value, _, has_ref, has_anc, largest, _ = _scan(options, 3)
        put = object.__setattr__  # (each field set once, see Concat)
        put(self, "options", options)
        put(self, "num_chars", max(size + len(options) - 1, 0))  # "|" between options
        put(self, "hash_value", hash_value)
        put(self, "has_reference", has_ref)
        put(self, "has_anchor", has_anc)
        put(self, "largest_count", largest)

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True, init=False)
class Repeat:
    """``item`` repeated ``min_count`` to ``max_count`` times (``None`` = unbounded)."""

    item: Node
    min_count: int
    max_count: int | None
    pos: int = field(compare=False)
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)
    has_reference: bool = field(default=False, compare=False, repr=False)  # see has_reference
    has_anchor: bool = field(default=False, compare=False, repr=False)  # see has_anchor
    largest_count: int = field(default=0, compare=False, repr=False)  # see largest_count

    def __init__(self, item: Node, min_count: int, max_count: int | None, pos: int) -> None:
        # every field set once (see Concat): 2.3 -> 1.7 us a node
        bound = min_count if max_count is None else max_count
        size = item.num_chars + (0 if type(item) is CharSet else 4)
        size += len(_counter_text(min_count, max_count))
        put = object.__setattr__
        put(self, "item", item)
        put(self, "min_count", min_count)
        put(self, "max_count", max_count)
        put(self, "pos", pos)
        put(self, "num_chars", size)
        put(
            self,
            "hash_value",
            hash((4, item.hash_value, min_count, -1 if max_count is None else max_count)),
        )
        put(self, "has_reference", has_reference(item))
        put(self, "has_anchor", has_anchor(item))
        put(self, "largest_count", max(bound, largest_count(item)))

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True)
class Anchor:
    """``^``/``\\A`` (``kind="start"``) or ``$``/``\\Z`` (``kind="end"``) at offset ``pos``."""

    kind: str
    pos: int = field(compare=False)
    num_chars: int = field(default=1, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_value", hash((5, self.kind == "start")))

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True)
class Reference:
    """Nonterminal ``index`` of a larger grammar, standing where its language goes.

    The structural JSON Schema route builds one tree per rule with references between them
    (``$ref`` targets, shared lexemes, recursion); no automaton is built for a tree that
    still holds one (the NFA builder refuses it).
    """

    index: int
    num_chars: int = field(default=REFERENCE_CHARS, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_value", hash((6, self.index)))

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True)
class Lookahead:
    """``(?=guard)``: the rest of the enclosing group must also match ``guard``.

    Inside a concatenation ``(?=A)R`` (``R`` = the items after it, up to the end of its group)
    denotes ``A & R`` (intersection) whenever no string of ``A`` is a proper prefix of a
    string of ``R`` or vice versa; then it equals ``re``'s lookahead for every continuation
    after the group. The automaton builder checks that condition and refuses otherwise.
    """

    guard: Node
    pos: int = field(compare=False)
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)
    has_anchor: bool = field(default=False, compare=False, repr=False)  # see has_anchor
    largest_count: int = field(default=0, compare=False, repr=False)  # see largest_count

    def __post_init__(self) -> None:
        object.__setattr__(self, "has_anchor", has_anchor(self.guard))
        object.__setattr__(self, "largest_count", largest_count(self.guard))
        object.__setattr__(self, "num_chars", self.guard.num_chars + 4)  # "(?=" ... ")"
        object.__setattr__(self, "hash_value", hash((7, self.guard.hash_value)))

    def __hash__(self) -> int:
        return self.hash_value


@dataclass(frozen=True, slots=True)
class Automaton:
    """A regular language given by its byte DFA, for languages whose regex text grows
    exponentially (``multipleOf 97`` over unbounded integers: the residues mod 97 are 97
    states, a regex for them millions of characters). It has no regex text:
    :func:`to_python_regex` refuses it, naming ``label``.

    The DFA is stored as bytes so that the node is immutable and hashable by content:
    ``table`` is the ``(num_states, num_classes)`` int32 transition table (row-major, start
    state 0, ``-1`` = no move), ``byte_classes`` the 256 byte -> class ids (uint8),
    ``accepting`` one byte (0/1) per state. Invariant: the DFA is trimmed (every state
    reachable from 0 and able to reach acceptance) and minimal, as its producers
    (``key_complement``, ``residues``) make it; ``nfa_builder.framed_automaton_dfa`` relies
    on it. ``num_chars`` stands for its size as a regex's would (one per state and per
    transition); the stored hash is a digest of the content, the same in every process.
    """

    table: bytes
    num_classes: int
    byte_classes: bytes
    accepting: bytes
    label: str = field(compare=False)
    num_chars: int = field(default=0, compare=False, repr=False)
    hash_value: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        num_states = len(self.accepting)
        if len(self.byte_classes) != 256 or len(self.table) != 4 * num_states * self.num_classes:
            raise ValueError("Automaton: table, byte classes and accepting sizes disagree")
        num_moves = int((self.transitions() >= 0).sum())
        object.__setattr__(self, "num_chars", num_states + num_moves)
        digest = hashlib.blake2b(digest_size=8)
        for part in (self.table, self.byte_classes, self.accepting):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        object.__setattr__(self, "hash_value", hash((8, int.from_bytes(digest.digest(), "little"))))

    def __hash__(self) -> int:
        return self.hash_value

    def transitions(self) -> np.ndarray:
        """``(num_states, num_classes)`` int32 (read-only view of ``table``)."""
        return np.frombuffer(self.table, dtype="<i4").reshape(len(self.accepting), -1)

    def classes(self) -> np.ndarray:
        """``(256,)`` uint8 byte -> class."""
        return np.frombuffer(self.byte_classes, dtype=np.uint8)

    def accepting_ids(self) -> list[int]:
        return [k for k, flag in enumerate(self.accepting) if flag]

    @classmethod
    def of(
        cls, transitions: np.ndarray, byte_classes: np.ndarray, is_accepting: np.ndarray, label: str
    ) -> Automaton:
        """The node of a DFA given as arrays (as :class:`~formcast.grammar.automata.byte_dfa.
        ByteDFA` holds them)."""
        table = np.ascontiguousarray(transitions, dtype="<i4")
        return cls(
            table.tobytes(),
            int(table.shape[1]),
            np.ascontiguousarray(byte_classes, dtype=np.uint8).tobytes(),
            np.asarray(is_accepting, dtype=np.uint8).tobytes(),
            label,
        )


Node = CharSet | Concat | Alternation | Repeat | Anchor | Lookahead | Reference | Automaton
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
    if not has_anchor(node):
        return node  # (most subtrees of a large schema's tree: no walk below them)
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
        return _charset_text(node.ranges)
    if isinstance(node, Concat):
        # a nested group holding a lookahead keeps its parentheses: the lookahead's scope (the
        # rest of its group) must not grow to the items after the group
        return "".join(
            _atom(item)
            if isinstance(item, Alternation) or is_guarded(item)
            else to_python_regex(item)
            for item in node.items
        )
    if isinstance(node, Alternation):
        return "|".join(to_python_regex(o) for o in node.options)
    if isinstance(node, Repeat):
        return _atom(node.item) + _counter_text(node.min_count, node.max_count)
    if isinstance(node, Lookahead):
        return f"(?={to_python_regex(node.guard)})"
    if isinstance(node, Reference):
        raise GrammarError(
            f"rule reference #{node.index} has no regular expression (a grammar's rule, "
            "not a regex)"
        )
    if isinstance(node, Automaton):
        raise GrammarError(
            f"{node.label} has no regular expression of a usable size (it is built as an "
            "automaton: compile the schema instead of printing it as a regex)"
        )
    return "^" if node.kind == "start" else "$"


def shown_text(node: Node, limit: int = 200) -> str:
    """The start of ``node``'s regex text for messages: never raises (a reference or an
    automaton inside is named instead)."""
    try:
        return to_python_regex(node)[:limit]
    except GrammarError:
        found = next((x for x in subtrees(node) if isinstance(x, (Automaton, Reference))), None)
        if isinstance(found, Automaton):
            return f"<automaton: {found.label}>"
        return "<a grammar rule reference>"


def _counter_text(min_count: int, max_count: int | None) -> str:
    """The quantifier of a repetition: ``* + ?`` where one fits, else ``{m}`` / ``{m,n}``."""
    if max_count is None:
        return "*" if min_count == 0 else "+" if min_count == 1 else f"{{{min_count},}}"
    if (min_count, max_count) == (0, 1):
        return "?"
    if min_count == max_count:
        return f"{{{min_count}}}"
    return f"{{{min_count},{max_count}}}"


@functools.lru_cache(maxsize=8192)
def _charset_text(ranges: Ranges) -> str:
    """One code point of ``ranges`` as Python regex text (a literal or a class)."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _literal(ranges[0][0])
    return to_class_text(ranges)


def has_reference(node: Node) -> bool:
    """True if a :class:`Reference` stands in ``node``'s concatenations, options and
    repetitions (not inside a lookahead's guard): then the node is no regular language by
    itself (a rule of a larger grammar). Constant time: each node computes it once."""
    kind = type(node)
    if kind is Reference:
        return True
    if kind is Concat or kind is Alternation or kind is Repeat:
        return node.has_reference  # type: ignore[union-attr]
    return False


def has_anchor(node: Node) -> bool:
    """True if an :class:`Anchor` stands anywhere in ``node`` (lookahead guards included).
    Constant time: each node computes it once."""
    kind = type(node)
    if kind is Anchor:
        return True
    if kind is Concat or kind is Alternation or kind is Repeat or kind is Lookahead:
        return node.has_anchor  # type: ignore[union-attr]
    return False


def largest_count(node: Node) -> int:
    """The largest bound of a counted repetition in ``node`` (``max_count``, or ``min_count``
    when unbounded; 0 without one). Constant time: each node computes it once."""
    kind = type(node)
    if kind is Concat or kind is Alternation or kind is Repeat or kind is Lookahead:
        return node.largest_count  # type: ignore[union-attr]
    return 0


def is_guarded(node: Node) -> bool:
    """True if ``node`` is a concatenation holding a lookahead (its own group when printed)."""
    return isinstance(node, Concat) and node.has_lookahead


def _atom(node: Node) -> str:
    text = to_python_regex(node)
    if isinstance(node, CharSet):
        return text
    return f"(?:{text})"


_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _literal(cp: int) -> str:
    ch = chr(cp)
    if 0x20 <= cp < 0x7F:  # printable ASCII: itself, escaped where re gives it a meaning
        return "\\" + ch if ch in _SPECIAL else ch
    return to_class_text(((cp, cp),))


caches.register("regex.charset_texts", "LRU: 8192 class texts", _charset_text.cache_clear)


def children(node: Node) -> tuple[Node, ...]:
    """The direct subtrees of ``node`` (none for sets, anchors and references)."""
    if isinstance(node, Concat):
        return node.items
    if isinstance(node, Alternation):
        return node.options
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, Lookahead):
        return (node.guard,)
    return ()


def subtrees(node: Node) -> Iterator[Node]:
    """Every distinct subtree object of ``node``, itself included, each once (iterative:
    built trees share subtrees and nest deeper than Python's recursion limit)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(children(current))
