"""Character DFAs for key languages: ECMA patterns and name sets, products, minimisation.

``patternProperties`` splits the keys of an object into classes by the set of patterns they
match, and a class is a boolean combination of pattern languages (``L_1 & L_2 - L_3 - names``)
that a syntax tree cannot write directly. Here each pattern becomes a DFA over *characters*
(not JSON text): the alphabet is the partition of the code points cut at every interval bound
any pattern or name uses (:class:`Alphabet`), so every code point set of a pattern is a union
of alphabet classes. Patterns are Thompson NFAs of their character-level syntax tree nodes
(:mod:`~formcast.grammar.json_schema.ecma_pattern` branches, ``Σ*``-padded), determinised by
subset construction. :func:`product` explores tuples of states reachable together and marks
the tuples an arbitrary predicate accepts (intersection, difference and complement are all
predicates on the tuple); :func:`minimize` is Hopcroft's partition refinement (the automata kernel).
:mod:`~formcast.grammar.json_schema.dfa_to_tree` turns a small result back into a syntax tree.
Sizes are bounded (``MAX_NFA_STATES``, ``MAX_DFA_STATES``): over them
:class:`KeyLanguageTooLarge` is raised.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from formcast.grammar.automata import kernels
from formcast.grammar.json_schema import charset, ecma_pattern
from formcast.grammar.regex.syntax_tree import Alternation, CharSet, Concat, Node, Repeat

MAX_NFA_STATES = 20_000  # per pattern (bounded repetitions are copied)
MAX_DFA_STATES = 5_000  # per determinised pattern and per product


class KeyLanguageTooLarge(ValueError):
    """A pattern or key-class automaton exceeds its state budget."""


class Alphabet:
    """A partition of the code points into intervals, fine enough for the given charsets.

    Class ``k`` is ``[starts[k], starts[k + 1] - 1]``; a charset given to the constructor is
    exactly a union of classes (a bit set: :meth:`mask`).
    """

    def __init__(self, charsets: Iterable[charset.Intervals]) -> None:
        bounds = {0, charset.MAX_CODE_POINT + 1}
        for intervals in [charset.UNIVERSE, *charsets]:
            for lo, hi in intervals:
                bounds.add(lo)
                bounds.add(hi + 1)
        self.starts = sorted(bounds)[:-1]
        self.ends = [s - 1 for s in self.starts[1:]] + [charset.MAX_CODE_POINT]
        self.num_classes = len(self.starts)

    def class_of(self, code_point: int) -> int:
        return bisect_right(self.starts, code_point) - 1

    def mask(self, intervals: charset.Intervals) -> int:
        """Bit set of the classes ``intervals`` covers (it must be a union of classes)."""
        bits = 0
        for lo, hi in intervals:
            first, last = self.class_of(lo), self.class_of(hi)
            bits |= ((1 << (last - first + 1)) - 1) << first
        return bits

    def charset(self, class_ids: Iterable[int]) -> charset.Intervals:
        """The code points of the given classes, as normalised intervals."""
        return charset.normalize([(self.starts[k], self.ends[k]) for k in class_ids])


@dataclass
class CharDFA:
    """A complete DFA over an :class:`Alphabet`: start state 0, ``table`` (n, C) int32."""

    table: np.ndarray  # (num_states, num_classes) next state, every entry defined
    is_accepting: np.ndarray  # (num_states,) bool

    def run(self, alphabet: Alphabet, text: str) -> int:
        state = 0
        for ch in text:
            state = int(self.table[state, alphabet.class_of(ord(ch))])
        return state

    def accepts(self, alphabet: Alphabet, text: str) -> bool:
        return bool(self.is_accepting[self.run(alphabet, text)])


def pattern_charsets(nodes: Iterable[Node]) -> list[charset.Intervals]:
    """Every code point set that character-level ``nodes`` use (to build an :class:`Alphabet`).

    Parameters
    ----------
    nodes : Iterable[Node]
        Character-level syntax tree nodes (e.g. a padded
        :class:`~formcast.grammar.json_schema.ecma_pattern.Branch`).

    Returns
    -------
    list[charset.Intervals]
        The ranges of every ``CharSet`` in the nodes, in no particular order.

    Raises
    ------
    ecma_pattern.PatternRefused
        A node is not character-level (an anchor, a lookahead, a reference).
    """
    out: list[charset.Intervals] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, CharSet):
            out.append(node.ranges)
        elif isinstance(node, Concat):
            stack.extend(node.items)
        elif isinstance(node, Alternation):
            stack.extend(node.options)
        elif isinstance(node, Repeat):
            stack.append(node.item)
        else:
            raise ecma_pattern.PatternRefused(f"not a character-level node: {type(node).__name__}")
    return out


class _NFA:
    """Thompson NFA over alphabet classes: epsilon lists and ``(class bit set, target)``."""

    def __init__(self, alphabet: Alphabet) -> None:
        self.alphabet = alphabet
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int]]] = []

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise KeyLanguageTooLarge(f"pattern automaton over {MAX_NFA_STATES} NFA states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def sequence(self, nodes: Iterable[Node], start: int) -> int:
        """Add ``nodes`` one after another from state ``start``; return the end state."""
        for node in nodes:
            start = self.node(node, start)
        return start

    def node(self, node: Node, start: int) -> int:
        """Add ``node`` from state ``start`` (no edge into ``start`` is added); return its end."""
        if isinstance(node, CharSet):
            end = self.state()
            mask = self.alphabet.mask(node.ranges)
            if mask:
                self.edges[start].append((mask, end))
            return end
        if isinstance(node, Concat):
            return self.sequence(node.items, start)
        if isinstance(node, Alternation):
            end = self.state()
            for option in node.options:
                self.eps[self.node(option, start)].append(end)
            return end
        if isinstance(node, Repeat):
            for _ in range(node.min_count):
                start = self.node(node.item, start)
            if node.max_count is None:  # item*: a loop through a fresh entry state
                entry = self.state()
                self.eps[start].append(entry)
                self.eps[self.node(node.item, entry)].append(entry)
                return entry
            end = self.state()
            for _ in range(node.max_count - node.min_count):
                self.eps[start].append(end)
                start = self.node(node.item, start)
            self.eps[start].append(end)
            return end
        raise ecma_pattern.PatternRefused(f"not a character-level node: {type(node).__name__}")


def pattern_dfa(branches: list[ecma_pattern.Branch], alphabet: Alphabet) -> CharDFA:
    """DFA of the strings a pattern finds a match in (the union of its padded branches).

    Parameters
    ----------
    branches : list[ecma_pattern.Branch]
        The pattern's branches (character-level nodes; unanchored ends get ``Σ*``).
    alphabet : Alphabet
        An alphabet fine enough for every code point set of the branches.

    Returns
    -------
    CharDFA
        The subset construction of the branches' Thompson NFA (not minimised).

    Raises
    ------
    KeyLanguageTooLarge
        Over ``MAX_NFA_STATES`` NFA or ``MAX_DFA_STATES`` DFA states.
    """
    nfa = _NFA(alphabet)
    start = nfa.state()
    final = nfa.state()
    for branch in branches:
        nfa.eps[nfa.sequence(ecma_pattern.padded(branch), start)].append(final)
    return _determinize(nfa, start, final)


def _determinize(nfa: _NFA, start: int, final: int) -> CharDFA:
    closures: dict[int, frozenset[int]] = {}

    def closure(state: int) -> frozenset[int]:
        found = closures.get(state)
        if found is None:
            seen = {state}
            stack = [state]
            while stack:
                for t in nfa.eps[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            found = closures[state] = frozenset(seen)
        return found

    num_classes = nfa.alphabet.num_classes
    dead: frozenset[int] = frozenset()
    ids: dict[frozenset[int], int] = {dead: 0}
    subsets = [dead]
    first = closure(start)
    ids[first] = 1
    subsets.append(first)
    rows: list[list[int]] = [[0] * num_classes]
    k = 1
    while k < len(subsets):
        targets: list[set[int]] = [set() for _ in range(num_classes)]
        for s in subsets[k]:
            for mask, t in nfa.edges[s]:
                while mask:
                    low = mask & -mask
                    targets[low.bit_length() - 1].add(t)
                    mask ^= low
        row = []
        for ts in targets:
            subset = frozenset().union(*(closure(t) for t in ts)) if ts else dead
            row.append(_intern(subset, ids, subsets, "pattern automaton"))
        rows.append(row)
        k += 1
    table = np.array(rows, dtype=np.int32)
    accepting = np.array([final in s for s in subsets], dtype=bool)
    # renumber so that the start state is 0 (the dead state becomes 1)
    order = np.array([1, 0] + list(range(2, len(subsets))), dtype=np.int64)
    inverse = np.argsort(order)
    return CharDFA(inverse[table[order]].astype(np.int32), accepting[order])


def names_dfa(names: Iterable[str], alphabet: Alphabet) -> CharDFA:
    """DFA (a trie plus a dead state) accepting exactly the strings ``names``.

    Parameters
    ----------
    names : Iterable[str]
        The strings.
    alphabet : Alphabet
        An alphabet in which each character of ``names`` is a class of its own.

    Returns
    -------
    CharDFA
        The trie's DFA.
    """
    children: list[dict[int, int]] = [{}]
    ends = [False]
    for name in names:
        node = 0
        for ch in name:
            k = alphabet.class_of(ord(ch))
            nxt = children[node].get(k)
            if nxt is None:
                nxt = children[node][k] = len(children)
                children.append({})
                ends.append(False)
            node = nxt
        ends[node] = True
    dead = len(children)
    table = np.full((dead + 1, alphabet.num_classes), dead, dtype=np.int32)
    for node, kids in enumerate(children):
        for k, t in kids.items():
            table[node, k] = t
    return CharDFA(table, np.array(ends + [False], dtype=bool))


def _intern(key: Hashable, ids: dict, keys: list, what: str) -> int:
    """The state id of ``key`` in a subset or product construction, new ones numbered in
    order of discovery (``KeyLanguageTooLarge`` past ``MAX_DFA_STATES`` states)."""
    found = ids.get(key)
    if found is None:
        if len(keys) >= MAX_DFA_STATES:
            raise KeyLanguageTooLarge(f"{what} over {MAX_DFA_STATES} states")
        found = ids[key] = len(keys)
        keys.append(key)
    return found


def product(dfas: list[CharDFA], accept: Callable[[tuple[bool, ...]], bool]) -> CharDFA:
    """DFA of the strings whose tuple of acceptances (one per DFA) satisfies ``accept``.

    Parameters
    ----------
    dfas : list[CharDFA]
        DFAs over the same alphabet.
    accept : Callable[[tuple[bool, ...]], bool]
        Whether a tuple of acceptances (one per DFA, in order) is accepting.

    Returns
    -------
    CharDFA
        The product over the state tuples reachable together.

    Raises
    ------
    KeyLanguageTooLarge
        Over ``MAX_DFA_STATES`` reachable tuples.
    """
    tables = np.ascontiguousarray(np.concatenate([d.table for d in dfas]), dtype=np.int32)
    offsets = np.cumsum([0] + [len(d.table) for d in dfas]).astype(np.int64)  # (k + 1,)
    status, rows, tuples = kernels.product_rows(tables, offsets, MAX_DFA_STATES)
    if status:
        raise KeyLanguageTooLarge(f"key-class automaton over {MAX_DFA_STATES} states")
    # (M, k): each tuple's acceptance in each DFA
    finals = np.stack([d.is_accepting[tuples[:, i]] for i, d in enumerate(dfas)], axis=1)
    accepting = [accept(tuple(flags)) for flags in finals.tolist()]
    return CharDFA(rows, np.array(accepting, dtype=bool))


def minimize(dfa: CharDFA) -> CharDFA:
    """The minimal complete DFA (Hopcroft refinement; states unreachable from 0 dropped).

    Parameters
    ----------
    dfa : CharDFA
        A complete DFA.

    Returns
    -------
    CharDFA
        The equivalent minimal DFA, start state 0.
    """
    reach = np.zeros(len(dfa.table), dtype=bool)
    reach[0] = True
    frontier = np.array([0])
    while frontier.size:
        nxt = np.unique(dfa.table[frontier])
        nxt = nxt[~reach[nxt]]
        reach[nxt] = True
        frontier = nxt
    keep = np.flatnonzero(reach)  # keep[0] == 0
    renumber = np.full(len(dfa.table), -1, dtype=np.int64)
    renumber[keep] = np.arange(len(keep))
    table = renumber[dfa.table[keep]]
    # coarsest stable partition (Hopcroft; the table is complete, so no -1 entries)
    block, num_blocks = kernels.hopcroft(
        np.ascontiguousarray(table, dtype=np.int32),
        np.ascontiguousarray(dfa.is_accepting[keep], dtype=bool),
    )
    num_blocks = int(num_blocks)
    # renumber blocks so that the start state's block is 0, in order of first appearance
    order: dict[int, int] = {}
    for b in block.tolist():
        order.setdefault(b, len(order))
    start_block = block[0]
    ids = [start_block] + [b for b in order if b != start_block]
    position = np.empty(num_blocks, dtype=np.int64)
    position[ids] = np.arange(num_blocks)
    first_state = np.zeros(num_blocks, dtype=np.int64)
    first_state[block[::-1]] = np.arange(len(block) - 1, -1, -1)
    reps = first_state[ids]
    new_table = position[block[table[reps]]].astype(np.int32)
    return CharDFA(new_table, dfa.is_accepting[keep][reps])
