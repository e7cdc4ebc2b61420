"""LR parser over terminal ids (SLR(1) tables), with persistent, hash-consed stacks.

For grammars whose SLR(1) tables have no conflicts this is an exact, much cheaper alternative to the Earley
recognizer of :mod:`formcast.grammar.cfg.earley`, with the same node interface
(``advance``, ``root``, ``node.expected``, ``node.is_accepting``, ``node.signature``), so the
mask runtime uses either. An :class:`LRNode` is one parser stack: a state plus its parent
node (the stack below), hash-consed per (parent, state), so identical stacks are one node.

Exactness: an LR parser never shifts a terminal that cannot continue the input (the correct
prefix property), but SLR(1) may *reduce* on a lookahead that is rejected after the reductions
(FOLLOW sets over-approximate). ``advance`` simulates the reductions, and ``expected`` (the terminals the
stack can take next) is computed the same way, per reduce rule of the top state, so it is exact.

Stack reads are tracked for memoisation: every operation lowers :attr:`LRParser.floor` to the
height of the lowest stack node whose state it read (the root has height 0). A computation that
starts with ``floor = node.height`` and ends with ``floor = f`` depends only on the top
``node.height - f + 1`` states of ``node``'s stack (:meth:`LRNode.tops`), so its result can be
shared by every stack with the same top states (nested contexts, other sentences).
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from dataclasses import dataclass

from formcast.grammar.automata.budget import check_deadline
from formcast.grammar.cfg.first_follow import bit_set, first_follow
from formcast.grammar.cfg.rules import PreparedGrammar

_NUM_RECENT = 4096


@dataclass
class LRTable:
    """SLR(1) tables over terminal ids.

    Attributes
    ----------
    actions:
        ``actions[s][t]``: ``k >= 0`` shift to state ``k``; ``k < 0`` reduce by
        ``reductions[~k]``. Terminal ``end`` is the end of input.
    gotos:
        ``gotos[s][n]``: the state after nonterminal ``n`` from state ``s``.
    reductions:
        ``(num_popped, lhs)`` per reduce rule.
    shifts:
        ``shifts[s]``: terminals (not ``end``) state ``s`` shifts (always viable).
    reduce_groups:
        ``reduce_groups[s]``: ``(reduction index, lookahead terminals)`` pairs.
    start, accept:
        The initial state, and the state pushed by reducing to the start symbol at the bottom
        (the stack is a sentence when ``end`` leads there).
    end:
        The end-of-input terminal id (``num_terminals``).
    """

    actions: list[dict[int, int]]
    gotos: list[dict[int, int]]
    reductions: list[tuple[int, int]]
    shifts: list[frozenset[int]]
    reduce_groups: list[tuple[tuple[int, frozenset[int]], ...]]
    start: int
    accept: int
    end: int


def build_lr_table(grammar: PreparedGrammar) -> LRTable | None:
    """SLR(1) tables of ``grammar`` (LR(0) automaton, reductions on FOLLOW sets), or ``None``
    if they have a conflict (ambiguous or not SLR(1)): then only the Earley parser is exact for
    it. SLR reduces on more lookaheads than LALR would; :class:`LRParser` simulates reductions
    before trusting a lookahead, so that costs nothing in exactness."""
    rules = grammar.rules
    end = grammar.num_terminals
    follow_bits = first_follow(grammar).follow
    # FOLLOW sets as frozensets, by their bits (nonterminals of one JSON grammar share a few)
    follow: dict[int, frozenset[int]] = {}
    predicted = _PredictedRules(grammar)
    kernels: dict[frozenset, int] = {frozenset({(0, 0)}): 0}
    order = list(kernels)
    actions: list[dict[int, int]] = []
    gotos: list[dict[int, int]] = []
    shifts: list[frozenset[int]] = []
    reduce_groups: list[tuple[tuple[int, frozenset[int]], ...]] = []
    reductions: list[tuple[int, int]] = []
    reduction_ids: dict[tuple[int, int], int] = {}
    for kernel in order:  # grows while iterating: breadth first over the LR(0) automaton
        check_deadline("building the LR tables")
        # LR(0) closure: the kernel items, plus (r, 0) for every rule predicted by a
        # nonterminal after a kernel dot (those items advance to (r, 1) or are complete)
        successors: dict[int, list[tuple[int, int]]] = {}
        complete = []
        closure: set[int] = set()
        for r, d in kernel:
            rhs = rules[r][1]
            if d < len(rhs):
                symbol = rhs[d]
                successors.setdefault(symbol, []).append((r, d + 1))
                if symbol < 0:
                    closure.update(predicted[~symbol])
            elif r != 0:
                complete.append(r)
        for r in closure:
            rhs = rules[r][1]
            if rhs:
                successors.setdefault(rhs[0], []).append((r, 1))
            else:
                complete.append(r)
        action: dict[int, int] = {}
        goto: dict[int, int] = {}
        for symbol, items_after in successors.items():
            key = frozenset(items_after)
            state = kernels.get(key)
            if state is None:
                state = kernels[key] = len(order)
                order.append(key)
            if symbol >= 0:
                action[symbol] = state
            else:
                goto[~symbol] = state
        shifts.append(frozenset(action))
        # reduce by rule k on FOLLOW(lhs) (two complete rules of one lhs overlap there: a
        # conflict, whether or not they share k)
        groups: dict[int, frozenset[int]] = {}
        for r in complete:
            lhs, rhs = rules[r]
            key = (len(rhs), lhs)
            k = reduction_ids.setdefault(key, len(reductions))
            if k == len(reductions):
                reductions.append(key)
            bits = follow_bits[lhs]
            lookahead = follow.get(bits)
            if lookahead is None:
                lookahead = follow[bits] = frozenset(bit_set(bits))
            if not lookahead.isdisjoint(action):
                return None  # shift/reduce or reduce/reduce conflict
            action.update(dict.fromkeys(lookahead, ~k))
            groups[k] = lookahead
        reduce_groups.append(tuple(sorted(groups.items())))
        actions.append(action)
        gotos.append(goto)
    return LRTable(
        actions=actions,
        gotos=gotos,
        reductions=reductions,
        shifts=shifts,
        reduce_groups=reduce_groups,
        start=0,
        accept=gotos[0][grammar.start],
        end=end,
    )


class _PredictedRules:
    """``predicted[n]``: the rules whose item ``(r, 0)`` the LR(0) closure of an item with the
    dot before nonterminal ``n`` contains (rules of ``n`` and, transitively, of every
    nonterminal that starts one of them); built on first use (a table reads those of the
    nonterminals that follow some dot, not all)."""

    def __init__(self, grammar: PreparedGrammar) -> None:
        self._rules = grammar.rules
        self._by_lhs = grammar.rules_by_lhs
        self._found: dict[int, frozenset[int]] = {}

    def __getitem__(self, n: int) -> frozenset[int]:
        found = self._found.get(n)
        if found is not None:
            return found
        rules, by_lhs = self._rules, self._by_lhs
        seen = {n}
        stack = [n]
        while stack:
            for r in by_lhs[stack.pop()]:
                rhs = rules[r][1]
                if rhs and rhs[0] < 0 and ~rhs[0] not in seen:
                    seen.add(~rhs[0])
                    stack.append(~rhs[0])
        found = self._found[n] = frozenset(r for m in seen for r in by_lhs[m])
        return found


class LRNode:
    """One parser stack (see module docstring). Create through :class:`LRParser`."""

    __slots__ = (
        "uid",
        "state",
        "parent",
        "height",
        "signature",
        "depth",
        "_parser",
        "_children",
        "_next",
        "_viable",
        "_viable_floor",
        "_tops",
        "__weakref__",
    )

    def __init__(self, uid: int, state: int, parent: LRNode | None, parser: LRParser) -> None:
        self.uid = uid
        self.state = state
        self.parent = parent
        self.height = 0 if parent is None else parent.height + 1
        self.signature = uid  # identical stacks are one node (hash-consed)
        self.depth = 0  # nesting depth is not tracked (max_depth uses the Earley parser)
        self._parser = parser
        self._children: dict[int, weakref.ref] = {}
        # terminal -> (weak ref to the node after it or None if rejected, floor of the step)
        self._next: dict[int, tuple] = {}
        self._viable: frozenset[int] | None = None
        self._viable_floor = 0
        self._tops: dict[int, tuple[int, ...]] = {}

    @property
    def expected(self) -> frozenset[int]:
        """Terminals the stack can take next (exact)."""
        viable = self._viable_set()
        return viable - self._parser.end_set if self._parser.table.end in viable else viable

    @property
    def is_accepting(self) -> bool:
        """True if the terminals read so far form a sentence."""
        return self._parser.table.end in self._viable_set()

    def _viable_set(self) -> frozenset[int]:
        """Terminals (``end`` included) the stack can take next; records the stack read."""
        parser = self._parser
        viable = self._viable
        if viable is None:
            viable = parser._compute_viable(self)
        if self._viable_floor < parser.floor:
            parser.floor = self._viable_floor
        return viable

    def tops(self, count: int) -> tuple[int, ...]:
        """The states of the top ``count`` stack nodes (all of them if the stack is lower)."""
        found = self._tops.get(count)
        if found is None:
            states = []
            node: LRNode | None = self
            while node is not None and len(states) < count:
                states.append(node.state)
                node = node.parent
            found = self._tops[count] = tuple(states)
        return found

    def __repr__(self) -> str:
        return f"LRNode(uid={self.uid}, state={self.state}, height={self.height})"


class LRParser:
    """Builds and interns :class:`LRNode` stacks for one :class:`LRTable`."""

    def __init__(self, table: LRTable) -> None:
        self.table = table
        self.end_set = frozenset({table.end})
        self._uids = itertools.count()
        self._recent: deque[LRNode] = deque(maxlen=_NUM_RECENT)
        self.floor = 0  # lowest stack height read (see module docstring); callers reset it
        self.root = LRNode(next(self._uids), table.start, None, self)

    def _push(self, parent: LRNode, state: int) -> LRNode:
        ref = parent._children.get(state)
        if ref is not None:
            child = ref()
            if child is not None:
                return child
        child = LRNode(next(self._uids), state, parent, self)
        parent._children[state] = weakref.ref(child)
        self._recent.append(child)
        return child

    def _reduce(self, node: LRNode, k: int) -> LRNode:
        """The stack after reducing by ``reductions[k]`` on top of ``node``; lowers the floor
        to the node whose goto is read."""
        num_popped, lhs = self.table.reductions[k]
        below = node
        for _ in range(num_popped):
            below = below.parent
        if below.height < self.floor:
            self.floor = below.height
        return self._push(below, self.table.gotos[below.state][lhs])

    def advance(self, node: LRNode, terminal: int) -> LRNode | None:
        """The stack after shifting ``terminal`` (reductions first), or ``None`` if rejected."""
        entry = node._next.get(terminal)
        if entry is not None:
            ref, floor = entry
            found = None if ref is None else ref()
            if ref is None or found is not None:
                if floor < self.floor:
                    self.floor = floor
                return found
        saved = self.floor
        self.floor = node.height
        actions = self.table.actions
        cur = node
        result = None
        while True:
            action = actions[cur.state].get(terminal)
            if action is None:
                break
            if action >= 0:
                result = self._push(cur, action)
                break
            cur = self._reduce(cur, ~action)
        floor = self.floor
        node._next[terminal] = (None if result is None else weakref.ref(result), floor)
        if saved < floor:
            self.floor = saved
        return result

    def _compute_viable(self, node: LRNode) -> frozenset[int]:
        """Terminals (``end`` included) the stack can take: the top state's shifts, plus per
        reduce rule the lookaheads the stack after that reduction takes (recursively)."""
        table = self.table
        saved = self.floor
        self.floor = node.height
        # the shifts (a frozenset per state) are shared, not copied: only terminals beyond
        # them (end, reductions' lookaheads) are collected
        viable: set[int] = set()
        if node.state == table.accept:
            viable.add(table.end)
        for k, lookaheads in table.reduce_groups[node.state]:
            after = self._reduce(node, k)
            if after.state == table.accept and table.end in lookaheads:
                viable.add(table.end)
            found = after._viable
            if found is None:
                found = self._compute_viable(after)
            if after._viable_floor < self.floor:
                self.floor = after._viable_floor
            viable |= lookaheads & found
        shifts = table.shifts[node.state]
        node._viable = shifts | viable if viable else shifts
        node._viable_floor = self.floor
        if saved < self.floor:
            self.floor = saved
        return node._viable

    def accepts(self, terminals: list[int]) -> bool:
        """True if the terminal sequence is a sentence (used by tests)."""
        node: LRNode | None = self.root
        for t in terminals:
            node = self.advance(node, t)
            if node is None:
                return False
        return node.is_accepting
