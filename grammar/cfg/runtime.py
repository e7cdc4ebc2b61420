"""CfgRuntime: byte-exact prefix tracking and token masks for a context-free grammar.

A position in the output is a *head set*: every way the bytes so far can be read as
``(parser node, lexer state)`` — the terminals completed so far (the node) and the live
partial lexeme (the lexer state, over the terminals that node expects). Reading a byte moves
every head inside its lexeme, and also, when the lexeme so far completes an expected terminal
``T``, scans ``T`` in the parser and starts the next lexeme with that byte. Because the grammar
is trimmed, a head set is non-empty iff the bytes are a prefix of some sentence.

Masks: token ``v`` is allowed from head ``(node, L)`` iff reading ``v`` leaves a head alive.
The reading either (a) stays inside the lexeme (precomputed per ``L``: ``within_row``), (b)
completes a terminal before the first byte (``L`` accepts ``T``: the mask of the head after
``T``), or (c) completes a terminal ``T`` strictly inside ``v``. For (c) the split points are
precomputed per ``L`` and grouped by the set of terminals completed there; what the remaining
suffixes do from a fresh lexeme depends only on the lexer state that lexeme starts in, so it is
precomputed per (group, start state) too (a compiled walk, memoised): again "within" tokens
and groups of further splits. At mask time only the parser is consulted: does the node take
``T``, which lexer state follows — context-independent token sets are ORed as packed bitsets,
no token is looked at one by one. (A :data:`~formcast.grammar.cfg.lexer.RESTART` group, ignored
text ending inside a token, continues with the same node.) Head masks, group masks and whole
masks are memoised (LRU) by (node, lexer state / group); nodes are hash-consed, so repeated
parse configurations (rollback, beams, repeated structure) reuse them, and the memo keys are
the nodes' behaviour signatures (``EarleyNode.signature``), so configurations that differ only
below a chain of completions (nested unary operators, say) share entries too.

Two shortcuts keep new parse contexts cheap, both exact. Repetition: when the node after ``T``
is a fixed point of ``T`` (same signature), the groups that complete ``T`` level after level
(``----``: 63 levels for a 64-dash token) are followed once per (group, fresh lexeme),
independently of the context (:meth:`CfgRuntime._chain`). Lexing ambiguity: a head set with
many heads (``notx`` = ``not x`` or the name ``notx``) computes and memoises the masks of its
first heads only; for the others, groups whose tokens are all allowed already are skipped.

Two parsers. Grammars whose SLR(1) tables have no conflicts (JSON, arithmetic, the Python-like
expressions, tool calls, most GBNF files) run on :mod:`formcast.grammar.cfg.lr`: a node is a
hash-consed LR stack, a step is a few table lookups instead of an Earley closure, and a memo
entry computed from a stack is keyed by the stack's top states down to the deepest one the
computation read (``LRParser.floor``), so new contexts that share their top of stack (``f(x,
[y, (z`` and ``(z``) share head and group masks, and each level of a repetition chain is one
memo entry. JSON-Schema grammars run on the LR parser whatever their conflicts (``"glr"``:
tables built on first use, a forest of stacks past a conflict). Other ambiguous or non-SLR
grammars (and any grammar compiled with ``max_depth``) run on the Earley parser with the
signature keys above; ``parser_kind`` forces one.

Thread safety: one compiled grammar is shared by matchers on several threads. Every operation
that may build parser nodes, lexer states, walks or memo entries runs under one re-entrant
lock per runtime; a memoised mask is read without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.cfg.earley import EarleyNode, EarleyParser
from formcast.grammar.cfg.lexer import RESTART, CfgLexer, SplitGroup
from formcast.grammar.cfg.lr import LRNode, LRParser, LRTable
from formcast.grammar.cfg.rules import PreparedGrammar

Head = tuple[EarleyNode | LRNode, int]
Heads = frozenset[Head]

_MAX_MEMO = 65536  # entries per memo table
# a mask row is ceil(V / 32) int32 words (6 KB for 49k tokens). Per memo table of rows: the
# first _MAX_PLAIN_ROWS entries keep their own rows, later ones share equal rows, at most
# _MAX_MEMO_ROWS distinct ones, each kept with a copy of its bytes (the pool's key): at 49k
# tokens 6 MB + 24 MB per table at most (a single bound of 4,096 rows was 24 MB)
_MAX_PLAIN_ROWS = 1024
_MAX_MEMO_ROWS = 2048
NUM_EXACT_HEADS = 3  # heads of a set whose masks are memoised; further ones are pruned
# LR path: a memo entry computed from a stack is keyed by the top states it read, rounded up to
# one of these counts (deeper: by the stack's identity)
_TOP_COUNTS = (1, 2, 4, 8, 16)


class _Lru(OrderedDict):
    """Bounded memo table (oldest insertion evicted first)."""

    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > _MAX_MEMO:
            self.popitem(last=False)


class _RowLru(OrderedDict):
    """Bounded memo table of read-only mask rows; past ``_MAX_PLAIN_ROWS`` entries equal rows
    are stored once.

    Most memoised rows of a large grammar repeat another's (a 1,000-member object: 10,611
    head-mask entries, 598 distinct rows), so past the first ``_MAX_PLAIN_ROWS`` entries
    (kept as they come: no hashing on a small grammar's first visits) each new row is looked
    up by its bytes (~3 us) and entries share it. Bounded by ``_MAX_MEMO`` entries and
    ``_MAX_MEMO_ROWS`` distinct shared rows (oldest insertions evicted first until both
    hold). A value is a row, or ``(row, depth)`` on the LR path (`CfgRuntime._memo_put`).
    """

    def __init__(self) -> None:
        super().__init__()
        # a row's bytes -> [the shared row, entries holding it, those bytes (the one copy
        # every entry refers to)]
        self._pool: dict[bytes, list] = {}
        self._bytes_of: dict = {}  # key -> its shared row's bytes (the pool's copy)
        self.is_sharing = False  # set once the table passes _MAX_PLAIN_ROWS entries

    def put_row(self, key, row: np.ndarray, depth: int | None = None) -> np.ndarray:
        """Store ``row`` (or ``(row, depth)``) under ``key``; returns the row stored, equal to
        ``row`` (read-only)."""
        if key in self._bytes_of:
            self._release(self._bytes_of.pop(key))
        if not self.is_sharing and len(self) >= _MAX_PLAIN_ROWS:
            self.is_sharing = True
        if self.is_sharing:
            data = row.tobytes()
            entry = self._pool.get(data)
            if entry is None:
                entry = self._pool[data] = [row, 0, data]
            entry[1] += 1
            self._bytes_of[key] = entry[2]
            row = entry[0]
        self[key] = row if depth is None else (row, depth)
        while len(self) > _MAX_MEMO or len(self._pool) > _MAX_MEMO_ROWS:
            oldest, _ = self.popitem(last=False)
            data = self._bytes_of.pop(oldest, None)
            if data is not None:
                self._release(data)
        return row

    def _release(self, data: bytes) -> None:
        """One entry less holds the shared row of ``data`` (dropped with the last)."""
        entry = self._pool[data]
        entry[1] -= 1
        if not entry[1]:
            del self._pool[data]


def lr_table(grammar: PreparedGrammar, *, is_lazy: bool = False) -> LRTable | None:
    """The SLR(1) tables of ``grammar``, kept on the grammar object (so the disk cache of
    compiled grammars stores what was built). ``is_lazy``: the table as built so far (states
    are built on first use, conflicts allowed: the parser forks); else every state, and
    ``None`` if they have a conflict."""
    found = getattr(grammar, "_lr_table", None)
    if found is None:
        found = grammar._lr_table = LRTable(grammar)
    if is_lazy:
        return found
    return None if found.build_all().has_conflicts else found


class CfgRuntime:
    """Head-set operations shared by every matcher of one compiled grammar.

    Parameters
    ----------
    parser, lexer:
        The grammar's Earley parser and lexer.
    eos_row:
        ``(num_words,)`` int32 packed row with only the EOS bits set.
    max_depth:
        Largest nesting depth :meth:`advance` accepts (``None``: unbounded); see
        :attr:`EarleyNode.depth <formcast.grammar.cfg.earley.EarleyNode>`.
    parser_kind:
        ``"auto"`` (default): an LR parser (:mod:`formcast.grammar.cfg.lr`) when the
        grammar has conflict-free SLR(1) tables and ``max_depth`` is ``None``, else ``parser``;
        ``"earley"``: always ``parser``; ``"lr"``: the LR parser (``GrammarError`` if the
        grammar has SLR(1) conflicts or ``max_depth`` is set); ``"glr"``: the LR parser on
        tables built state by state as it reads them, forking at conflicts (``GrammarError``
        if ``max_depth`` is set).
    num_exact_heads:
        Heads of a head set whose masks are computed exactly and memoised; further heads
        take the pruned path (0: every head does).
    """

    def __init__(
        self,
        parser: EarleyParser,
        lexer: CfgLexer,
        eos_row: np.ndarray,
        max_depth: int | None = None,
        parser_kind: str = "auto",
        num_exact_heads: int = NUM_EXACT_HEADS,
    ) -> None:
        if parser_kind not in ("auto", "earley", "lr", "glr"):
            raise GrammarError(
                f"parser_kind must be 'auto', 'earley', 'lr' or 'glr', got {parser_kind!r}"
            )
        table = None
        if parser_kind != "earley" and max_depth is None:
            table = lr_table(parser.grammar, is_lazy=parser_kind == "glr")
        if parser_kind == "lr" and table is None:
            raise GrammarError("the LR parser needs conflict-free SLR(1) tables and no max_depth")
        if parser_kind == "glr" and table is None:
            raise GrammarError("the forking LR parser tracks no nesting depth: no max_depth")
        self.is_lr = table is not None
        if self.is_lr:
            parser = LRParser(table)
        self.parser = parser
        self.lexer = lexer
        self.eos_row = eos_row
        self.num_words = len(eos_row)
        self.max_depth = max_depth
        # heads of a head set whose masks are computed exactly and memoised (the rest take
        # the pruned path); tests set 0 to send every head down the pruned path
        self.num_exact_heads = num_exact_heads
        self.lock = threading.RLock()
        self._head_masks = _RowLru()
        self._group_masks = _RowLru()
        self._masks = _RowLru()
        self._successors = _Lru()  # (signature, terminal) -> a node after it, or None
        self._chains: dict[tuple, tuple[np.ndarray, list[SplitGroup]]] = {}  # see _chain
        self._zero = np.zeros(self.num_words, dtype=np.int32)
        self._zero.setflags(write=False)

    def initial_heads(self) -> Heads:
        root = self.parser.root
        with self.lock:
            return frozenset({(root, self.lexer.initial(root.expected))})

    def after_terminal(self, node: EarleyNode, terminal: int) -> Head | None:
        """The fresh-lexeme head after scanning ``terminal`` from ``node`` (None if rejected)."""
        nxt = self.parser.advance(node, terminal)
        if nxt is None:
            return None
        return (nxt, self.lexer.initial(nxt.expected))

    # -- reading bytes ---------------------------------------------------------------------------

    def step(self, heads: Heads, byte: int) -> Heads:
        """Heads after one byte (empty: the bytes are not a prefix of any sentence)."""
        lexer = self.lexer
        out: set[Head] = set()
        with self.lock:
            for node, sid in heads:
                nxt = lexer.step(sid, byte)
                if nxt >= 0:
                    out.add((node, nxt))
                for terminal in lexer.accepts[sid]:
                    head = self.after_terminal(node, terminal)
                    if head is not None:
                        nxt = lexer.step(head[1], byte)
                        if nxt >= 0:
                            out.add((head[0], nxt))
        return frozenset(out)

    def advance(self, heads: Heads, data: bytes, offset: int = 0) -> Heads:
        """Heads after ``data`` (empty if rejected).

        Raises
        ------
        GrammarError
            If ``max_depth`` is set and ``data`` nests deeper than it; ``offset`` (the output
            length before ``data``) makes the reported position an output byte offset.
        """
        with self.lock:
            for k, byte in enumerate(data):
                heads = self.step(heads, byte)
                if not heads:
                    break
                if self.max_depth is not None:
                    depth = min(self._head_depth(head) for head in heads)
                    if depth > self.max_depth:
                        raise GrammarError(
                            f"nesting depth {depth} exceeds max_depth={self.max_depth} "
                            f"at output byte {offset + k}",
                            position=offset + k,
                        )
        return heads

    def _head_depth(self, head: Head) -> int:
        """Nesting depth of a head; a lexeme that is complete and cannot extend (e.g. ``[``)
        counts as scanned already, so the bound trips on the byte that opens the construct."""
        node, sid = head
        accepts = self.lexer.accepts[sid]
        if not accepts or max(self.lexer.row(sid)) >= 0:
            return node.depth
        after = [nxt.depth for t in accepts if (nxt := self.parser.advance(node, t)) is not None]
        return min(after) if after else node.depth

    def is_accepting(self, heads: Heads) -> bool:
        """True if the bytes so far form a complete sentence (EOS allowed)."""
        lexer = self.lexer
        with self.lock:
            for node, sid in heads:
                if lexer.is_boundary[sid] and node.is_accepting:
                    return True
                for terminal in lexer.accepts[sid]:
                    nxt = self.parser.advance(node, terminal)
                    if nxt is not None and nxt.is_accepting:
                        return True
        return False

    def next_bytes(self, heads: Heads) -> list[int]:
        """Ascending byte values that keep some head alive."""
        lexer = self.lexer
        allowed = np.zeros(256, dtype=bool)
        with self.lock:
            for node, sid in heads:
                allowed |= np.asarray(lexer.row(sid)) >= 0
                for terminal in lexer.accepts[sid]:
                    head = self.after_terminal(node, terminal)
                    if head is not None:
                        allowed |= np.asarray(lexer.row(head[1])) >= 0
        return np.flatnonzero(allowed).tolist()

    # -- masks -----------------------------------------------------------------------------------

    def mask(self, heads: Heads) -> np.ndarray:
        """``(num_words,)`` int32 packed mask of the tokens allowed after ``heads`` (read-only)."""
        # a sorted tuple of int pairs, not a frozenset: the collector stops tracking it (4,096
        # frozenset keys per grammar were a large share of a full collection's work)
        key = tuple(sorted([(node.signature, sid) for node, sid in heads]))
        found = self._masks.get(key)
        if found is not None:
            return found
        with self.lock:
            row = np.zeros(self.num_words, dtype=np.int32)
            pending = []
            for head in heads:
                found = self._memo_get(self._head_masks, head[0], head[1])
                if found is None:
                    pending.append(head)
                else:
                    row |= found
            for k, head in enumerate(pending):
                if k < self.num_exact_heads:
                    row |= self.head_mask(head)  # exact and memoised
                else:
                    self._add_head_mask(head, row)
            if self.is_accepting(heads):
                row |= self.eos_row
            row.setflags(write=False)
            row = self._masks.put_row(key, row)
        return row

    # -- memo keys -------------------------------------------------------------------------------
    #
    # Earley nodes: memo keys are behaviour signatures. LR stacks: a computation from a stack
    # records how deep it read (``LRParser.floor``); its result is keyed by the stack's top states
    # down to there (rounded up to one of _TOP_COUNTS; deeper: the stack's identity), so every
    # stack with those top states (nested contexts, other sentences) shares it. A hit lowers the
    # floor as the computation did, so enclosing computations stay keyed exactly.

    def _memo_get(self, table: _RowLru, node, tag) -> np.ndarray | None:
        if not self.is_lr:
            return table.get((node.signature, tag))
        for count in _TOP_COUNTS:
            found = table.get((node.tops(count), tag))
            if found is not None:
                break
            if count > node.height:  # the stack has no more states: longer keys are equal
                found = None
                break
        else:
            found = table.get((node.uid, tag))
        if found is None:
            return None
        row, depth = found
        floor = node.height - depth + 1
        if floor < self.parser.floor:
            self.parser.floor = floor
        return row

    def _memo_start(self, node) -> int:
        """Start a memoised computation from ``node``: returns the enclosing floor."""
        if not self.is_lr:
            return 0
        saved = self.parser.floor
        self.parser.floor = node.height
        return saved

    def _memo_put(self, table: _RowLru, node, tag, row: np.ndarray, saved: int) -> np.ndarray:
        """Store the result of the computation started by :meth:`_memo_start`; returns the
        table's shared row equal to ``row``."""
        if not self.is_lr:
            return table.put_row((node.signature, tag), row)
        parser = self.parser
        floor = parser.floor
        depth = node.height - floor + 1  # top states read
        if saved < floor:
            parser.floor = saved
        for count in _TOP_COUNTS:
            if depth <= count:
                return table.put_row((node.tops(count), tag), row, depth)
        return table.put_row((node.uid, tag), row, depth)

    # -- mask computations -----------------------------------------------------------------------

    def head_mask(self, head: Head) -> np.ndarray:
        """Text tokens allowed after one head (cases a, b, c of the module docstring)."""
        found = self._memo_get(self._head_masks, head[0], head[1])
        if found is None:
            with self.lock:
                found = self._add_head_mask(head, None)
        return found

    def _add_head_mask(self, head: Head, acc: np.ndarray | None) -> np.ndarray:
        """The tokens allowed after ``head``: with ``acc`` None, its exact row (memoised and
        returned); else ORed into ``acc`` (the other heads' mask so far), skipping split groups
        (at any depth) whose every token is in ``acc`` already: those tokens are allowed anyway,
        so the union stays exact, but the head's own row is not, and is not memoised."""
        node, sid = head
        walk = self.lexer.token_walk(sid)
        if acc is not None:
            acc |= walk.within_row
            for terminal in self.lexer.accepts[sid]:
                nxt = self._successor(node, terminal)
                if nxt is not None:
                    after = (nxt, self.lexer.initial(nxt.expected))
                    found = self._memo_get(self._head_masks, nxt, after[1])
                    if found is not None:
                        acc |= found
                    else:
                        self._add_head_mask(after, acc)
            for group in walk.splits:
                self._add_group_mask(node, group, acc)
            return acc
        saved = self._memo_start(node)
        row = walk.within_row.copy()
        for terminal in self.lexer.accepts[sid]:
            nxt = self._successor(node, terminal)
            if nxt is not None:
                row |= self.head_mask((nxt, self.lexer.initial(nxt.expected)))
        for group in walk.splits:
            row |= self._group_mask(node, group)
        row.setflags(write=False)
        return self._memo_put(self._head_masks, node, sid, row, saved)

    def _after(self, node, terminal: int):
        """The parser node after ``terminal`` completes at ``node`` and the lexer parts of the
        fresh lexeme that follows (``None`` if the parser rejects ``terminal``)."""
        if terminal == RESTART:  # ignored text ended: the parser has not moved
            return node, self.lexer.fresh_parts(node.expected, False)
        nxt = self._successor(node, terminal)
        if nxt is None:
            return None
        return nxt, self.lexer.fresh_parts(nxt.expected, True)

    def _add_group_mask(self, node, group: SplitGroup, acc: np.ndarray) -> None:
        """OR :meth:`_group_mask` into ``acc``, skipping (sub)groups ``acc`` covers already."""
        if group.is_covered(acc):
            return
        found = self._memo_get(self._group_masks, node, id(group))
        if found is not None:
            acc |= found
            return
        lexer = self.lexer
        for terminal in group.accepts:
            step = self._after(node, terminal)
            if step is None:
                continue
            nxt, parts = step
            walk = group.walk_from(lexer, parts)
            if walk.has_within:
                acc |= walk.within_row
            for inner in walk.splits:
                chain = self._chain(nxt, terminal, inner, parts)
                if chain is None:
                    self._add_group_mask(nxt, inner, acc)
                    continue
                acc |= chain[0]
                for side in chain[1]:
                    self._add_group_mask(nxt, side, acc)

    def _successor(self, node, terminal: int):
        """For masks: *a* node after ``terminal`` from any node with ``node``'s signature (all
        behave alike), so a chain like ``- - - -`` builds one parser node, not one per level.
        (LR stacks memoise their successors themselves, with the stack depth read.)"""
        if self.is_lr:
            return self.parser.advance(node, terminal)
        key = (node.signature, terminal)
        found = self._successors.get(key, False)
        if found is False:
            found = self.parser.advance(node, terminal)
            self._successors.put(key, found)
        return found

    def _chain(
        self, node, terminal: int, group: SplitGroup, parts: tuple[int, ...]
    ) -> tuple[np.ndarray, list[SplitGroup]] | None:
        """Repeated terminals (``----``, ``((((`` where the parser loops): if ``group``
        completes ``terminal`` again and ``node`` (just after ``terminal``, with fresh lexeme
        ``parts``) is a fixed point of it (the node after ``terminal`` has ``node``'s
        signature), every level of the repetition reads from the same parse configuration.
        Then the groups that complete ``terminal`` level after level are followed here once,
        independently of the context: returns the union of their within rows and the other
        groups met on the way (to resolve against ``node``); ``None`` if this is no fixed
        point (always on the LR path: a stack never equals its extension; there each level's
        group mask is keyed by the few top states it reads instead). Memoised per
        (group, terminal, parts)."""
        if self.is_lr or group.accepts != frozenset((terminal,)) or terminal == RESTART:
            return None
        after = self._successor(node, terminal)
        if after is None or after.signature != node.signature:
            return None
        key = (id(group), terminal, parts)
        found = self._chains.get(key)
        if found is None:
            row = np.zeros(self.num_words, dtype=np.int32)
            sides: list[SplitGroup] = []
            stack = [group]
            while stack:
                walk = stack.pop().walk_from(self.lexer, parts)
                if walk.has_within:
                    row |= walk.within_row
                for inner in walk.splits:
                    if inner.accepts == group.accepts:
                        stack.append(inner)
                    else:
                        sides.append(inner)
            row.setflags(write=False)
            found = self._chains[key] = (row, sides)
        return found

    def _group_mask(self, node, group: SplitGroup) -> np.ndarray:
        """Tokens of ``group`` allowed from ``node``: the node takes a completed terminal and
        the token's suffix is read from the fresh lexeme that follows (recursively)."""
        found = self._memo_get(self._group_masks, node, id(group))
        if found is not None:
            return found
        saved = self._memo_start(node)
        lexer = self.lexer
        row = None  # read-only while it is a shared row, a private copy once ORed into
        is_private = False
        for terminal in group.accepts:
            step = self._after(node, terminal)
            if step is None:
                continue
            nxt, parts = step
            walk = group.walk_from(lexer, parts)
            rows = [walk.within_row] if walk.has_within else []
            for inner in walk.splits:
                chain = self._chain(nxt, terminal, inner, parts)
                if chain is None:
                    rows.append(self._group_mask(nxt, inner))
                else:
                    rows.append(chain[0])
                    rows += [self._group_mask(nxt, side) for side in chain[1]]
            for other in rows:
                if row is None:
                    row = other
                elif is_private:
                    row |= other
                else:
                    row = row | other
                    is_private = True
        if row is None:
            row = self._zero
        elif is_private:
            row.setflags(write=False)
        return self._memo_put(self._group_masks, node, id(group), row, saved)
