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
``T``), or (c) completes a terminal strictly inside ``v`` (precomputed per ``L``: the split
points and suffixes; only the suffixes are read at run time, through the head sets after the
completed terminal, walking shared prefixes once and pruning dead ones). Per-head masks and
whole masks are memoised by (node, lexer state); nodes are hash-consed, so repeated parse
configurations (rollback, beams, repeated structure) reuse them.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from formcast.grammar.cfg_lexer import CfgLexer, SplitGroup
from formcast.grammar.earley_parser import EarleyNode, EarleyParser

Head = tuple[EarleyNode, int]
Heads = frozenset[Head]

_MAX_MEMO = 4096


class _Lru(OrderedDict):
    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > _MAX_MEMO:
            self.popitem(last=False)


class CfgRuntime:
    """Head-set operations shared by every matcher of one compiled grammar."""

    def __init__(self, parser: EarleyParser, lexer: CfgLexer, eos_row: np.ndarray) -> None:
        self.parser = parser
        self.lexer = lexer
        self.eos_row = eos_row  # (num_words,) int32 with only the EOS bits set
        self.num_words = len(eos_row)
        self._head_masks = _Lru()
        self._masks = _Lru()
        self._after_terminal: dict[tuple[int, int], Head | None] = {}

    def initial_heads(self) -> Heads:
        root = self.parser.root
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

    def advance(self, heads: Heads, data: bytes) -> Heads:
        for byte in data:
            heads = self.step(heads, byte)
            if not heads:
                break
        return heads

    def is_accepting(self, heads: Heads) -> bool:
        """True if the bytes so far form a complete sentence (EOS allowed)."""
        lexer = self.lexer
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
        key = frozenset((node.uid, sid) for node, sid in heads)
        found = self._masks.get(key)
        if found is not None:
            return found
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
        key = (node.uid, sid)
        found = self._head_masks.get(key)
        if found is not None:
            return found
        walk = self.lexer.token_walk(sid)
        row = walk.within_row.copy()
        for terminal in self.lexer.accepts[sid]:
            after = self.after_terminal(node, terminal)
            if after is not None:
                row |= self.head_mask(after)
        words = row.view(np.uint32)
        for group in walk.splits:
            heads = frozenset(
                h for t in group.accepts if (h := self.after_terminal(node, t)) is not None
            )
            if not heads:
                continue
            ids = self._alive_suffix_tokens(heads, group)
            if len(ids):
                np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
        row.setflags(write=False)
        self._head_masks.put(key, row)
        return row

    def _alive_suffix_tokens(self, heads: Heads, group: SplitGroup) -> np.ndarray:
        """Token ids of ``group`` whose suffix keeps ``heads`` alive. Only suffixes starting
        with a byte the heads allow are read; shared prefixes are read once (a depth-first walk
        of their trie, the suffixes being sorted) and dead prefixes prune their subtree."""
        picked: list[np.ndarray] = []
        for first in self.next_bytes(heads):
            if not group.has_first_byte(first):
                continue
            suffixes, token_ids, offsets = group.suffixes_from(first)
            path = b""
            stack = [heads]  # stack[i]: heads after path[:i]
            for k, suffix in enumerate(suffixes):
                common = 0
                limit = min(len(path), len(suffix))
                while common < limit and path[common] == suffix[common]:
                    common += 1
                del stack[common + 1 :]
                current = stack[-1]
                i = common
                while current and i < len(suffix):
                    current = self.step(current, suffix[i])
                    stack.append(current)
                    i += 1
                path = suffix[: len(stack) - 1]
                if current and i == len(suffix):
                    picked.append(token_ids[offsets[k] : offsets[k + 1]])
        return np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
