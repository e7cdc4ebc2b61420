"""ByteNFA: a Thompson-style NFA over bytes built from a regex syntax tree.

States carry byte-range edges and epsilon edges. A code point set becomes the (suffix-shared)
UTF-8 fragment of :mod:`formcast.grammar.utf8_sequences`. Counted repetition ``X{m,n}`` is
expanded into ``m`` copies followed by ``n - m`` optional copies whose skip edges all go
straight to one exit state, so epsilon closures stay O(1) per copy instead of O(n).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from formcast.grammar.compile_budget import CompileBudget
from formcast.grammar.regex_ast import Alternation, Anchor, CharSet, Concat, Node, Repeat
from formcast.grammar.utf8_sequences import fragment


@dataclass
class ByteNFA:
    """An epsilon-NFA over bytes with one start and one final state.

    Attributes
    ----------
    byte_edges:
        ``byte_edges[s]`` lists ``(lo, hi, target)``: bytes ``lo..hi`` lead from ``s`` to target.
    epsilon_edges:
        ``epsilon_edges[s]`` lists the targets reachable without input.
    positions:
        Pattern offset that created each state (for error messages).
    """

    byte_edges: list[list[tuple[int, int, int]]]
    epsilon_edges: list[list[int]]
    positions: list[int]
    start: int = 0
    final: int = 0

    @property
    def num_states(self) -> int:
        return len(self.byte_edges)


def build_nfa(node: Node, budget: CompileBudget) -> ByteNFA:
    """Thompson construction of ``node`` (anchors must already be stripped)."""
    builder = _Builder(budget)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        start, end = builder.build(node, 0)
    finally:
        sys.setrecursionlimit(limit)
    builder.nfa.start, builder.nfa.final = start, end
    return builder.nfa


class _Builder:
    def __init__(self, budget: CompileBudget) -> None:
        self.nfa = ByteNFA([], [], [])
        self.budget = budget

    def new_state(self, position: int) -> int:
        self.nfa.byte_edges.append([])
        self.nfa.epsilon_edges.append([])
        self.nfa.positions.append(position)
        return len(self.nfa.byte_edges) - 1

    def build(self, node: Node, position: int) -> tuple[int, int]:
        """Add ``node``'s states; return its (entry, exit) states."""
        if isinstance(node, CharSet):
            return self.char_set(node)
        if isinstance(node, Concat):
            entry = exit_ = self.new_state(position)
            for item in node.items:
                if isinstance(item, CharSet) and not self.nfa.byte_edges[exit_]:
                    # chain the fragment onto exit_ directly: exit_ has no outgoing edges yet
                    # and a fragment entry has no incoming ones, so no epsilon is needed
                    exit_ = self.char_set(item, entry=exit_)[1]
                    continue
                first, last = self.build(item, position)
                self.nfa.epsilon_edges[exit_].append(first)
                exit_ = last
            return entry, exit_
        if isinstance(node, Alternation):
            entry, exit_ = self.new_state(position), self.new_state(position)
            for option in node.options:
                first, last = self.build(option, position)
                self.nfa.epsilon_edges[entry].append(first)
                self.nfa.epsilon_edges[last].append(exit_)
            return entry, exit_
        if isinstance(node, Repeat):
            return self.repeat(node)
        if isinstance(node, Anchor):
            raise AssertionError("anchors must be stripped before building the NFA")
        raise TypeError(f"unknown regex node {node!r}")

    def char_set(self, node: CharSet, entry: int | None = None) -> tuple[int, int]:
        """Instantiate the UTF-8 fragment; its entry node is ``entry`` if given (no epsilon)."""
        num_nodes, edges = fragment(node.ranges)
        nfa = self.nfa
        base = nfa.num_states
        nfa.byte_edges.extend([] for _ in range(num_nodes))
        nfa.epsilon_edges.extend([] for _ in range(num_nodes))
        nfa.positions.extend([node.pos] * num_nodes)
        if entry is None:
            entry = base
        byte_edges = nfa.byte_edges
        for src, lo, hi, dst in edges:
            byte_edges[entry if src == 0 else base + src].append((lo, hi, base + dst))
        if nfa.num_states > self.budget.max_nfa_states:
            self.budget.check_nfa_states(nfa.num_states, node.pos)
        return entry, base + 1

    def repeat(self, node: Repeat) -> tuple[int, int]:
        num_copies = max(node.min_count, node.max_count or 0)
        self.budget.check_nfa_states(self.nfa.num_states + num_copies, node.pos)
        entry = exit_ = self.new_state(node.pos)
        first = last = entry
        for _ in range(node.min_count):
            first, last = self.build(node.item, node.pos)
            self.nfa.epsilon_edges[exit_].append(first)
            exit_ = last
            self.budget.check_nfa_states(self.nfa.num_states, node.pos)
            self.budget.check_time("expanding a counted repetition", node.pos)
        if node.max_count is None and node.min_count > 0:
            # X{m,} : the last mandatory copy loops back to its own entry
            self.nfa.epsilon_edges[last].append(first)
            return entry, exit_
        if node.max_count is None:
            # X* : loop through one copy
            first, last = self.build(node.item, node.pos)
            loop = self.new_state(node.pos)
            self.nfa.epsilon_edges[exit_].append(loop)
            self.nfa.epsilon_edges[loop].append(first)
            self.nfa.epsilon_edges[last].append(loop)
            return entry, loop
        if node.max_count == node.min_count:
            return entry, exit_
        final = self.new_state(node.pos)
        for _ in range(node.max_count - node.min_count):
            first, last = self.build(node.item, node.pos)
            self.nfa.epsilon_edges[exit_].extend((first, final))
            exit_ = last
            self.budget.check_nfa_states(self.nfa.num_states, node.pos)
            self.budget.check_time("expanding a counted repetition", node.pos)
        self.nfa.epsilon_edges[exit_].append(final)
        return entry, final
