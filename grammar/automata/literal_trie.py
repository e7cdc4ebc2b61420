"""literal_trie: the options of an alternation of literals as one trie, built with array code.

An ``enum`` of a JSON schema is an alternation of literal texts (country codes, time zones,
MIME types: hundreds to thousands of them). Built option by option, the NFA gets one state per
character, each made by a Python call. The NFA builder shares equal (node, continuation) pairs,
so those states are the options' distinct *suffixes*: the trie of the reversed options, which
this module builds with whole-array steps (only reading the options' characters is a loop).
Where every option is a literal, the subset construction meets the same NFA either way (and
so the same state budget); other options of the alternation are built as before (the plain
build may let one share a suffix's state with a literal option, the trie does not).

:func:`trie` sorts the words and lays them out in a grid; a word's node at position ``p`` is
new where ``p`` is past its longest common prefix with the word before it (sorted order: the
words sharing a prefix are contiguous, so that is the only word it can share the node with),
else the node the word before it has there.
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.automata.literal_dfa import code_point_bytes
from formcast.grammar.regex.syntax_tree import CharSet, Concat, Node


def literal_bytes(node: Node) -> bytes | None:
    """The UTF-8 bytes of ``node`` if it is a literal (a code point, or a concatenation of
    single code points), else ``None``."""
    items = node.items if type(node) is Concat else (node,)
    out = bytearray()
    for item in items:
        if type(item) is not CharSet:
            return None
        ranges = item.ranges  # type: ignore[union-attr]
        if len(ranges) != 1 or ranges[0][0] != ranges[0][1]:
            return None
        code = ranges[0][0]
        if code < 0x80:
            out.append(code)
            continue
        encoded = code_point_bytes(code)
        if encoded is None:
            return None
        out += encoded
    return bytes(out)


def trie(words: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trie of ``words``: node 0 is the root (the empty prefix), node ``k >= 1`` the
    prefix its parent's plus one byte.

    Returns
    -------
    tuple[np.ndarray, np.ndarray, np.ndarray]
        ``(parent (N,), byte (N,), node_of (W,))`` int64: each node's parent and the byte on
        the edge into it (both 0 at the root; a parent is numbered before its children), and
        the node of each word, in the order of ``words`` (duplicates allowed).
    """
    ordered, where = np.unique(np.array(words, dtype=object), return_inverse=True)
    num_words = len(ordered)
    lengths = np.fromiter(map(len, ordered), dtype=np.int64, count=num_words)  # (W,)
    width = int(lengths.max(initial=0))
    columns = np.arange(width)
    is_valid = columns[None, :] < lengths[:, None]  # (W, L): position p holds a byte
    grid = np.zeros((num_words, width), dtype=np.int64)  # (W, L)
    grid[is_valid] = np.frombuffer(b"".join(ordered.tolist()), dtype=np.uint8)
    # longest common prefix with the word before (0 for the first): the first position
    # where the two differ or one ends (a column of "differs" appended as a sentinel)
    same = np.zeros((num_words, width + 1), dtype=np.bool_)
    same[1:, :width] = (grid[1:] == grid[:-1]) & is_valid[1:] & is_valid[:-1]
    common = np.argmin(same, axis=1)  # (W,)
    is_new = is_valid & (columns[None, :] >= common[:, None])  # (W, L): cells making a node
    num_nodes = 1 + int(is_new.sum())
    node = np.zeros((num_words, width), dtype=np.int64)
    node[is_new] = np.arange(1, num_nodes)  # row-major: a parent is numbered before its child
    # a shared cell (p < common) is the node of the last word above that made one there
    maker = np.maximum.accumulate(np.where(is_new, np.arange(num_words)[:, None], 0), axis=0)
    node = node[maker, columns[None, :]] * is_valid  # (W, L)
    above = np.zeros((num_words, width), dtype=np.int64)
    above[:, 1:] = node[:, :-1]
    parent = np.zeros(num_nodes, dtype=np.int64)
    byte = np.zeros(num_nodes, dtype=np.int64)
    parent[1:] = above[is_new]
    byte[1:] = grid[is_new]
    if width == 0:  # the empty word alone
        return parent, byte, np.zeros(len(words), dtype=np.int64)
    ends = node[np.arange(num_words), np.maximum(lengths - 1, 0)] * (lengths > 0)  # (W,)
    return parent, byte, ends[where.reshape(-1)]
