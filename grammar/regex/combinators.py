"""Combinators that build regex syntax trees (for grammars that write large expressions).

The JSON Schema compiler describes each sub-schema's JSON texts by combining smaller trees;
these functions are its vocabulary. ``None`` stands for the empty language (an unsatisfiable
sub-schema): combinators propagate it, so :func:`seq` with an empty part is empty and
:func:`alt` drops empty options. Built nodes carry position ``-1`` (no pattern text behind
them). Nested concatenations and alternations are flattened, except a concatenation that
holds a lookahead (its scope is the rest of its own group, see
:class:`~formcast.grammar.regex.syntax_tree.Lookahead`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import overload

from formcast.grammar import caches
from formcast.grammar.regex.char_classes import Ranges, normalize
from formcast.grammar.regex.syntax_tree import (
    EMPTY,
    Alternation,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Repeat,
)


def chars(ranges: Ranges) -> Node | None:
    """One code point of ``ranges`` (normalised ranges); ``None`` if the set is empty."""
    return CharSet(ranges, -1) if ranges else None


def char_range(first: str, last: str) -> Node:
    """One character from ``first`` to ``last`` (inclusive, ``first <= last``)."""
    return CharSet(((ord(first), ord(last)),), -1)


@functools.lru_cache(maxsize=1024)
def one_of(characters: str) -> Node:
    """One of the given characters (a non-empty str)."""
    return CharSet(normalize([(ord(c), ord(c)) for c in characters]), -1)


@functools.lru_cache(maxsize=4096)
def _character(c: str) -> CharSet:
    """The shared node of one character (trees are immutable: one object serves all uses)."""
    return CharSet(((ord(c), ord(c)),), -1)


@functools.lru_cache(maxsize=4096)  # pure: keys and punctuation recur across a schema's trees
def literal(text: str) -> Node:
    """Exactly ``text``."""
    if len(text) == 1:
        return _character(text)
    return Concat(tuple(map(_character, text)))


@overload
def seq(*parts: Node) -> Node: ...


@overload
def seq(*parts: Node | None) -> Node | None: ...


def seq(*parts: Node | None) -> Node | None:
    """Concatenation; empty if any part is empty."""
    items: list[Node] = []
    for part in parts:
        if part is None:
            return None
        if isinstance(part, Concat) and not part.has_lookahead:
            items.extend(part.items)
        else:
            items.append(part)
    if len(items) == 1 and not isinstance(items[0], Lookahead):
        return items[0]
    return Concat(tuple(items))


def joined(items: list[Node], separator: Node) -> Node | None:
    """``items`` one after another with ``separator`` between them (``None`` if no items)."""
    if not items:
        return None
    parts = [items[0]]
    for item in items[1:]:
        parts += [separator, item]
    return seq(*parts)


def group(*parts: Node) -> Node:
    """``parts`` concatenated as one group of its own: a lookahead first in it guards only
    the rest of this group (``(?:(?=A)B)``), never what follows the group."""
    return Concat(parts)


def alt(options: Iterable[Node | None]) -> Node | None:
    """Union; empty options are dropped, duplicates removed (first occurrence kept)."""
    kept: list[Node] = []
    seen: set[Node] = set()
    for option in options:
        if option is None:
            continue
        for leaf in option.options if isinstance(option, Alternation) else (option,):
            if leaf not in seen:
                seen.add(leaf)
                kept.append(leaf)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else Alternation(tuple(kept))


def opt(node: Node | None) -> Node:
    """Zero or one occurrence; ``opt(None)`` is the empty string."""
    if node is None or node == EMPTY:
        return EMPTY
    return Repeat(node, 0, 1, -1)


def repeat(node: Node | None, min_count: int, max_count: int | None) -> Node | None:
    """``node{min_count,max_count}`` (``max_count=None``: unbounded); the empty language
    repeated zero times is the empty string."""
    if max_count is not None and max_count < min_count:
        return None
    if node is None:
        return EMPTY if min_count == 0 else None
    if node == EMPTY or max_count == 0:
        return EMPTY
    if (min_count, max_count) == (1, 1):
        return node
    return Repeat(node, min_count, max_count, -1)


def star(node: Node | None) -> Node:
    """Zero or more occurrences (``star(None)`` is the empty string)."""
    return repeat(node, 0, None) or EMPTY


def trie_alt(words: Iterable[str]) -> Node | None:
    """Union of the literal ``words`` factored as a trie (a small automaton)."""
    unique = sorted(set(words))
    if not unique:
        return None
    return _trie(unique)


def _trie(words: list[str]) -> Node:
    has_empty = "" in words
    by_head: dict[str, list[str]] = {}
    for word in words:
        if word:
            by_head.setdefault(word[0], []).append(word[1:])
    # heads that end a word and continue none: one class
    leaves = [head for head, tails in by_head.items() if tails == [""]]
    options: list[Node | None] = []
    if len(leaves) > 1:
        options.append(one_of("".join(leaves)))
    for head, tails in by_head.items():
        if len(leaves) > 1 and head in leaves:
            continue
        options.append(seq(literal(head), _trie(tails)))
    body = alt(options)
    if body is None:
        return EMPTY
    return opt(body) if has_empty else body


def _clear_memos() -> None:
    _character.cache_clear()
    one_of.cache_clear()
    literal.cache_clear()


caches.register(
    "regex.built_characters", "LRU: 4096 characters, 1024 classes, 4096 literals", _clear_memos
)
