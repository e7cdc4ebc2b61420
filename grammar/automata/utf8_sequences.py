"""UTF-8 sequences: a code point set as byte-range sequences, and as a small byte automaton.

A code point range ``[lo, hi]`` is split until every piece encodes to a fixed length and is the
Cartesian product of per-byte ranges (the construction RE2 and Rust's ``utf8-ranges`` use):
e.g. ``U+0800..U+FFFF`` minus surrogates becomes ``[E0][A0-BF][80-BF]``,
``[E1-EC][80-BF][80-BF]``, ``[ED][80-9F][80-BF]``, ``[EE-EF][80-BF][80-BF]``. The sequences
then form a trie whose equal suffixes are merged, so a class like Unicode ``\\w`` costs a few
hundred byte edges instead of thousands. Overlong forms and surrogates are never produced.
"""

from __future__ import annotations

from functools import lru_cache

from formcast.grammar import caches
from formcast.grammar.regex.char_classes import Ranges, normalize

ByteRange = tuple[int, int]
# (num_nodes, edges) with node 0 = entry, node 1 = exit; edges are (src, lo, hi, dst).
Fragment = tuple[int, tuple[tuple[int, int, int, int], ...]]

_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def byte_sequences(ranges: Ranges) -> list[tuple[ByteRange, ...]]:
    """Split code point ranges into sequences of byte ranges with the same UTF-8 language.

    Surrogates (U+D800..U+DFFF) have no UTF-8 encoding: they are left out, whoever built the
    set (a literal ``"\ud800"`` from a JSON Schema ``const`` or a ``choice`` matches nothing,
    as it does in a regex), so no automaton accepts bytes that are not UTF-8.
    """
    out: list[tuple[ByteRange, ...]] = []
    stack = [r for r in reversed(normalize(ranges))]
    while stack:
        lo, hi = stack.pop()
        # 1. split at encoding-length boundaries
        split = False
        for limit in _LENGTH_LIMITS[:-1]:
            if lo <= limit < hi:
                stack.append((limit + 1, hi))
                stack.append((lo, limit))
                split = True
                break
        if split:
            continue
        if hi <= 0x7F:
            out.append(((lo, hi),))
            continue
        # 2. split until every continuation byte position spans a full or aligned range
        num_bytes = len(_encode(lo))
        for i in range(1, num_bytes):
            mask = (1 << (6 * i)) - 1
            if lo & ~mask != hi & ~mask:
                if lo & mask:
                    stack.append(((lo | mask) + 1, hi))
                    stack.append((lo, lo | mask))
                    split = True
                    break
                if hi & mask != mask:
                    stack.append((hi & ~mask, hi))
                    stack.append((lo, (hi & ~mask) - 1))
                    split = True
                    break
        if split:
            continue
        first, last = _encode(lo), _encode(hi)
        out.append(tuple((first[k], last[k]) for k in range(num_bytes)))
    return out


@lru_cache(maxsize=4096)
def fragment(ranges: Ranges) -> Fragment:
    """A byte automaton for the UTF-8 encodings of ``ranges``: entry node 0, exit node 1.

    Built as a trie over :func:`byte_sequences` whose nodes with identical outgoing edges are
    merged bottom-up (hash-consing), which shares the common continuation-byte tails.
    """
    # trie: node -> {(lo, hi): child}; node 1 is the shared exit
    children: list[dict[ByteRange, int]] = [{}, {}]
    for seq in byte_sequences(ranges):
        node = 0
        for k, rng in enumerate(seq):
            if k == len(seq) - 1:
                children[node][rng] = 1
                break
            nxt = children[node].get(rng)
            if nxt is None:
                nxt = len(children)
                children.append({})
                children[node][rng] = nxt
            node = nxt
    # merge equivalent nodes bottom-up: signature = sorted (range, canonical child) pairs
    canonical: dict[int, int] = {1: 1}
    registry: dict[tuple, int] = {}

    def canon(node: int) -> int:
        if node in canonical:
            return canonical[node]
        signature = tuple(sorted((rng, canon(child)) for rng, child in children[node].items()))
        if node == 0:
            canonical[0] = 0
            return 0
        canonical[node] = registry.setdefault(signature, node)
        return canonical[node]

    canon(0)
    # renumber the surviving nodes compactly, keeping 0 and 1
    numbering = {0: 0, 1: 1}
    edges: list[tuple[int, int, int, int]] = []
    order = [0]
    seen = {0}
    while order:
        node = order.pop()
        for (lo, hi), child in sorted(children[node].items()):
            target = canonical[child]
            if target not in numbering:
                numbering[target] = len(numbering)
            if target not in seen and target != 1:
                seen.add(target)
                order.append(target)
            edges.append((numbering[node], lo, hi, numbering[target]))
    return len(numbering), tuple(edges)


caches.register("automata.utf8_fragments", "LRU: 4096 code point sets", fragment.cache_clear)
