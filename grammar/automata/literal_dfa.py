"""literal_dfa: the minimal DFA of a literal with optional single characters, built directly.

Most terminals of a JSON-Schema grammar are literals with optional layout bytes: ``, ?"name": ?``
(kb_151: 334 of 494). The general path (Thompson NFA, subset construction, Hopcroft) costs
~80 µs for each; this one reads the tree as a sequence of byte *steps* and runs the subset
construction on that line directly.

A step reads one byte and is optional or not (a code point outside ASCII is its UTF-8 bytes,
all required; an optional one is left to the general path). The NFA states are the positions
``0..n`` between steps, position ``i`` moving to ``i + 1`` on step ``i``'s byte, and also
without a byte when step ``i`` is optional; a DFA state is the set of positions a prefix can
reach. Every set can reach position ``n`` (acceptance), so the DFA is trimmed, and it is
minimal: two reachable sets ``P != Q`` accept different suffix languages (checked against
Hopcroft in ``tests/grammar/automata/test_literal_dfa.py``). States are numbered breadth
first from the start (state 0).
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.regex.syntax_tree import CharSet, Concat, Node, Repeat

_SURROGATES = range(0xD800, 0xE000)


def code_point_bytes(code: int) -> bytes | None:
    """The UTF-8 bytes of one code point, or ``None`` for a surrogate (it has no UTF-8 form:
    the general path decides what such a pattern means)."""
    return None if code in _SURROGATES else chr(code).encode("utf-8")


def literal_steps(node: Node) -> list[tuple[int, bool]] | None:
    """``[(byte, is_optional)]`` of a pattern made of single code points and optional single
    ASCII characters (concatenated, at any nesting), else ``None``."""
    steps: list[tuple[int, bool]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Concat):
            stack.extend(reversed(item.items))
            continue
        is_optional = False
        if isinstance(item, Repeat):
            if item.min_count != 0 or item.max_count != 1:
                return None
            item, is_optional = item.item, True
        if not isinstance(item, CharSet) or len(item.ranges) != 1:
            return None
        lo, hi = item.ranges[0]
        if lo != hi:
            return None
        if lo < 0x80:
            steps.append((lo, is_optional))
            continue
        encoded = None if is_optional else code_point_bytes(lo)
        if encoded is None:
            return None
        steps += [(byte, False) for byte in encoded]
    return steps


def literal_dfa(node: Node) -> ByteDFA | None:
    """The minimal DFA of ``node`` if :func:`literal_steps` reads it, else ``None``."""
    steps = literal_steps(node)
    if steps is None:
        return None
    used = sorted({byte for byte, _ in steps})
    if len(used) > 254:  # class ids are uint8, class 0 taken
        return None
    n = len(steps)
    # closure[i]: the positions reached from i without a byte (i, then past optional steps)
    closure: list[tuple[int, ...]] = [()] * (n + 1)
    closure[n] = (n,)
    for i in range(n - 1, -1, -1):
        closure[i] = (i, *closure[i + 1]) if steps[i][1] else (i,)
    class_of = {byte: k + 1 for k, byte in enumerate(used)}  # class 0: every other byte
    start = closure[0]
    state_ids = {start: 0}
    order = [start]
    sources: list[int] = []  # the edges (source state, class, target state)
    classes: list[int] = []
    targets: list[int] = []
    for source, positions in enumerate(order):  # grows while iterating: breadth first
        if len(positions) == 1:  # one position: at most one move (most states of a literal)
            i = positions[0]
            moves = {steps[i][0]: closure[i + 1]} if i < n else {}
        else:
            moves = {}
            for i in positions:
                if i < n:
                    byte = steps[i][0]
                    found = moves.get(byte)
                    moves[byte] = (
                        closure[i + 1]
                        if found is None
                        else tuple(sorted({*found, *closure[i + 1]}))
                    )
        for byte, target in moves.items():
            state = state_ids.get(target)
            if state is None:
                state = state_ids[target] = len(order)
                order.append(target)
            sources.append(source)
            classes.append(class_of[byte])
            targets.append(state)
    transitions = np.full((len(order), len(used) + 1), -1, dtype=np.int32)
    transitions[sources, classes] = targets
    byte_to_class = np.zeros(256, dtype=np.uint8)
    byte_to_class[used] = np.arange(1, len(used) + 1, dtype=np.uint8)
    return ByteDFA(
        transitions=transitions,
        byte_to_class=byte_to_class,
        is_accepting=np.array([positions[-1] == n for positions in order], dtype=bool),
    )
