"""Earley recognizer over terminal ids, with persistent, hash-consed chart sets.

An :class:`EarleyNode` is one Earley set: the items ``(rule, dot, origin)`` valid after some
sequence of terminals. Nodes are immutable; ``advance(terminal)`` returns the successor set
(memoised on the node), so many partial parses (lexing ambiguity, rollback, forks) share their
history. Nodes are hash-consed by content (items with origins compared by node identity and the
node's own predictions written relative to itself), so two paths that reach the same parse
configuration share one node, which keeps the matcher's head sets small.

Ambiguous and left-recursive grammars are handled by Earley's algorithm; empty rules by the
Aycock-Horspool rule (predicting a nullable ``B`` in ``A -> a . B b`` also adds ``A -> a B . b``).
Invariant (the grammar is trimmed by ``prepare_grammar``): a non-empty node is a viable prefix,
i.e. some continuation of terminals completes the start symbol.
"""

from __future__ import annotations

import itertools
import weakref

from formcast.grammar.cfg_grammar import PreparedGrammar


class EarleyNode:
    """One Earley set (see module docstring). Create through :class:`EarleyParser`."""

    __slots__ = (
        "uid",
        "items",
        "by_terminal",
        "waiting",
        "self_terminal",
        "self_waiting",
        "expected",
        "is_accepting",
        "_next",
        "__weakref__",
    )

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self.items: list[tuple[int, int, EarleyNode]] = []
        self.by_terminal: dict[int, list[tuple[int, int, EarleyNode]]] = {}
        self.waiting: dict[int, list[tuple[int, int, EarleyNode]]] = {}
        # the node's own predictions, (rule, dot) with origin = this node (shared templates)
        self.self_terminal: dict[int, list[tuple[int, int]]] = {}
        self.self_waiting: dict[int, list[tuple[int, int]]] = {}
        self.expected: frozenset[int] = frozenset()
        self.is_accepting = False
        self._next: dict[int, EarleyNode | None] = {}

    def __repr__(self) -> str:
        return f"EarleyNode(uid={self.uid}, items={len(self.items)}, accepting={self.is_accepting})"


class EarleyParser:
    """Builds and interns :class:`EarleyNode` objects for one prepared grammar."""

    def __init__(self, grammar: PreparedGrammar) -> None:
        self.grammar = grammar
        self.rules = grammar.rules
        self.rules_by_lhs = grammar.rules_by_lhs
        self.is_nullable = grammar.is_nullable
        self._uids = itertools.count()
        self._interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._predicted: dict[frozenset[int], tuple] = {}
        self.root = self._build_root()

    def _build_root(self) -> EarleyNode:
        """The initial set: S' -> . start, predicted in the node itself."""
        node = EarleyNode(next(self._uids))
        node.self_terminal, self_waiting, node.expected = self._predictions(
            frozenset({self.grammar.start})
        )
        # plus the augmented item S' -> . start (rule 0), waiting for start in the root only
        start = self.grammar.start
        node.self_waiting = {**self_waiting, start: [*self_waiting.get(start, ()), (0, 0)]}
        node.is_accepting = self.is_nullable[self.grammar.start]
        return node

    def advance(self, node: EarleyNode, terminal: int) -> EarleyNode | None:
        """The Earley set after scanning ``terminal`` from ``node``, or ``None`` if not expected."""
        found = node._next.get(terminal, False)
        if found is not False:
            return found
        result = None
        if terminal in node.expected:
            kernel = [(r, d + 1, o) for r, d, o in node.by_terminal.get(terminal, ())]
            kernel += [(r, d + 1, node) for r, d in node.self_terminal.get(terminal, ())]
            result = self._build(kernel)
        node._next[terminal] = result
        return result

    def _predictions(self, predicted: frozenset[int]) -> tuple:
        """Items a node predicts itself (origin = the node) for the nonterminals ``predicted``:
        ``(rule, dot)`` pairs grouped by next terminal / next nonterminal, plus whether the
        augmented start item is complete. Depends only on ``predicted``, so it is memoised."""
        found = self._predicted.get(predicted)
        if found is not None:
            return found
        rules, rules_by_lhs, is_nullable = self.rules, self.rules_by_lhs, self.is_nullable
        seen: set[tuple[int, int]] = set()
        stack: list[tuple[int, int]] = []
        done: set[int] = set()

        def predict(n: int) -> None:
            if n not in done:
                done.add(n)
                for r in rules_by_lhs[n]:
                    if (r, 0) not in seen:
                        seen.add((r, 0))
                        stack.append((r, 0))

        for n in predicted:
            predict(n)
        while stack:
            r, d = stack.pop()
            rhs = rules[r][1]
            if d < len(rhs) and rhs[d] < 0:
                predict(~rhs[d])
                if is_nullable[~rhs[d]] and (r, d + 1) not in seen:
                    seen.add((r, d + 1))
                    stack.append((r, d + 1))
        by_terminal: dict[int, list[tuple[int, int]]] = {}
        waiting: dict[int, list[tuple[int, int]]] = {}
        for r, d in sorted(seen):
            rhs = rules[r][1]
            if d < len(rhs):
                target = by_terminal if rhs[d] >= 0 else waiting
                target.setdefault(rhs[d] if rhs[d] >= 0 else ~rhs[d], []).append((r, d))
        found = (by_terminal, waiting, frozenset(by_terminal))
        self._predicted[predicted] = found
        return found

    def _build(self, kernel: list[tuple[int, int, EarleyNode]]) -> EarleyNode:
        """Closure (predict + complete) of the scanned ``kernel`` items.

        Items with an explicit origin are closed here; the node's own predictions are a
        function of the nonterminals it predicts (:meth:`_predictions`), so the explicit items
        alone identify the node (the hash-consing key).
        """
        rules, is_nullable = self.rules, self.is_nullable
        seen: set[tuple[int, int, int]] = set()
        items: list[tuple[int, int, EarleyNode]] = []
        predicted: set[int] = set()
        for r, d, o in kernel:
            key = (r, d, o.uid)
            if key not in seen:
                seen.add(key)
                items.append((r, d, o))
        k = 0
        while k < len(items):
            r, d, o = items[k]
            k += 1
            rhs = rules[r][1]
            if d < len(rhs):
                sym = rhs[d]
                if sym < 0:
                    predicted.add(~sym)
                    if is_nullable[~sym]:
                        key = (r, d + 1, o.uid)
                        if key not in seen:
                            seen.add(key)
                            items.append((r, d + 1, o))
                continue
            lhs = rules[r][0]
            for pr, pd, po in o.waiting.get(lhs, ()):
                key = (pr, pd + 1, po.uid)
                if key not in seen:
                    seen.add(key)
                    items.append((pr, pd + 1, po))
            for pr, pd in o.self_waiting.get(lhs, ()):
                key = (pr, pd + 1, o.uid)
                if key not in seen:
                    seen.add(key)
                    items.append((pr, pd + 1, o))
        frozen = frozenset(seen)
        node = self._interned.get(frozen)
        if node is not None:
            return node
        node = EarleyNode(next(self._uids))
        node.self_terminal, node.self_waiting, self_expected = self._predictions(
            frozenset(predicted)
        )
        by_terminal: dict[int, list] = {}
        waiting: dict[int, list] = {}
        for r, d, o in items:
            rhs = rules[r][1]
            if d < len(rhs):
                sym = rhs[d]
                if sym >= 0:
                    by_terminal.setdefault(sym, []).append((r, d, o))
                else:
                    waiting.setdefault(~sym, []).append((r, d, o))
            elif r == 0:
                node.is_accepting = True
        node.expected = self_expected.union(by_terminal) if by_terminal else self_expected
        node.items = items
        node.by_terminal = by_terminal
        node.waiting = waiting
        self._interned[frozen] = node
        return node

    def accepts(self, terminals: list[int]) -> bool:
        """True if the terminal sequence is a sentence (used by tests and sentence checks)."""
        node: EarleyNode | None = self.root
        for t in terminals:
            node = self.advance(node, t)
            if node is None:
                return False
        return node.is_accepting
