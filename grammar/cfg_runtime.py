"""CfgRuntime: byte-exact prefix tracking and token masks for a context-free grammar.

A position in the output is a *head set*: every way the bytes so far can be read as
``(Earley node, lexer state)`` — the terminals completed so far (the node) and the live
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
precomputed per (group, start state) too (a vectorised walk, memoised): again "within" tokens
and groups of further splits. At mask time only the parser is consulted: does the node take
``T``, which lexer state follows — context-independent token sets are ORed as packed bitsets,
no token is looked at one by one. Head masks, group masks and whole masks are memoised (LRU)
by (node, lexer state / group); nodes are hash-consed, so repeated parse configurations
(rollback, beams, repeated structure) reuse them, and the memo keys are the nodes' behaviour
signatures (``EarleyNode.signature``), so configurations that differ only below a chain of
completions (nested unary operators, say) share entries too.

Thread safety: one compiled grammar is shared by matchers on several threads. Every operation
that may build parser nodes, lexer states, walks or memo entries runs under one re-entrant
lock per runtime; a memoised mask is read without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.cfg_lexer import CfgLexer, SplitGroup
from formcast.grammar.earley_parser import EarleyNode, EarleyParser

Head = tuple[EarleyNode, int]
Heads = frozenset[Head]

_MAX_MEMO = 4096  # entries per memo table; a mask row is ceil(V / 32) int32 words (6 KB)


class _Lru(OrderedDict):
    """Bounded memo table (oldest insertion evicted first)."""

    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > _MAX_MEMO:
            self.popitem(last=False)


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
        :attr:`EarleyNode.depth <formcast.grammar.earley_parser.EarleyNode>`.
    """

    def __init__(
        self,
        parser: EarleyParser,
        lexer: CfgLexer,
        eos_row: np.ndarray,
        max_depth: int | None = None,
    ) -> None:
        self.parser = parser
        self.lexer = lexer
        self.eos_row = eos_row
        self.num_words = len(eos_row)
        self.max_depth = max_depth
        self.lock = threading.RLock()
        self._head_masks = _Lru()
        self._group_masks = _Lru()
        self._masks = _Lru()
        self._successors = _Lru()  # (signature, terminal) -> a node after it, or None
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
        key = frozenset((node.signature, sid) for node, sid in heads)
        found = self._masks.get(key)
        if found is not None:
            return found
        with self.lock:
            row = np.zeros(self.num_words, dtype=np.int32)
            for head in heads:
                row |= self.head_mask(head)
            if self.is_accepting(heads):
                row |= self.eos_row
            row.setflags(write=False)
            self._masks.put(key, row)
        return row

    def head_mask(self, head: Head) -> np.ndarray:
        """Text tokens allowed after one head (cases a, b, c of the module docstring)."""
        node, sid = head
        key = (node.signature, sid)
        found = self._head_masks.get(key)
        if found is not None:
            return found
        with self.lock:
            walk = self.lexer.token_walk(sid)
            row = walk.within_row.copy()
            for terminal in self.lexer.accepts[sid]:
                nxt = self._successor(node, terminal)
                if nxt is not None:
                    row |= self.head_mask((nxt, self.lexer.initial(nxt.expected)))
            for group in walk.splits:
                row |= self._group_mask(node, group)
            row.setflags(write=False)
            self._head_masks.put(key, row)
        return row

    def _successor(self, node: EarleyNode, terminal: int) -> EarleyNode | None:
        """For masks: *a* node after ``terminal`` from any node with ``node``'s signature (all
        behave alike), so a chain like ``- - - -`` builds one parser node, not one per level."""
        key = (node.signature, terminal)
        found = self._successors.get(key, False)
        if found is False:
            found = self.parser.advance(node, terminal)
            self._successors.put(key, found)
        return found

    def _group_mask(self, node: EarleyNode, group: SplitGroup) -> np.ndarray:
        """Tokens of ``group`` allowed from ``node``: the node takes a completed terminal and
        the token's suffix is read from the fresh lexeme that follows (recursively)."""
        key = (node.signature, id(group))
        found = self._group_masks.get(key)
        if found is not None:
            return found
        row = None
        for terminal in group.accepts:
            nxt = self._successor(node, terminal)
            if nxt is None:
                continue
            walk = group.walk_from(self.lexer, self.lexer.initial(nxt.expected))
            if row is None:
                row = walk.within_row.copy()
            else:
                row |= walk.within_row
            for inner in walk.splits:
                row |= self._group_mask(nxt, inner)
        if row is None:
            row = self._zero
        else:
            row.setflags(write=False)
        self._group_masks.put(key, row)
        return row
