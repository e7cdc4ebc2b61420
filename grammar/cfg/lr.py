"""LR parser over terminal ids (SLR(1) tables built on first use), with persistent,
hash-consed stacks, forking where the table has conflicts.

For grammars whose SLR(1) tables have no conflicts this is an exact, much cheaper alternative
to the Earley recognizer of :mod:`formcast.grammar.cfg.earley`, with the same node interface
(``advance``, ``root``, ``node.expected``, ``node.is_accepting``, ``node.signature``), so the
mask runtime uses either. An :class:`LRNode` is one parser stack: a state plus its parent
node (the stack below), hash-consed per (parent, state), so identical stacks are one node.

Tables: :class:`LRTable` numbers the LR(0) states as it reaches them and builds a state's row
when a parser first reads it, so a parser pays for the states its sentences visit (a large
JSON-Schema grammar has thousands, a sentence visits a few hundred). Where a row has several
actions for one terminal (shift/reduce or reduce/reduce: the grammar is ambiguous or not
SLR(1), e.g. a union of objects whose optional first members differ), ``advance`` follows
each, and the stacks that can still go on are one :class:`LRForest` node (a generalised LR
parse without a shared stack graph: the stacks merge back into one node once they reduce to the
same stack, which for a union of JSON objects is where the object ends).

Exactness: an LR parser never shifts a terminal that cannot continue the input (the correct
prefix property), but SLR(1) may *reduce* on a lookahead that is rejected after the reductions
(FOLLOW sets over-approximate). ``advance`` simulates the reductions; ``expected`` (the
terminals the stack can take next) is read off the top state's kernel items (FIRST of what
follows each item's dot, and where that is nullable what the stack takes after the item's
rule, see :meth:`LRParser._compute_viable`), so it is exact too and builds no rows.

Stack reads are tracked for memoisation: every operation lowers :attr:`LRParser.floor` to the
height of the lowest stack node whose state it read (the root has height 0). A computation that
starts with ``floor = node.height`` and ends with ``floor = f`` depends only on the top
``node.height - f + 1`` states of ``node``'s stack (:meth:`LRNode.tops`), so its result can be
shared by every stack with the same top states (nested contexts, other sentences); a forest's
``tops`` are its stacks' (:class:`LRForest`).
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque

from formcast.errors import GrammarError
from formcast.grammar.automata.budget import check_deadline
from formcast.grammar.cfg.first_follow import bit_set, first_follow
from formcast.grammar.cfg.rules import PreparedGrammar

_NUM_RECENT = 4096
# reductions one advance may follow past a conflict before the grammar counts as cyclic
_MAX_REDUCTIONS = 100_000
_IN_PROGRESS = -1  # a stack whose viable terminals are being computed (bits are >= 0)


class LRTable:
    """SLR(1) tables over terminal ids, built state by state on first use.

    A state of the LR(0) automaton is numbered when a built state first reaches it, and its
    row (shifts, gotos, reductions on FOLLOW sets) is built when a parser first reads it
    (:meth:`row`, :meth:`goto`): a grammar's parser pays only for the states its sentences
    visit (a 300-property object's grammar has thousands). :meth:`build_all` builds every
    state (for the test that the tables have no conflict: then the parser never forks).

    Attributes
    ----------
    reductions:
        ``(num_popped, lhs)`` per reduce rule.
    start, accept:
        The initial state, and the state pushed by reducing to the start symbol at the bottom
        (the stack is a sentence when ``end`` leads there).
    end:
        The end-of-input terminal id (``num_terminals``).
    has_conflicts:
        Set by :meth:`build_all`: True if some state has a terminal with several actions
        (shift/reduce or reduce/reduce by different reductions); :class:`LRParser` follows
        each, whether or not the whole table was built.

    A state's row (:meth:`row`) is its shifts (terminal -> state) and its reductions with
    their lookaheads as int bit sets (bit ``t``: terminal ``t``, FOLLOW of the rule's left
    side): a reduction on the FOLLOW set of a member of a 1,000-property object is one int,
    not a dict entry per later key, and a parser tests one bit.
    """

    def __init__(self, grammar: PreparedGrammar) -> None:
        self.rules = grammar.rules
        self.end = grammar.num_terminals
        sets = first_follow(grammar)
        self._follow_bits = sets.follow
        self._first_bits = sets.first
        self._is_nullable = grammar.is_nullable
        # per rule, built on first use: FIRST bits of rhs[d:] per dot d, the end bit where
        # rhs[d:] is nullable (see suffix_first)
        self._suffix_first: dict[int, list[int]] = {}
        self._steps: dict[int, tuple[int, int, int, int] | None] = {}  # kernel_step memo
        self._terminal_sets: dict[int, frozenset[int]] = {}  # terminal_set, by bits
        self._by_lhs = grammar.rules_by_lhs
        self._predicted: _PredictedRules | None = None
        first = frozenset({(0, 0)})
        self._kernels: dict[frozenset, int] = {first: 0}
        self._order: list[frozenset] = [first]  # kernel items per state
        # per state, None until built: (shifts: terminal -> state, reductions: (reduction
        # index, lookahead bits) pairs), gotos (nonterminal -> state)
        self._rows: list[tuple[dict[int, int], tuple[tuple[int, int], ...]] | None] = [None]
        self._gotos: list[dict[int, int] | None] = [None]
        self.reductions: list[tuple[int, int]] = []
        self._reduction_ids: dict[tuple[int, int], int] = {}
        self.has_conflicts = False
        self.start = 0
        self.accept = self.goto(0, grammar.start)

    # memos rebuilt on first use, left out of grammar files (the bit-set -> frozenset memo holds
    # every expected set a parser has read; _PredictedRules is not a grammar-file class)
    _MEMOS = ("_predicted", "_suffix_first", "_steps", "_terminal_sets")

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in self._MEMOS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._predicted = None
        self._suffix_first, self._steps, self._terminal_sets = {}, {}, {}

    @property
    def num_states(self) -> int:
        """States numbered so far (built or reached)."""
        return len(self._order)

    def row(self, s: int) -> tuple[dict[int, int], tuple[tuple[int, int], ...]]:
        """State ``s``'s actions: ``(shifts, reductions)``, terminal -> state and ``(k,
        lookahead bits)`` pairs (reduce by ``reductions[k]`` on terminal ``t`` iff bit ``t``)."""
        found = self._rows[s]
        return self._build(s) if found is None else found

    def goto(self, s: int, n: int) -> int:
        """The state after nonterminal ``n`` from state ``s``."""
        if self._rows[s] is None:
            self._build(s)
        return self._gotos[s][n]

    def kernel(self, s: int) -> frozenset[tuple[int, int]]:
        """State ``s``'s kernel items ``(rule, dot)`` (known once ``s`` is numbered; its row
        need not be built)."""
        return self._order[s]

    def suffix_first(self, r: int, d: int) -> int:
        """FIRST of rule ``r``'s right side after dot ``d``, as int bits, with bit ``end`` set
        iff that suffix is nullable.

        Computed for every dot of the rule at once, right to left: ``F(d) = FIRST(X_d)``, or
        ``FIRST(X_d) | F(d + 1)`` where ``X_d`` is nullable, and ``F(len) = {end}``."""
        found = self._suffix_first.get(r)
        if found is None:
            rhs = self.rules[r][1]
            first, is_nullable = self._first_bits, self._is_nullable
            found = [0] * (len(rhs) + 1)
            bits = 1 << self.end
            for k in range(len(rhs) - 1, -1, -1):
                x = rhs[k]
                if x >= 0:
                    bits = 1 << x
                elif is_nullable[~x]:
                    bits |= first[~x]
                else:
                    bits = first[~x]
                found[k] = bits
            found[len(rhs)] = 1 << self.end
            self._suffix_first[r] = found
        return found[d]

    def terminal_set(self, bits: int) -> frozenset[int]:
        """The terminals of a bit set (memoised: a few distinct expected sets are read by
        many stacks)."""
        found = self._terminal_sets.get(bits)
        if found is None:
            found = self._terminal_sets[bits] = frozenset(bit_set(bits))
        return found

    def build_all(self) -> LRTable:
        """Build every state (breadth first over the LR(0) automaton); returns ``self``."""
        s = 0
        while s < len(self._order):  # grows while building
            if self._rows[s] is None:
                check_deadline("building the LR tables")
                self._build(s)
            s += 1
        # a lookahead some other action of its state takes is a conflict (two complete rules
        # of one lhs and length are one reduction k: no conflict); only this whole-table
        # test reads it, so a row built for a parser pays nothing for it
        self.has_conflicts = False
        for shifts, reductions in self._rows:
            if not reductions:
                continue
            taken = 0
            for t in shifts:
                taken |= 1 << t
            for _, bits in reductions:
                if taken & bits:
                    self.has_conflicts = True
                    return self
                taken |= bits
        return self

    def _build(self, s: int) -> tuple[dict[int, int], tuple[tuple[int, int], ...]]:
        """Build state ``s``'s row; number the states it reaches."""
        rules = self.rules
        if self._predicted is None:
            self._predicted = _PredictedRules(self.rules, self._by_lhs)
        predicted = self._predicted
        # LR(0) closure: the kernel items, plus (r, 0) for every rule predicted by a
        # nonterminal after a kernel dot (those items advance to (r, 1) or are complete)
        successors: dict[int, list[tuple[int, int]]] = {}
        complete = []
        closure: set[int] = set()
        for r, d in self._order[s]:
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
            state = self._number(frozenset(items_after))
            if symbol >= 0:
                action[symbol] = state
            else:
                goto[~symbol] = state
        # reduce by rule k on FOLLOW(lhs) (conflicts: see build_all)
        groups: dict[int, int] = {}
        for r in complete:
            lhs, rhs = rules[r]
            key = (len(rhs), lhs)
            k = self._reduction_ids.setdefault(key, len(self.reductions))
            if k == len(self.reductions):
                self.reductions.append(key)
            groups[k] = groups.get(k, 0) | self._follow_bits[lhs]
        row = (action, tuple(sorted(groups.items())))
        self._gotos[s] = goto
        self._rows[s] = row
        return row

    def _number(self, kernel: frozenset[tuple[int, int]]) -> int:
        """The state of these kernel items, numbered (row not built) if new."""
        state = self._kernels.get(kernel)
        if state is None:
            state = self._kernels[kernel] = len(self._order)
            self._order.append(kernel)
            self._rows.append(None)
            self._gotos.append(None)
        return state

    def kernel_step(self, s: int) -> tuple[int, int, int, int] | None:
        """What a parser does at state ``s`` when its kernel is one item, read off that item
        (memoised; builds no row), or None:

        - ``(SKIP_EMPTY, FIRST(X) bits, goto(s, X), 0)`` for ``A -> alpha . X beta`` with
          ``X`` a nullable nonterminal. On a terminal ``t`` outside ``FIRST(X)`` the state
          shifts nothing (every terminal its closure shifts starts an ``X``), so the stacks
          that can still take ``t`` have all derived ``X`` empty: each is the stack with
          ``goto(s, X)`` pushed, whatever empty reductions led there (its kernel: ``A ->
          alpha X . beta`` and the closure's rules that start with ``X``).
        - ``(REDUCE_ONLY, FOLLOW(A) bits, len(alpha), A)`` for a complete ``A -> alpha .``
          (not the start rule): the state's one action is that reduction.

        :meth:`LRParser.advance` takes these steps directly: a run of ``n`` absent optional
        members (or ``n`` nested left-recursive member lists) costs ``n`` state numberings,
        not ``n`` row builds."""
        found = self._steps.get(s, _NOT_COMPUTED)
        if found is not _NOT_COMPUTED:
            return found
        found = None
        kernel = self._order[s]
        if len(kernel) == 1:
            ((r, d),) = kernel
            lhs, rhs = self.rules[r]
            if d == len(rhs) and r != 0:
                found = (REDUCE_ONLY, self._follow_bits[lhs], d, lhs)
            elif d < len(rhs) and rhs[d] < 0 and self._is_nullable[~rhs[d]]:
                x = rhs[d]
                if self._predicted is None:
                    self._predicted = _PredictedRules(self.rules, self._by_lhs)
                rules = self.rules
                after = [(r, d + 1)]
                after += [(q, 1) for q in self._predicted[~x] if rules[q][1][:1] == (x,)]
                found = (SKIP_EMPTY, self._first_bits[~x], self._number(frozenset(after)), 0)
        self._steps[s] = found
        return found


_NOT_COMPUTED = object()
SKIP_EMPTY, REDUCE_ONLY = 0, 1  # kinds of LRTable.kernel_step


class _PredictedRules:
    """``predicted[n]``: the rules whose item ``(r, 0)`` the LR(0) closure of an item with the
    dot before nonterminal ``n`` contains (rules of ``n`` and, transitively, of every
    nonterminal that starts one of them); built on first use (a table reads those of the
    nonterminals that follow some dot, not all)."""

    def __init__(self, rules: list, rules_by_lhs: list) -> None:
        self._rules = rules
        self._by_lhs = rules_by_lhs
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


class _ParseNode:
    """What the mask runtime reads of a parser node, from its viable terminals."""

    __slots__ = ()

    @property
    def expected(self) -> frozenset[int]:
        """Terminals the node can take next (exact)."""
        parser = self._parser
        bits = self._viable_bits()
        return parser.table.terminal_set(bits & parser.terminal_bits)

    @property
    def is_accepting(self) -> bool:
        """True if the terminals read so far form a sentence (some stack's, in a forest)."""
        return bool(self._viable_bits() >> self._parser.table.end & 1)


class LRNode(_ParseNode):
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
        self._viable: int | None = None  # bits of the terminals (end included) it can take
        self._viable_floor = 0
        self._tops: dict[int, tuple[int, ...]] = {}

    def _viable_bits(self) -> int:
        """Terminals (``end`` included) the stack can take next, as int bits; records the
        stack read."""
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


class LRForest(_ParseNode):
    """Several parser stacks read as one node: the ways to read the terminals so far that can
    still go on, after a table conflict (see :meth:`LRParser.advance`). Same interface as
    :class:`LRNode`; hash-consed per set of stacks.

    Stack reads: the stacks descend from the stack they forked from, so their heights count
    from one bottom and :attr:`LRParser.floor` means the same in each. A forest's height is
    its highest stack's; ``tops(count)`` holds each stack's top states down to the height
    ``count`` below the forest's top (a key that cannot be a stack's: a tuple of tuples), so
    forests at other positions whose stacks end the same way share memo entries too.
    """

    __slots__ = ("uid", "stacks", "height", "min_height", "signature", "depth", "_parser")
    __slots__ += ("_next", "_viable", "_viable_floor", "_tops", "__weakref__")

    def __init__(self, uid: int, stacks: tuple[LRNode, ...], parser: LRParser) -> None:
        self.uid = uid
        self.stacks = stacks
        self.height = max(n.height for n in stacks)
        self.min_height = min(n.height for n in stacks)  # every stack's top is read
        self.signature = uid
        self.depth = 0
        self._parser = parser
        self._next: dict[int, tuple] = {}
        self._viable: int | None = None
        self._viable_floor = 0
        self._tops: dict[int, tuple] = {}

    def _viable_bits(self) -> int:
        """Terminals (``end`` included) some stack can take next, as int bits; records the
        stacks read."""
        parser = self._parser
        viable = self._viable
        if viable is None:
            saved = parser.floor
            parser.floor = self.min_height
            viable = 0
            for n in self.stacks:
                viable |= n._viable_bits()
            self._viable = viable
            self._viable_floor = parser.floor
            if saved < parser.floor:
                parser.floor = saved
        elif self._viable_floor < parser.floor:
            parser.floor = self._viable_floor
        return viable

    def tops(self, count: int) -> tuple[tuple[int, ...], ...]:
        """Per stack, its top states down to ``count - 1`` below the forest's height."""
        found = self._tops.get(count)
        if found is None:
            top = self.height
            found = tuple(n.tops(max(count - (top - n.height), 0)) for n in self.stacks)
            self._tops[count] = found
        return found

    def __repr__(self) -> str:
        return f"LRForest(uid={self.uid}, stacks={len(self.stacks)}, height={self.height})"


class LRParser:
    """Builds and interns :class:`LRNode` stacks (and :class:`LRForest` sets of them) for one
    :class:`LRTable`."""

    def __init__(self, table: LRTable) -> None:
        self.table = table
        self.terminal_bits = (1 << table.end) - 1  # every terminal, not end
        self._uids = itertools.count()
        self._recent: deque[LRNode] = deque(maxlen=_NUM_RECENT)
        self.floor = 0  # lowest stack height read (see module docstring); callers reset it
        self.root = LRNode(next(self._uids), table.start, None, self)
        self._forests: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def _node_of(self, stacks: list[LRNode]) -> LRNode | LRForest | None:
        """The node of these stacks: ``None``, the one stack, or their (hash-consed) forest."""
        if len(stacks) <= 1:
            return stacks[0] if stacks else None
        key = frozenset(stacks)
        if len(key) == 1:
            return stacks[0]
        found = self._forests.get(key)
        if found is None:
            ordered = tuple(sorted(key, key=lambda n: n.uid))
            found = self._forests[key] = LRForest(next(self._uids), ordered, self)
            self._recent.append(found)
        return found

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
        return self._reduce_to(node, *self.table.reductions[k])

    def _reduce_to(self, node: LRNode, num_popped: int, lhs: int) -> LRNode:
        """The stack after popping ``num_popped`` nodes and going to nonterminal ``lhs``."""
        below = node
        for _ in range(num_popped):
            below = below.parent
        if below.height < self.floor:
            self.floor = below.height
        return self._push(below, self.table.goto(below.state, lhs))

    def advance(self, node: LRNode | LRForest, terminal: int) -> LRNode | LRForest | None:
        """The node after shifting ``terminal`` (reductions first), ``None`` if rejected.

        One stack, except where the table has a conflict on ``terminal`` along the way: then
        every action is followed, and the stacks that can still go on make an
        :class:`LRForest` (identical stacks are one node, so the ways merge back into one
        stack once they reduce to the same nonterminal)."""
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
        if type(node) is LRForest:
            self.floor = node.min_height
            stacks = [n for s in node.stacks for n in self._advance_stack(s, terminal)]
            found = self._node_of(stacks)
        else:
            found = self._node_of(self._advance_stack(node, terminal))
        floor = self.floor
        node._next[terminal] = (None if found is None else weakref.ref(found), floor)
        if saved < floor:
            self.floor = saved
        return found

    def _advance_stack(self, node: LRNode, terminal: int) -> list[LRNode]:
        """The stacks after shifting ``terminal`` on one stack (every action at a conflict);
        lowers the floor to what it read."""
        table = self.table
        results: list[LRNode] = []
        todo = [node]
        num_reduced = 0
        while todo:
            if num_reduced > _MAX_REDUCTIONS:
                raise GrammarError(
                    f"the grammar reduces without end before terminal {terminal} "
                    "(a cyclic derivation): use the Earley parser"
                )
            cur = todo.pop()
            step = table.kernel_step(cur.state)
            if step is not None:  # taken without the state's row
                kind, bits, a, b = step
                is_in = bits >> terminal & 1
                if kind == REDUCE_ONLY:
                    if is_in:
                        todo.append(self._reduce_to(cur, a, b))
                    num_reduced += 1
                    continue
                if not is_in:  # (SKIP_EMPTY)
                    todo.append(self._push(cur, a))
                    num_reduced += 1
                    continue
            shifts, reductions = table.row(cur.state)
            # every action on the terminal: one without a conflict, several past one
            state = shifts.get(terminal)
            if state is not None:
                results.append(self._push(cur, state))
            for k, bits in reductions:
                if bits >> terminal & 1:
                    todo.append(self._reduce(cur, k))
                    num_reduced += 1
        return results

    def _compute_viable(self, node: LRNode) -> int:
        """Terminals (``end`` included) the stack can take, as int bits, from the kernel items
        of its top state alone (the state's row is not needed).

        The items of an LR(0) state are exactly the items valid for every stack that reaches
        it: for a kernel item ``A -> alpha . beta`` the stack ends with ``alpha`` above a stack
        ``delta`` with ``delta A`` viable. So the stack can take ``FIRST(beta)``, and where
        ``beta`` is nullable also what ``delta A`` can take (pop ``len(alpha)``, goto ``A``;
        recursively); the union over the kernel items is exact (the closure items' first
        terminals are in their kernel item's ``FIRST(beta)``). A run of optional members
        (``A -> x L_1 ... L_n y`` with nullable ``L_i``) is one suffix FIRST set, not a
        chain of empty reductions through ``n`` states, each built on first use.
        """
        table = self.table
        saved = self.floor
        self.floor = node.height
        node._viable = _IN_PROGRESS
        end_bit = 1 << table.end
        viable = 0
        rules = table.rules
        for r, d in table.kernel(node.state):
            bits = table.suffix_first(r, d)
            if not bits & end_bit:
                viable |= bits
                continue
            viable |= bits ^ end_bit
            if r == 0:  # S' -> start . (or a nullable start): the end of input
                viable |= end_bit
                continue
            after = self._reduce_to(node, d, rules[r][0])
            found = after._viable
            if found is None:
                found = self._compute_viable(after)
            elif found == _IN_PROGRESS:
                raise GrammarError(
                    "the grammar reduces in a cycle (a cyclic derivation): use the Earley parser"
                )
            if after._viable_floor < self.floor:
                self.floor = after._viable_floor
            viable |= found
        node._viable = viable
        node._viable_floor = self.floor
        if saved < self.floor:
            self.floor = saved
        return viable

    def accepts(self, terminals: list[int]) -> bool:
        """True if the terminal sequence is a sentence (used by tests)."""
        node: LRNode | LRForest | None = self.root
        for t in terminals:
            node = self.advance(node, t)
            if node is None:
                return False
        return node.is_accepting
