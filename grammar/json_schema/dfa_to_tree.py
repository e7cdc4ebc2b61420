"""A small character DFA -> syntax tree, by state elimination (or an automaton node).

The states of a :class:`~formcast.grammar.json_schema.char_dfa.CharDFA` that can reach
acceptance become nodes of a generalised automaton whose edges carry syntax trees (one edge
per target: ``encode`` of the union of its alphabet classes, by default their JSON string text
``charset.encode_charset``, or the plain code point set ``combinators.chars``), plus a fresh
source (the empty string to the start) and sink (the empty string from every accepting state).
Eliminating node ``v`` replaces ``p -> v -> q`` by ``R(p,q) | R(p,v) R(v,v)* R(v,q)``; what is
left on the source -> sink edge is the language. Characters are encoded one by one and the
JSON encoding is a prefix code, so the tree describes exactly the JSON texts of the DFA's
strings.

Order: the node with the least estimated growth first (Brzozowski-McCluskey heuristic:
``sum |in| (outs - 1) + sum |out| (ins - 1) + |loop| (ins outs - 1)``, sizes in ``num_chars``),
recomputed for the neighbours of each eliminated node. A trie-shaped part (declared names
excluded from a key class) is then eliminated leaves first and the tree stays linear in the
trie. Every edge's tree is bounded by ``max_chars`` (``num_chars``) and ``MAX_NESTING`` levels
(:class:`~formcast.grammar.json_schema.char_dfa.KeyLanguageTooLarge`): tree walkers further
on (the NFA builder, the printer, hashing) recurse once per level.

Where the tree is over those bounds (the keys other than ``[a-z0-9_-]{1,255}``: a chain of
257 states nests ~250 levels deep), :func:`dfa_automaton` writes the same language as an
:class:`~formcast.grammar.regex.syntax_tree.Automaton` node instead: a byte NFA with one state
per live DFA state and, per edge, the NFA of its encoded class set between them, determinised
and minimised. It has no regex text (``json_schema_to_regex`` refuses it, naming its label).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.json_schema.char_dfa import Alphabet, CharDFA, KeyLanguageTooLarge
from formcast.grammar.json_schema.charset import Intervals, encode_charset
from formcast.grammar.regex.combinators import repeat, seq
from formcast.grammar.regex.syntax_tree import (
    EMPTY,
    Alternation,
    Automaton,
    Node,
    children,
)

# bound on a key class's tree (``num_chars``; JSON text, quotes excluded)
MAX_KEY_TREE_CHARS = 300_000
# syntax tree levels (about two per printed group: a concatenation holding an alternation
# or a repetition); tree walkers recurse per level, so stay far below Python's limit
MAX_NESTING = 200


def dfa_tree(
    dfa: CharDFA,
    alphabet: Alphabet,
    max_chars: int = MAX_KEY_TREE_CHARS,
    encode: Callable[[Intervals], Node | None] = encode_charset,
) -> Node | None:
    """A syntax tree for ``dfa``'s language, by state elimination.

    Parameters
    ----------
    dfa : CharDFA
        A complete character DFA (start state 0), best minimised.
    alphabet : Alphabet
        The alphabet ``dfa``'s columns are classes of.
    max_chars : int
        Bound on every intermediate edge tree's ``num_chars``.
    encode : Callable[[Intervals], Node | None]
        Writes one code point set: by default its JSON string text (the tree is then over
        JSON string content, without quotes); ``combinators.chars`` gives a character-level
        tree.

    Returns
    -------
    Node | None
        The language as a tree, ``None`` when it is empty.

    Raises
    ------
    KeyLanguageTooLarge
        An edge tree grows over ``max_chars`` or nests over ``MAX_NESTING`` levels.
    """
    table = dfa.table
    num_states = len(table)
    # states on some path from the start to acceptance: every edge tree between them ends up
    # inside the result, so bounding each edge's tree bounds the result and nothing more
    live = _co_reachable(table, dfa.is_accepting) & _reachable(table)
    if not live[0]:
        return None
    source, sink = num_states, num_states + 1
    out: list[dict[int, Node]] = [{} for _ in range(num_states + 2)]
    into: list[set[int]] = [set() for _ in range(num_states + 2)]
    depths = _Depths(num_states)

    def connect(p: int, q: int, label: Node) -> None:
        old = out[p].get(q)
        out[p][q] = label = label if old is None else _union(old, label)
        depths.check(label)
        if label.num_chars > max_chars:
            raise KeyLanguageTooLarge(
                f"state elimination tree over {max_chars} characters ({num_states} states)"
            )
        into[q].add(p)

    connect(source, 0, EMPTY)
    rows = table.tolist()
    labels: dict[tuple[int, ...], Node | None] = {}
    for p in range(num_states):
        if not live[p]:
            continue
        for t, key in _classes_by_target(rows[p], live).items():
            if key not in labels:  # rows share class sets (e.g. "any other character")
                labels[key] = encode(alphabet.charset(key))
            label = labels[key]
            if label is not None:
                connect(p, t, label)
        if dfa.is_accepting[p]:
            connect(p, sink, EMPTY)

    def weight(v: int) -> int:
        ins = [p for p in into[v] if p != v]
        outs = [q for q in out[v] if q != v]
        loop = out[v].get(v)
        loop_chars = 0 if loop is None else loop.num_chars
        return (
            sum(out[p][v].num_chars for p in ins) * (len(outs) - 1)
            + sum(out[v][q].num_chars for q in outs) * (len(ins) - 1)
            + loop_chars * (len(ins) * len(outs) - 1)
        )

    remaining = {v for v in range(num_states) if live[v]}
    heap = [(weight(v), v) for v in remaining]
    heapq.heapify(heap)
    while heap:
        w, v = heapq.heappop(heap)
        if v not in remaining or w != weight(v):
            continue
        remaining.discard(v)
        loop = out[v].pop(v, None)
        into[v].discard(v)
        star = EMPTY if loop is None else repeat(loop, 0, None)
        preds = list(into[v])
        succs = list(out[v].items())
        for p in preds:
            head = out[p].pop(v)
            for q, tail in succs:
                label = seq(head, star, tail)  # never None: no part is
                if label is not None:
                    connect(p, q, label)
        for q, _ in succs:
            into[q].discard(v)
        out[v].clear()
        into[v].clear()
        for u in {*preds, *(q for q, _ in succs)} & remaining:
            heapq.heappush(heap, (weight(u), u))
    return out[source].get(sink)


def _union(old: Node, new: Node) -> Node:
    """``old | new`` with the options of both flattened and repeated options dropped.

    Like ``combinators.alt`` but without hashing: a tree's hash is recomputed through every
    level on each call, and edge trees are unioned many times while they grow. Two options are
    compared only when they are the same object or have the same size.
    """
    kept = list(old.options) if isinstance(old, Alternation) else [old]
    for leaf in new.options if isinstance(new, Alternation) else (new,):
        if not any(k is leaf or (k.num_chars == leaf.num_chars and k == leaf) for k in kept):
            kept.append(leaf)
    return kept[0] if len(kept) == 1 else Alternation(tuple(kept))


class _Depths:
    """Tree depths (levels of nodes) memoised per node object, for the ``MAX_NESTING`` check.

    State elimination shares subtrees between edges, so each node object is measured once; the
    memo keeps the nodes alive so that their ids stay theirs.
    """

    def __init__(self, num_states: int) -> None:
        self.num_states = num_states
        self.memo: dict[int, tuple[Node, int]] = {}

    def check(self, node: Node) -> None:
        """Raise :class:`KeyLanguageTooLarge` if ``node`` is over ``MAX_NESTING`` levels."""
        if self.depth(node) > MAX_NESTING:
            raise KeyLanguageTooLarge(
                f"tree nested over {MAX_NESTING} levels ({self.num_states} states; e.g. a long "
                "counted repetition under a complement)"
            )

    def depth(self, node: Node) -> int:
        """Levels of ``node`` (a leaf is 1), computed iteratively (post-order)."""
        memo = self.memo
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            current, is_expanded = stack.pop()
            if id(current) in memo:
                continue
            subtree_list = children(current)
            if is_expanded or not subtree_list:
                deepest = max((memo[id(c)][1] for c in subtree_list), default=0)
                memo[id(current)] = (current, deepest + 1)
                continue
            stack.append((current, True))
            stack.extend((c, False) for c in subtree_list if id(c) not in memo)
        return memo[id(node)][1]


def dfa_automaton(
    dfa: CharDFA,
    alphabet: Alphabet,
    label: str,
    encode: Callable[[Intervals], Node | None] = encode_charset,
) -> Node | None:
    """``dfa``'s language (written by ``encode``, as :func:`dfa_tree` writes it) as an
    :class:`~formcast.grammar.regex.syntax_tree.Automaton` node named ``label``; ``None``
    when it is empty.

    The byte NFA has a state per DFA state on a path from the start to acceptance, and per
    edge ``p -> t`` (the classes leading there, encoded once per distinct class set) a copy
    of that tree's NFA between them; the encoding is a prefix code, so the determinised,
    minimised result reads exactly the encoded strings of the language.

    Raises
    ------
    CompileBudgetError
        The byte automaton is over the default state budget.
    """
    table = dfa.table
    live = _co_reachable(table, dfa.is_accepting) & _reachable(table)
    if not live[0]:
        return None
    budget = CompileBudget()
    byte_edges: list[list[tuple[int, int, int]]] = []
    epsilon_edges: list[list[int]] = []

    def new_state() -> int:
        byte_edges.append([])
        epsilon_edges.append([])
        return len(byte_edges) - 1

    entry = {int(p): new_state() for p in np.flatnonzero(live)}
    final = new_state()
    pieces: dict[tuple[int, ...], ByteNFA | None] = {}
    rows = table.tolist()
    for p, source in entry.items():
        if dfa.is_accepting[p]:
            epsilon_edges[source].append(final)
        for t, key in _classes_by_target(rows[p], live).items():
            if key not in pieces:
                tree = encode(alphabet.charset(key))
                pieces[key] = None if tree is None else build_nfa(tree, budget)
            piece = pieces[key]
            if piece is None:
                continue
            assert not piece.edge_blocks  # one character's encoding: no counted chains
            offset = len(byte_edges)
            for edges, eps in zip(piece.byte_edges, piece.epsilon_edges, strict=True):
                byte_edges.append([(lo, hi, target + offset) for lo, hi, target in edges])
                epsilon_edges.append([target + offset for target in eps])
            epsilon_edges[source].append(piece.start + offset)
            epsilon_edges[piece.final + offset].append(entry[t])
    nfa = ByteNFA(byte_edges, epsilon_edges, [0] * len(byte_edges), entry[0], final)
    byte_dfa = minimize(determinize(nfa, budget), budget)
    return Automaton.of(byte_dfa.transitions, byte_dfa.byte_to_class, byte_dfa.is_accepting, label)


def tree_or_automaton(
    dfa: CharDFA,
    alphabet: Alphabet,
    label: str,
    *,
    allow_automaton: bool = True,
    max_chars: int = MAX_KEY_TREE_CHARS,
    encode: Callable[[Intervals], Node | None] = encode_charset,
) -> Node | None:
    """:func:`dfa_tree`, or where its tree is over its bounds and ``allow_automaton``,
    :func:`dfa_automaton` named ``label`` (``KeyLanguageTooLarge`` otherwise: a caller that
    must print a regex)."""
    try:
        return dfa_tree(dfa, alphabet, max_chars=max_chars, encode=encode)
    except KeyLanguageTooLarge:
        if not allow_automaton:
            raise
        return dfa_automaton(dfa, alphabet, label, encode=encode)


def _classes_by_target(row: list[int], live: np.ndarray) -> dict[int, tuple[int, ...]]:
    """The classes of one DFA row that lead to each live target (ascending)."""
    by_target: dict[int, list[int]] = {}
    for c, t in enumerate(row):
        if live[t]:
            by_target.setdefault(t, []).append(c)
    return {t: tuple(classes) for t, classes in by_target.items()}


def _reachable(table: np.ndarray) -> np.ndarray:
    """(n,) bool: states reachable from the start state 0."""
    reach = np.zeros(len(table), dtype=bool)
    reach[0] = True
    frontier = np.array([0])
    while frontier.size:
        nxt = np.unique(table[frontier])
        nxt = nxt[~reach[nxt]]
        reach[nxt] = True
        frontier = nxt
    return reach


def _co_reachable(table: np.ndarray, is_accepting: np.ndarray) -> np.ndarray:
    """(n,) bool: states from which an accepting state can be reached."""
    live = is_accepting.copy()
    while True:
        grown = live | live[table].any(axis=1)
        if (grown == live).all():
            return live
        live = grown
