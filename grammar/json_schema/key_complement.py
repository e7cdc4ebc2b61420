"""key_complement: the JSON string keys other than an object's declared names.

An object that allows extra properties (no ``patternProperties``) writes them with a key that
is no declared name. Two constructions of the same language (the canonical encodings of every
string except the names: formcast writes each character one way, so unequal strings are
unequal texts):

- **an automaton** (the default): the byte trie of the encoded names run alongside the DFA of
  any string contents ``F``. A trie node is paired with the ``F`` state its bytes lead to; a
  byte no name continues with leaves the trie for ``F`` itself (from that state). The table is
  filled with a few numpy gathers, so it costs about the names' total length, where the tree
  below cost ~0.3 ms per name (and its NFA as much again) on every compile of an open object.
- **a syntax tree** (where regex text is wanted, ``json_schema_to_regex``): on the trie of the
  names, at each node a key may leave the trie with a character no name continues with, or end
  where no name ends.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from formcast.grammar.automata.byte_dfa import ByteDFA, split_classes
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.charset import (
    JSON_CHAR,
    complement,
    encode_charset,
    intersect,
    normalize,
)
from formcast.grammar.regex.char_classes import Ranges
from formcast.grammar.regex.combinators import alt, literal, seq, star
from formcast.grammar.regex.syntax_tree import EMPTY, Automaton, Node


def key_complement(names: list[str], any_string: Node, as_automaton: bool = True) -> Node:
    """JSON string keys (quotes included) other than ``names``: ``any_string`` unless names
    exist; the string contents as an :class:`~formcast.grammar.regex.syntax_tree.Automaton`
    node, or (``as_automaton=False``) as a regex tree."""
    if not names:
        return any_string
    if as_automaton:
        return _names_complement_automaton(tuple(names))
    return _names_complement(tuple(names))


def _encoded(name: str) -> str:
    """``name``'s JSON text inside the quotes, as formcast writes it."""
    return json.dumps(name, ensure_ascii=False)[1:-1]


@functools.lru_cache(maxsize=512)
def _names_complement_automaton(names: tuple[str, ...]) -> Node:
    """`key_complement` of nonempty ``names`` as an automaton node (one per name list, shared
    by every object that declares it).

    Minimal as built: trie nodes are merged bottom up (children before parents) where they
    agree on being a name's end, on their F state and on their merged children, i.e. where
    their rows are equal (the minimisation of an acyclic automaton, one pass); F's states are
    F's minimal ones, and no trie node equals one of them (a name through it is missing from
    its language, and distinct F states differ on infinitely many strings). Every state is
    reachable from the root and reaches acceptance (F accepts from each of its states)."""
    free = _string_contents_dfa()
    free_rows = _string_contents_rows()  # (F, 256)
    free_moves = _string_contents_moves()  # the same as lists (one Python index per byte)
    # the trie of the encoded names; node k's F state is where its bytes lead from F's start
    children: list[dict[int, int]] = [{}]
    free_of = [free.start_state]
    is_name = [False]
    for name in names:
        try:
            text = _encoded(name).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no key can be this name
            continue
        node = 0
        for byte in text:
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = len(children)
                children[node][byte] = nxt
                children.append({})
                free_of.append(free_moves[free_of[node]][byte])
                is_name.append(False)
            node = nxt
        is_name[node] = True
    # bottom up (a child's index is above its parent's): one merged state per distinct row
    merged = [0] * len(children)
    signatures: dict[tuple, int] = {}
    for k in range(len(children) - 1, -1, -1):
        edges = children[k]
        kids: tuple
        if len(edges) > 1:  # ((byte, merged child), ...) by byte: the row's canonical order
            kids = tuple(sorted([(byte, merged[child]) for byte, child in edges.items()]))
        elif edges:  # a chain link (most trie nodes): its one (byte, merged child) pair
            ((byte, child),) = edges.items()
            kids = (byte, merged[child])
        else:
            kids = ()
        merged[k] = signatures.setdefault((is_name[k], free_of[k], kids), len(signatures))
    # number the merged states from the root (state 0) down; F's states after them
    num_trie = len(signatures)
    renumber = [num_trie - 1 - m for m in range(num_trie)]  # (the root was merged last)
    first = {}  # merged state -> a trie node of it
    for k in range(len(children)):
        first.setdefault(renumber[merged[k]], k)
    nodes = [first[state] for state in range(num_trie)]  # (M,) a trie node per state
    left = np.where(free_rows >= 0, free_rows + num_trie, -1).astype(np.int32)
    table = np.concatenate([left[np.asarray([free_of[k] for k in nodes])], left])  # (M + F, 256)
    rows, columns, targets = [], [], []
    for state, k in enumerate(nodes):
        for byte, child in children[k].items():
            rows.append(state)
            columns.append(byte)
            targets.append(renumber[merged[child]])
    table[rows, columns] = targets
    is_accepting = np.concatenate(
        [
            free.is_accepting[np.asarray([free_of[k] for k in nodes])]
            & ~np.asarray([is_name[k] for k in nodes]),
            free.is_accepting,
        ]
    )
    # byte classes: F's, each byte of a name split off (only they have trie edges)
    byte_to_class, representative = split_classes(free.byte_to_class, columns)
    table = np.ascontiguousarray(table[:, representative])  # (M + F, K)
    quote = literal('"')
    label = f"keys other than {len(names)} declared names"
    return seq(quote, Automaton.of(table, byte_to_class, is_accepting, label), quote)


@functools.lru_cache(maxsize=1)
def _string_contents_rows() -> np.ndarray:
    """``(F, 256)`` int32: `_string_contents_dfa`'s moves by byte (read-only)."""
    free = _string_contents_dfa()
    rows = free.transitions[:, free.byte_to_class].astype(np.int32)
    rows.setflags(write=False)
    return rows


@functools.lru_cache(maxsize=1)
def _string_contents_moves() -> list[list[int]]:
    """`_string_contents_rows` as Python lists: ``moves[state][byte]``."""
    return _string_contents_rows().tolist()


@functools.lru_cache(maxsize=1)
def _string_contents_dfa() -> ByteDFA:
    """The minimal byte DFA of any JSON string's contents (``JSON_CHAR*``)."""
    return regex_to_dfa(star(JSON_CHAR))


@functools.lru_cache(maxsize=512)
def _names_complement(names: tuple[str, ...]) -> Node:
    """`key_complement` of nonempty ``names`` as a tree (trees are immutable: one per name
    list, shared by every object that declares it, as an inlined ``$ref`` repeats its object)."""
    encoded = [_encoded(n) for n in names]
    quote = literal('"')
    return seq(quote, _complement(encoded, JSON_CHAR), quote)


def _complement(words: list[str], char: Node) -> Node:
    """JSON string contents (encoded) other than the encoded ``words`` (a finite set).

    ``E | L (char)*``: ``E`` = the trie prefixes that are not words (a finite set), ``L`` =
    a trie prefix followed by one character no word continues it with. Both are trie-shaped
    trees; the unbounded tail is written once, so the tree (and its NFA) stays linear in
    the trie size instead of carrying one tail per trie node. When every word is plain ASCII
    (no escapes), the characters no word uses at all (non-ASCII, escaped) are factored out
    too: ``L = L_ascii | P X`` with ``P`` any trie prefix and ``X`` those characters, so each
    trie node carries only a small ASCII class.
    """
    is_plain_ascii = all(all(0x20 <= ord(ch) < 0x7F and ch not in '"\\' for ch in w) for w in words)
    if is_plain_ascii:
        ascii_raw = normalize([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)])
        others = encode_charset(complement(ascii_raw))
    else:
        ascii_raw = others = None

    def node(rests: list[str]) -> tuple[Node | None, Node | None, Node | None]:
        """(stays not at a word, leaves by one character, every trie prefix)."""
        children: dict[str, list[str]] = {}
        for w in rests:
            if w:
                n = 6 if w.startswith("\\u") else 2 if w.startswith("\\") else 1
                children.setdefault(w[:n], []).append(w[n:])
        stays: list[Node | None] = [] if "" in rests else [EMPTY]
        prefixes: list[Node | None] = [EMPTY]
        cps = normalize([(ord(json.loads(f'"{u}"')),) * 2 for u in children])
        if ascii_raw is None:
            leave = encode_charset(complement(cps))
        else:
            leave = encode_charset(_minus(ascii_raw, cps))
        leaves: list[Node | None] = [leave]
        for unit, tails in children.items():
            stay, left, prefix = node(tails)
            if stay is not None:
                stays.append(seq(literal(unit), stay))
            if left is not None:
                leaves.append(seq(literal(unit), left))
            prefixes.append(seq(literal(unit), prefix))
        return alt(stays), alt(leaves), alt(prefixes)

    stay, left, prefix = node(words)
    if others is not None:
        left = alt([left, seq(prefix, others)])
    tail = None if left is None else seq(left, star(char))
    return alt([stay, tail]) or EMPTY


def _minus(a: Ranges, b: Ranges) -> Ranges:
    return intersect(a, complement(b))
