"""Free-text languages of structural tags: text that stops where a stop string first occurs.

``free_text_tree(stops, excludes, follow)`` is the syntax tree of

    { s : no string of ``stops`` or ``excludes`` occurs in s, and (when ``follow`` is given)
          no string of ``stops`` occurs in s + follow starting before len(s) }

over characters (every code point but the surrogates). With ``follow`` the literal that the
grammar puts right after the free text (a tag's begin, which starts with a trigger, or an end
string), this says: the free text ends exactly where the *first* occurrence of a stop string
begins, so ``s + follow`` has one reading, never a second one in which the stop string started
earlier (trigger ``"aa"``: ``"a" + "aa"`` is refused, the trigger occurs at 0 already).
Occurrences are counted inside ``s + follow`` only: text before the free text (a previous
tag's end) does not complete a stop string that begins in it.

Construction: an Aho-Corasick automaton over characters of ``stops + excludes`` (states: the
prefixes of those strings; a state is the longest suffix of the text read that is one), with
the states whose string ends in an occurrence removed (dead); the accepting states are those
from which reading ``follow`` completes no stop string that began before ``follow``. That
depends only on the state and on ``follow``'s first ``max(len(stop)) - 1`` characters. The
alphabet is the characters of the strings, one class each, plus the gaps between them (which
lead back to the root). The DFA is minimised and written as a syntax tree by state elimination
(:func:`~formcast.grammar.json_schema.dfa_to_tree.dfa_tree`), a terminal of the CFG like any
other, so its byte automaton and lexer walks are built once and mask time reads precomputed
rows: no string is searched per token.
"""

from __future__ import annotations

import functools
from collections import deque

import numpy as np

from formcast.grammar import caches
from formcast.grammar.json_schema.char_dfa import (
    Alphabet,
    CharDFA,
    KeyLanguageTooLarge,
    minimize,
)
from formcast.grammar.json_schema.dfa_to_tree import dfa_tree
from formcast.grammar.regex.char_classes import ANY
from formcast.grammar.regex.combinators import chars, star
from formcast.grammar.regex.syntax_tree import Node

# bound on a free-text tree's printed size (num_chars); larger stop sets are refused
MAX_FREE_TEXT_TREE_CHARS = 2_000_000


class FreeTextTooLarge(ValueError):
    """The stop strings' free-text automaton writes a tree over ``MAX_FREE_TEXT_TREE_CHARS``."""


def free_text_tree(stops: tuple[str, ...], excludes: tuple[str, ...], follow: str | None) -> Node:
    """The syntax tree of the free text described in the module docstring.

    Parameters
    ----------
    stops : tuple of str
        Non-empty strings whose first occurrence ends the free text (triggers, end strings).
    excludes : tuple of str
        Non-empty strings that must not occur inside the free text.
    follow : str or None
        The literal right after the free text (``None``: nothing constrains it).

    Returns
    -------
    Node
        A character-level syntax tree (its language always holds the empty string).

    Raises
    ------
    FreeTextTooLarge
        The tree would be too large.
    """
    stop_set = tuple(sorted(set(stops)))
    exclude_set = tuple(sorted(set(excludes) - set(stops)))
    if follow is not None and stop_set:
        longest = max(map(len, stop_set))
        follow = follow[: longest - 1]
    else:
        follow = None
    return _tree(stop_set, exclude_set, follow)


@functools.lru_cache(maxsize=256)
def _tree(stops: tuple[str, ...], excludes: tuple[str, ...], follow: str | None) -> Node:
    patterns = stops + excludes
    if not patterns:
        return star(chars(ANY))
    dfa, alphabet = _automaton(stops, patterns, follow)
    try:
        tree = dfa_tree(minimize(dfa), alphabet, MAX_FREE_TEXT_TREE_CHARS, encode=chars)
    except KeyLanguageTooLarge as exc:
        raise FreeTextTooLarge(
            f"the free text that stops at {list(stops)} and excludes {list(excludes)} is too "
            f"large to compile ({exc})"
        ) from None
    assert tree is not None  # the empty string is always free text
    return tree


def _automaton(
    stops: tuple[str, ...], patterns: tuple[str, ...], follow: str | None
) -> tuple[CharDFA, Alphabet]:
    """Complete character DFA: Aho-Corasick over ``patterns``, hits dead, accepting by
    ``follow`` (see module docstring). State 0 is the root; the last state is dead."""
    # trie of every prefix
    prefixes: dict[str, int] = {"": 0}
    for pattern in patterns:
        for end in range(1, len(pattern) + 1):
            prefixes.setdefault(pattern[:end], len(prefixes))
    strings = sorted(prefixes, key=lambda p: prefixes[p])
    pattern_set = set(patterns)
    characters = sorted({c for p in patterns for c in p})
    alphabet = Alphabet([((ord(c), ord(c)),) for c in characters])
    num_states = len(strings)
    dead = num_states
    # one column per alphabet class; classes holding no pattern character act alike
    class_char: list[str | None] = [None] * alphabet.num_classes
    for c in characters:
        class_char[alphabet.class_of(ord(c))] = c
    is_valid_class = [_is_in_any(alphabet.starts[k]) for k in range(alphabet.num_classes)]
    # Aho-Corasick: goto over the trie, failure links breadth first
    fail = [0] * num_states
    is_hit = [False] * num_states
    delta: list[dict[str, int]] = [{} for _ in range(num_states)]
    order = deque([0])
    seen = [False] * num_states
    seen[0] = True
    while order:
        q = order.popleft()
        text = strings[q]
        is_hit[q] = text in pattern_set or (q != 0 and is_hit[fail[q]])
        for c in characters:
            child = prefixes.get(text + c)
            if child is not None:
                delta[q][c] = child
                fail[child] = 0 if q == 0 else delta[fail[q]][c]
                if not seen[child]:
                    seen[child] = True
                    order.append(child)
            else:
                delta[q][c] = 0 if q == 0 else delta[fail[q]][c]
    table = np.full((num_states + 1, alphabet.num_classes), dead, dtype=np.int32)
    for q in range(num_states):
        if is_hit[q]:
            continue
        for k in range(alphabet.num_classes):
            if not is_valid_class[k]:
                continue
            c = class_char[k]
            target = 0 if c is None else delta[q][c]
            table[q, k] = dead if is_hit[target] else target
    accepting = np.zeros(num_states + 1, dtype=bool)
    stop_set = set(stops)
    for q in range(num_states):
        if not is_hit[q]:
            accepting[q] = follow is None or not _stop_straddles(strings[q], follow, stop_set)
    return CharDFA(table, accepting), alphabet


def _stop_straddles(text: str, follow: str, stops: set[str]) -> bool:
    """True if a stop string starts inside ``text`` and ends inside ``follow``."""
    for start in range(len(text)):
        head = text[start:]
        for k in range(1, len(follow) + 1):
            if head + follow[:k] in stops:
                return True
    return False


def _is_in_any(code_point: int) -> bool:
    return any(lo <= code_point <= hi for lo, hi in ANY)


caches.register("structural_tag.free_text_trees", "LRU: 256 trees", _tree.cache_clear)
