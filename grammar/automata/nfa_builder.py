"""build_nfa: a regex syntax tree -> Thompson-style byte NFA; counted chains straight to DFAs.

States carry byte-range edges and epsilon edges. The tree is built right to left, each node
before the state it goes on to, and equal (node, next state) pairs share their states (see
``_Builder``), so a subtree that a tree names twice with the same continuation is built once. A
code point set becomes the (suffix-shared) UTF-8 fragment of
:mod:`formcast.grammar.automata.utf8_sequences`. Counted repetition ``X{m,n}`` is expanded into
``m`` copies after ``n - m`` optional copies whose skip edges all go straight to the
continuation, so epsilon closures stay O(1) per copy instead of O(n). A length
guard ``(?=A)R`` is built as the minimal DFA of ``A & R`` (:mod:`intersection`), whose
states and byte edges are copied in. A counted repetition of a prefix code (a JSON string
character) is built as chained copies of the item's minimal DFA (:func:`counted_chain_dfa`), and
an automaton between literal characters (an open object's other keys) from the automaton's own
table (:func:`framed_automaton_dfa`).

This module sits on top of the automata stage: it uses the NFA, DFA, minimiser and
intersection modules, none of which imports it.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import ByteDFA, determinize, split_classes, trim
from formcast.grammar.automata.byte_nfa import DEAD_EDGE, ByteNFA
from formcast.grammar.automata.chain_keys import ChainKeys
from formcast.grammar.automata.intersection import intersect_memoized
from formcast.grammar.automata.literal_trie import literal_bytes, trie
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.utf8_sequences import fragment
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    Anchor,
    Automaton,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Reference,
    Repeat,
    to_python_regex,
)

# counted repetitions with at least this many copies of a prefix-code item are chained DFA
# copies (``_Builder.counted_chain``) instead of NFA copies
CHAIN_MIN_COPIES = 4
# an alternation with at least this many literal options builds them as one trie
# (``_Builder.literal_options``): a cost threshold only, the language is the same either way
TRIE_MIN_OPTIONS = 8
# an item whose NFA has more states is expanded as NFA copies without trying a chain: its
# minimal DFA would have to be 16x smaller than its NFA to fit the chain's 64-state limit,
# and finding out costs a subset construction of the item (0.3 s for an array item holding
# two 256-character strings)
CHAIN_MAX_ITEM_NFA_STATES = 1024
_ITEM_MEMO: dict[Node, ByteDFA | None] = {}  # item tree -> minimal item DFA or None
_ITEM_MEMO_SIZE = 256
# prepared edge blocks of copied DFAs (``_Builder.embed``) and counted chains' rows
# (``_chain_rows``), by what determines them: a JSON schema's bounded strings and open objects
# name a few distinct ones hundreds of times (a Cargo manifest: 771 chains, 8 distinct)
_BLOCK_MEMO: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
_CHAIN_MEMO: dict[tuple, tuple[np.ndarray, list[int]]] = {}
_BLOCK_MEMO_SIZE = 256
_BLOCK_MEMO_MAX_CELLS = 1 << 20  # larger DFAs are prepared per copy (not kept)
# the (never extended) edge list of every state that has no edges of a kind once built: block
# states' byte edges, and the epsilon edges of block and character states
_NO_EDGES: tuple[()] = ()


def _memo_put(memo: dict, size: int, key: object, value: object) -> None:
    """``memo[key] = value``, the memo emptied first once it holds ``size`` entries."""
    if len(memo) >= size:
        memo.clear()
    memo[key] = value


def build_nfa(
    node: Node, budget: CompileBudget, *, chain_min_copies: int = CHAIN_MIN_COPIES
) -> ByteNFA:
    """Thompson construction of ``node`` (anchors must already be stripped).

    Counted repetitions of a prefix code with at least ``chain_min_copies`` copies are built
    as chained DFA copies (pass a huge value for plain NFA copies throughout).
    """
    # refuse before building what cannot fit: the states the builder makes when it shares
    # nothing (an upper bound; a cheap walk over the distinct nodes). Building 2M states in
    # Python to find out took seconds (a 256-character string 64 times in an array).
    builder = _Builder(budget, chain_min_copies)
    # (into the builder's memo: its repetitions read the same counts again)
    num_unshared = unshared_states(node, budget, chain_min_copies, builder._counts)
    if budget.max_determinized_nfa_states is None:
        budget.check_nfa_states(num_unshared, None)
    # (else the tight bound stops the build itself as the NFA passes it: the upper bound
    # may be several times the NFA that sharing builds)
    return builder.standalone(node, 0)


def unshared_states(
    node: Node,
    budget: CompileBudget,
    chain_min_copies: int = CHAIN_MIN_COPIES,
    counts: dict[int, tuple[Node, int]] | None = None,
) -> int:
    """The number of NFA states :func:`build_nfa` adds for ``node`` when no ``(node, next
    state)`` pair is shared: an upper bound on what it adds, except that a lookahead counts
    as its guard and its group unguarded (the builder embeds their intersection's DFA). Each
    distinct node is counted once (memo by identity), so the walk costs O(distinct nodes)
    however often a tree names a subtree.

    Raises
    ------
    CompileBudgetError
        At the first repetition whose copies alone exceed ``budget.max_nfa_states`` (the
        error carries its position).
    """
    if counts is None:  # memo of counts by node identity (the node kept beside its count)
        counts = {}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return _unshared(node, budget, chain_min_copies, counts)
    finally:
        sys.setrecursionlimit(limit)


def _unshared(
    node: Node, budget: CompileBudget, chain_min_copies: int, counts: dict[int, tuple[Node, int]]
) -> int:
    found = counts.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    if isinstance(node, CharSet):
        ranges = node.ranges
        num = 1 if ranges and ranges[-1][1] < 0x80 else fragment(ranges)[0] - 1
    elif isinstance(node, Concat):
        num = 0
        for item in node.items:  # (an ASCII character inline: one state, most of a text)
            if type(item) is CharSet and item.ranges and item.ranges[-1][1] < 0x80:
                num += 1
            else:
                num += _unshared(item, budget, chain_min_copies, counts)
    elif isinstance(node, Alternation):
        num = 1 + sum(_unshared(o, budget, chain_min_copies, counts) for o in node.options)
    elif isinstance(node, Repeat):
        lo, hi = node.min_count, node.max_count
        item = _unshared(node.item, budget, chain_min_copies, counts)
        chain = None
        if max(lo, hi or 0) >= chain_min_copies and item <= CHAIN_MAX_ITEM_NFA_STATES:
            chain = _item_dfa(node.item, budget, node.pos)
        if chain is not None:  # copies of all the item's states but its final one
            num = (hi if hi is not None else lo + 1) * (chain.num_states - 1) + (hi is not None)
        else:
            if hi is None:
                num = 1 + item * max(lo, 1)
            else:
                num = (hi - lo) * (1 + item) + lo * item
        if budget.max_determinized_nfa_states is None:  # (else the build holds the bound)
            budget.check_nfa_states(num, node.pos)  # the error names the repetition
    elif isinstance(node, Lookahead):
        num = _unshared(node.guard, budget, chain_min_copies, counts)
    elif isinstance(node, Automaton):
        num = int(node.transitions().shape[0])
    else:  # anchors and references: the build raises
        num = 0
    counts[id(node)] = (node, num)  # the node is kept, so its id is not reused meanwhile
    return num


class _Builder:
    """Builds right to left: ``build(node, then)`` adds states that read ``node`` and go on
    to the existing state ``then``, and returns their entry.

    Invariant: a state gets its outgoing edges when it is created (a loop state: before its
    entry is returned), never later, so the strings an entry leads to the final state by
    are fixed, namely ``L(node) . L(then)``. Hence equal ``(node, then)`` pairs share one
    entry (``_entries``): an object's member that is written either first or after a comma
    (``B(,p)? | p``) is built once, followed by the same continuation; built as two copies,
    the copies doubled at every nesting level and the subset construction met all of them.
    """

    def __init__(self, budget: CompileBudget, chain_min_copies: int = CHAIN_MIN_COPIES) -> None:
        self.nfa = ByteNFA([], [], [])
        self.budget = budget
        self.chain_min_copies = chain_min_copies
        self._entries: dict[tuple[Node, int], int] = {}
        self._counts: dict[int, tuple[Node, int]] = {}  # unshared_states memo, by identity

    def standalone(self, node: Node, position: int) -> ByteNFA:
        """The NFA of ``node`` alone: a new final state, and ``node`` built before it."""
        final = self.new_state(position)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))
        try:
            start = self.build(node, final, position)
        finally:
            sys.setrecursionlimit(limit)
        self.nfa.start, self.nfa.final = start, final
        return self.nfa

    def new_state(self, position: int) -> int:
        self.nfa.byte_edges.append([])
        self.nfa.epsilon_edges.append([])
        self.nfa.positions.append(position)
        return len(self.nfa.byte_edges) - 1

    def build(self, node: Node, then: int, position: int) -> int:
        """Add states reading ``node`` and then going on to ``then``; return their entry."""
        key = (node, then)
        entry = self._entries.get(key)
        if entry is None:
            if type(node) is CharSet and node.ranges and node.ranges[-1][1] < 0x80:
                entry = self._ascii_char(node, then)  # most of a JSON schema's text
            else:
                entry = self._build(node, then, position)
            self._entries[key] = entry
        return entry

    def _ascii_char(self, node: CharSet, then: int) -> int:
        """:meth:`char_set` of an ASCII set: one state, one byte edge per range."""
        nfa = self.nfa
        entry = len(nfa.byte_edges)
        nfa.byte_edges.append([(lo, hi, then) for lo, hi in node.ranges])
        nfa.epsilon_edges.append(_NO_EDGES)
        nfa.positions.append(node.pos)
        if entry >= self.budget.max_nfa_states:
            self.budget.check_nfa_states(entry + 1, node.pos)
        return entry

    def _build(self, node: Node, then: int, position: int) -> int:
        if isinstance(node, CharSet):
            return self.char_set(node, then)
        if isinstance(node, Concat):
            items = node.items
            for k, item in enumerate(items):
                if isinstance(item, Lookahead):
                    # the guard and the rest of this group, as one intersection automaton
                    then = self.guarded(item, Concat(items[k + 1 :]), then)
                    items = items[:k]
                    break
            entries = self._entries
            for item in reversed(items):
                # an ASCII character (most items of a JSON schema's text) without a call
                # to build(): its (character, continuation) pair shared all the same
                if type(item) is CharSet and item.ranges and item.ranges[-1][1] < 0x80:
                    key = (item, then)
                    entry = entries.get(key)
                    if entry is None:
                        entry = entries[key] = self._ascii_char(item, then)
                    then = entry
                else:
                    then = self.build(item, then, position)
            return then
        if isinstance(node, Alternation):
            options = node.options
            words: list[bytes] = []
            if len(options) >= TRIE_MIN_OPTIONS:  # an enum: its literals as one trie
                others = []
                for option in options:
                    word = literal_bytes(option)
                    if word is None:
                        others.append(option)
                    else:
                        words.append(word)
                if len(words) >= TRIE_MIN_OPTIONS:
                    options = tuple(others)
                else:
                    words = []
            entry = self.new_state(position)
            entries = [self.build(option, then, position) for option in options]
            if words:
                entries += self.literal_options(words, then, position)
            self.nfa.epsilon_edges[entry].extend(entries)
            return entry
        if isinstance(node, Repeat):
            return self.repeat(node, then)
        if isinstance(node, Lookahead):
            return self.guarded(node, Concat(()), then)
        if isinstance(node, Automaton):
            return self.embed(
                node.transitions(),
                node.accepting_ids(),
                node.classes(),
                position,
                then,
                ("automaton", node),
            )
        if isinstance(node, Anchor):
            raise AssertionError("anchors must be stripped before building the NFA")
        if isinstance(node, Reference):
            raise GrammarError(
                f"rule reference #{node.index} has no automaton (a grammar's rule, not a regex)"
            )
        raise TypeError(f"unknown regex node {node!r}")

    def char_set(self, node: CharSet, then: int) -> int:
        """The UTF-8 fragment of ``node``'s code points, its exit merged into ``then``."""
        nfa = self.nfa
        ranges = node.ranges
        if ranges and ranges[-1][1] < 0x80:  # ASCII: one byte edge per range
            return self._ascii_char(node, then)
        num_nodes, edges = fragment(ranges)  # entry node 0, exit node 1 (no edges out)
        entry = self.new_state(node.pos)
        base = nfa.num_states - 2  # node k >= 2 becomes state base + k, after the entry
        nfa.byte_edges.extend([] for _ in range(num_nodes - 2))
        nfa.epsilon_edges.extend(itertools.repeat(_NO_EDGES, num_nodes - 2))
        nfa.positions.extend([node.pos] * (num_nodes - 2))
        byte_edges = nfa.byte_edges
        for src, lo, hi, dst in edges:
            target = then if dst == 1 else base + dst
            byte_edges[entry if src == 0 else base + src].append((lo, hi, target))
        if nfa.num_states > self.budget.max_nfa_states:
            self.budget.check_nfa_states(nfa.num_states, node.pos)
        return entry

    def guarded(self, look: Lookahead, rest: Node, then: int) -> int:
        """``(?=guard)rest`` as the DFA of ``guard & rest`` copied into this NFA.

        Raises
        ------
        GrammarError
            If a string of one side is a proper prefix of a string of the other: then the
            lookahead also looks past the end of its group and is no intersection.
        """

        def sides() -> tuple[ByteNFA, ByteNFA]:
            guard = _Builder(self.budget, self.chain_min_copies).standalone(look.guard, look.pos)
            body = _Builder(self.budget, self.chain_min_copies).standalone(rest, look.pos)
            return guard, body

        dfa, is_prefix_free = intersect_memoized(look.guard, rest, sides, self.budget, look.pos)
        if not is_prefix_free:
            raise GrammarError(
                "lookahead (?=...) is only supported as an intersection: no string of the "
                "guard may be a proper prefix of a string of the rest of its group, or vice "
                "versa (e.g. both end at the same closing quote)",
                position=look.pos,
            )
        if dfa is None:  # empty intersection: an entry that leads nowhere
            return self.new_state(look.pos)
        return self.embed(
            dfa.transitions,
            np.flatnonzero(dfa.is_accepting).tolist(),
            dfa.byte_to_class,
            look.pos,
            then,
        )

    def embed(
        self,
        rows: np.ndarray,
        accepting: list[int],
        byte_to_class: np.ndarray,
        pos: int,
        then: int,
        key: tuple | None = None,
    ) -> int:
        """Copy a DFA (``rows[s, c]`` over byte classes, start state 0) into this NFA, its
        accepting states with an epsilon edge to ``then``; return the copy of its start.
        ``key`` names the DFA (its rows and byte classes) where it may come again: its edge
        arrays are then prepared once (`_edge_block`) and only shifted to each copy's place."""
        base = self.nfa.num_states
        num_states = rows.shape[0]
        self.budget.check_nfa_states(base + num_states, pos)
        block = None if key is None else _BLOCK_MEMO.get(key)
        if block is None:
            block = _edge_block(rows, byte_to_class)
            if key is not None and rows.size <= _BLOCK_MEMO_MAX_CELLS:
                _memo_put(_BLOCK_MEMO, _BLOCK_MEMO_SIZE, key, block)
        state_counts, local_edges = block
        edges = local_edges + np.array([0, 0, base], dtype=np.int64)  # (E, 3) targets placed
        return self._append_block(state_counts, edges, accepting, pos, then)

    def _append_block(
        self,
        state_counts: np.ndarray,
        edges: np.ndarray,
        accepting: list[int],
        pos: int,
        then: int,
    ) -> int:
        """Append ``len(state_counts)`` states whose byte edges are an edge block (``(S,)``
        edge counts, ``(E, 3)`` edges grouped by state, targets in place), the ``accepting``
        ones (numbered from 0) with an epsilon edge to ``then``; return the first new state."""
        nfa = self.nfa
        base = nfa.num_states
        num_states = len(state_counts)
        # the block's states share one empty tuple each way (their byte edges are the block's;
        # the builder extends only the edge lists of the states new_state made)
        nfa.byte_edges.extend(itertools.repeat(_NO_EDGES, num_states))
        nfa.edge_blocks.append((base, state_counts, edges))
        epsilon_edges: list[Sequence[int]] = [_NO_EDGES] * num_states
        for state in accepting:
            epsilon_edges[state] = (then,)
        nfa.epsilon_edges.extend(epsilon_edges)
        nfa.positions.extend([pos] * num_states)
        return base

    def literal_options(self, words: list[bytes], then: int, position: int) -> list[int]:
        """Options that are literals (their UTF-8 bytes ``words``) going on to ``then``,
        built as the option-by-option build shares them: one state per distinct suffix (the
        trie of the reversed words, :mod:`literal_trie`), reading the suffix's first byte and
        going on to the state of the rest (``then`` for the empty suffix). Returns each
        option's first state."""
        parent, byte, node_of = trie([word[::-1] for word in words])
        num_states = len(parent) - 1
        self.budget.check_nfa_states(self.nfa.num_states + num_states, position)
        # node k >= 1 becomes state first + k - 1; the root (the empty suffix) is ``then``
        first = self.nfa.num_states
        state_of = np.arange(first - 1, first + num_states, dtype=np.int64)  # (N,)
        state_of[0] = then
        if num_states:
            edges = np.stack([byte[1:], byte[1:], state_of[parent[1:]]], axis=1)  # (N - 1, 3)
            self._append_block(np.ones(num_states, dtype=np.int64), edges, [], position, then)
        return state_of[node_of].tolist()

    def counted_chain(self, node: Repeat, then: int) -> int | None:
        """``X{m,n}`` / ``X{m,}`` as a chain of copies of the minimal DFA of ``X``, when ``X``
        is a prefix code without the empty string (e.g. one JSON string character).

        Then the DFA of ``X`` has one accepting state ``f`` without out-edges, every string of
        ``X{m,n}`` splits uniquely into code words, and the copies can be chained
        deterministically: copy ``i``'s edges into ``f`` go to copy ``i + 1``'s start, copy
        ``i``'s start accepts iff ``i >= m`` (for ``n = None`` copy ``m`` loops onto itself).
        ``None`` if ``X`` is no such code (the caller then expands copies of the NFA).
        """
        item = _item_dfa(node.item, self.budget, node.pos)
        if item is None:
            return None
        rows, accepting_ids = _chain_rows(item, node, self.budget, self.nfa.num_states)
        key = ("chain", node.item, node.min_count, node.max_count)
        return self.embed(rows, accepting_ids, item.byte_to_class, node.pos, then, key)

    def repeat(self, node: Repeat, then: int) -> int:
        num_copies = max(node.min_count, node.max_count or 0)
        if (
            num_copies >= self.chain_min_copies
            and _unshared(node.item, self.budget, self.chain_min_copies, self._counts)
            <= CHAIN_MAX_ITEM_NFA_STATES
        ):
            chain = self.counted_chain(node, then)
            if chain is not None:
                return chain
        self.budget.check_nfa_states(self.nfa.num_states + num_copies, node.pos)
        epsilon_edges = self.nfa.epsilon_edges
        lo, hi = node.min_count, node.max_count
        if hi is None:
            # X* : a loop state that leaves to ``then`` or reads one more X and comes back
            loop = self.new_state(node.pos)
            entry = self.build(node.item, loop, node.pos)
            epsilon_edges[loop].extend((then, entry))
            # X{m,} = X{m-1} X+, and X+ starts at the entry of the X that loops
            rest = loop if lo == 0 else entry
            num_before = max(lo - 1, 0)
        else:
            # X{0,n-m}: copy i may stop (straight to ``then``, so closures stay O(1) per copy)
            # or read one more X and go on to copy i + 1
            rest = then
            for _ in range(hi - lo):
                skip = self.new_state(node.pos)
                entry = self.build(node.item, rest, node.pos)
                epsilon_edges[skip].extend((then, entry))
                rest = skip
                self._check_copies(node.pos)
            num_before = lo
        for _ in range(num_before):  # the mandatory copies, right to left
            rest = self.build(node.item, rest, node.pos)
            self._check_copies(node.pos)
        return rest

    def _check_copies(self, position: int) -> None:
        self.budget.check_nfa_states(self.nfa.num_states, position)
        self.budget.check_time("expanding a counted repetition", position)


def _edge_block(rows: np.ndarray, byte_to_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte edges of a DFA (``rows[s, c]`` over byte classes) as an edge block placed at
    state 0: ``(counts (S,), edges (E, 3))`` int64, one edge ``(lo, hi, target)`` per (state,
    class with a move, maximal byte run of the class), grouped by state (read-only)."""
    num_states, num_classes = rows.shape
    # maximal byte runs of each class: run k is bytes run_lo[k]..run_hi[k] of run_cls[k]
    starts = np.flatnonzero(np.diff(byte_to_class.astype(np.int64), prepend=-1) != 0)
    run_lo, run_hi = starts, np.append(starts[1:], 256) - 1
    run_cls = byte_to_class[starts].astype(np.int64)
    order = np.argsort(run_cls, kind="stable")
    run_lo, run_hi = run_lo[order], run_hi[order]
    runs_of = np.searchsorted(run_cls[order], np.arange(num_classes + 1))  # (K + 1,)
    src, cls = np.nonzero(rows >= 0)
    counts = runs_of[cls + 1] - runs_of[cls]
    offsets = np.cumsum(counts) - counts
    run = np.arange(int(counts.sum())) + np.repeat(runs_of[cls] - offsets, counts)
    dst = np.repeat(rows[src, cls].astype(np.int64), counts)
    edges = np.stack([run_lo[run], run_hi[run], dst], axis=1).astype(np.int64)  # (E, 3)
    state_counts = np.bincount(src, weights=counts, minlength=num_states).astype(np.int64)
    edges.setflags(write=False)
    state_counts.setflags(write=False)
    return state_counts, edges


def _chain_rows(item, node: Repeat, budget: CompileBudget, num_before: int = 0):
    """The chained copies of ``item`` (a prefix-code DFA, see :meth:`_Builder.counted_chain`)
    for ``node``'s counts: ``(rows (states, K) over item's byte classes, accepting ids)``,
    start state 0, ``-1`` = no move."""
    table, accepting = item.transitions, item.is_accepting
    num_item = table.shape[0]
    width = num_item - 1  # states per copy: all but f
    lo, hi = node.min_count, node.max_count
    num_copies = hi if hi is not None else lo + 1
    total = num_copies * width + (1 if hi is not None else 0)
    budget.check_nfa_states(num_before + total, node.pos)
    key = (node.item, lo, hi)  # (``item`` is the item tree's minimal DFA)
    found = _CHAIN_MEMO.get(key)
    if found is not None:
        return found
    final = int(np.flatnonzero(accepting)[0])
    local = np.arange(num_item) - (np.arange(num_item) > final)  # old id -> id in copy
    inner = np.delete(table, final, axis=0).astype(np.int64)  # (d - 1, K)
    to_final = inner == final
    is_dead = inner < 0
    # copy i's row = its item row + i * width: moves within the copy keep their local id,
    # moves into f go to copy i + 1's start (local id ``width``; for n = None copy m loops)
    step = np.where(to_final, width, local[np.maximum(inner, 0)]).astype(np.int32)  # (w, K)
    offsets = (np.arange(num_copies, dtype=np.int32) * width)[:, None, None]  # (C, 1, 1)
    chained = step[None] + offsets  # (C, w, K)
    chained[:, is_dead] = DEAD_EDGE
    if hi is None:
        chained[-1][to_final] = offsets[-1, 0, 0]
    rows = chained.reshape(-1, inner.shape[1])
    if hi is not None:
        rows = np.vstack([rows, np.full((1, rows.shape[1]), DEAD_EDGE, dtype=np.int32)])
    starts = [i * width for i in range(lo, num_copies)]
    found = rows, starts + ([num_copies * width] if hi is not None else [])
    rows.setflags(write=False)
    if rows.size <= _BLOCK_MEMO_MAX_CELLS:
        _memo_put(_CHAIN_MEMO, _BLOCK_MEMO_SIZE, key, found)
    return found


def counted_chain_dfa(node: Node, budget: CompileBudget) -> ByteDFA | None:
    """The DFA of a whole pattern that is one counted repetition ``X{m,n}`` (``n >= 4``) of a
    prefix code ``X`` (a JSON string chunk), built directly as the chain of copies, without an
    NFA or subset construction; ``None`` for any other pattern.

    With ``n`` finite the chain is returned as built: every state is live, its states are
    pairwise inequivalent (``X``'s DFA is minimal and state ``(k, j)`` can still complete
    ``n - k`` code words; ``tests/grammar/test_chain_keys.py`` checks it against
    minimisation), and its layout ``k * width + j`` is what its
    :class:`~formcast.grammar.automata.chain_keys.ChainKeys` read. ``X{m,}`` is trimmed, not minimised.
    """

    while isinstance(node, Concat) and len(node.items) == 1:
        node = node.items[0]
    if not isinstance(node, Repeat) or max(node.min_count, node.max_count or 0) < CHAIN_MIN_COPIES:
        return None
    item = _item_dfa(node.item, budget, node.pos)
    if item is None:
        return None
    rows, accepting_ids = _chain_rows(item, node, budget)
    is_accepting = np.zeros(len(rows), dtype=bool)
    is_accepting[accepting_ids] = True
    if node.max_count is None:
        return trim(rows.astype(np.int32), item.byte_to_class, is_accepting)
    keys = ChainKeys(
        to_python_regex(node.item), item.num_states - 1, node.min_count, node.max_count
    )
    return ByteDFA(
        transitions=np.array(rows, dtype=np.int32),  # (a copy: the memo keeps ``rows``)
        byte_to_class=item.byte_to_class.astype(np.uint8),
        is_accepting=is_accepting,
        walk_keys=keys,
    )


def _item_dfa(item: Node, budget: CompileBudget, position: int) -> ByteDFA | None:
    """The minimal DFA of ``item`` if its language is a prefix code without the empty string
    (one accepting state, no edge out of it, start not accepting), else ``None``; memoised by
    the item's tree. Items over 64 DFA states are not worth chaining (``None``)."""

    key = item
    if key in _ITEM_MEMO:
        return _ITEM_MEMO[key]
    nfa = _Builder(budget).standalone(item, position)
    found = None
    try:
        dfa = minimize(determinize(nfa, budget), budget, position)
    except GrammarError:  # empty item language: leave it to the plain expansion
        dfa = None
    if dfa is not None and dfa.num_states <= 64 and not dfa.is_accepting[0]:
        finals = np.flatnonzero(dfa.is_accepting)
        if len(finals) == 1 and not (dfa.transitions[finals[0]] >= 0).any():
            found = dfa
    _memo_put(_ITEM_MEMO, _ITEM_MEMO_SIZE, key, found)
    return found


caches.register(
    "automata.chain_items", f"{_ITEM_MEMO_SIZE} item DFAs, then emptied", _ITEM_MEMO.clear
)


def _clear_blocks() -> None:
    _BLOCK_MEMO.clear()
    _CHAIN_MEMO.clear()


caches.register(
    "automata.edge_blocks",
    f"{_BLOCK_MEMO_SIZE} copied DFAs' edge blocks and counted chains' rows, then emptied",
    _clear_blocks,
)


def framed_automaton_dfa(node: Node, budget: CompileBudget) -> ByteDFA | None:
    """The minimal DFA of a whole pattern that is one :class:`Automaton` between literal
    characters (``"`` + an object's other keys + ``"``), built directly from the automaton's
    table: the prefix bytes as a chain into its start, its accepting states on into the suffix
    chain. ``None`` for any other pattern, or where the concatenation is not deterministic as
    laid out (an accepting state of the automaton reads the suffix's first byte itself).

    The general path (an NFA embedding the automaton, subset construction) cost a
    few milliseconds per key complement of a few hundred states on every open object.
    """
    items = node.items if isinstance(node, Concat) else (node,)
    found = [k for k, item in enumerate(items) if isinstance(item, Automaton)]
    if len(found) != 1:
        return None
    prefix, suffix = bytearray(), bytearray()
    for k, item in enumerate(items):
        if k == found[0]:
            continue
        if not (isinstance(item, CharSet) and len(item.ranges) == 1):
            return None
        lo, hi = item.ranges[0]
        if lo != hi or 0xD800 <= lo <= 0xDFFF:  # a set, or a lone surrogate (no UTF-8 bytes)
            return None
        (prefix if k < found[0] else suffix).extend(chr(lo).encode("utf-8"))
    automaton = items[found[0]]
    inner = automaton.transitions()  # (n, C) int32 over the automaton's byte classes
    inner_class = automaton.classes()  # (256,) uint8
    is_final = np.frombuffer(automaton.accepting, dtype=np.uint8).astype(bool)  # (n,)
    num_inner, p, s = len(inner), len(prefix), len(suffix)
    if s and (inner[is_final, inner_class[suffix[0]]] >= 0).any():
        return None  # the automaton could go on reading the suffix's first byte
    # byte classes: the automaton's, with each literal byte in a class of its own
    byte_to_class, representative = split_classes(inner_class, [*prefix, *suffix])
    # states: the prefix chain 0..p-1, the automaton p..p+n-1, the suffix chain after it
    # (state p + n + j has read suffix[:j + 1]); the last suffix state accepts
    num_states = p + num_inner + s
    table = np.full((num_states, len(representative)), -1, dtype=np.int32)  # (S, K)
    for i, byte in enumerate(prefix):
        table[i, byte_to_class[byte]] = i + 1  # the last one moves to p: the automaton's start
    moves = inner[:, inner_class[representative]]  # (n, K)
    table[p : p + num_inner] = np.where(moves >= 0, moves + p, -1)
    is_accepting = np.zeros(num_states, dtype=bool)
    if s:
        table[p + np.flatnonzero(is_final), byte_to_class[suffix[0]]] = p + num_inner
        for j, byte in enumerate(suffix[1:]):
            table[p + num_inner + j, byte_to_class[byte]] = p + num_inner + j + 1
        is_accepting[-1] = True
    else:
        is_accepting[p : p + num_inner] = is_final
    if not _may_merge_prefix(inner, inner_class, is_final, prefix):
        # minimal and trimmed as laid out (see _may_merge_prefix): no trim, no minimisation
        return ByteDFA(table, byte_to_class, is_accepting)
    return minimize(trim(table, byte_to_class, is_accepting), budget)


def _may_merge_prefix(
    inner: np.ndarray, inner_class: np.ndarray, is_final: np.ndarray, prefix: bytes
) -> bool:
    """Could the framed DFA ``prefix . A . suffix`` (A: an :class:`Automaton`, minimal and
    trimmed) be non-minimal? Its A states keep A's languages followed by the fixed suffix,
    and concatenating one fixed string is injective, so they stay pairwise distinct; a suffix
    state's strings are shorter than any an A state reads, and prefix states' shortest strings
    differ in length from each other's and exceed the suffix states'. Only a prefix state and
    an A state ``a`` may coincide, and then ``a`` reads exactly the prefix byte there: it is
    not final and the bytes it has moves on are that one byte. True where such a state exists
    (the caller minimises); False means minimal as built."""
    if not prefix:
        return False
    has_move = inner >= 0  # (n, C)
    is_single = has_move.sum(axis=1) == 1  # (n,) exactly one class read
    candidates = np.flatnonzero(is_single & ~is_final)
    if not candidates.size:
        return False
    class_sizes = np.bincount(inner_class, minlength=inner.shape[1])  # (C,) bytes per class
    prefix_classes = {int(inner_class[byte]) for byte in prefix}
    for state in candidates.tolist():
        read = int(np.flatnonzero(has_move[state])[0])
        if class_sizes[read] == 1 and read in prefix_classes:
            return True
    return False
