"""FIRST and FOLLOW sets of a prepared grammar, as int bit sets (bit ``t`` = terminal ``t``).

``FIRST(n)``: the terminals that can start a string derived from nonterminal ``n``.
``FOLLOW(x)``: the terminals that can come right after symbol ``x`` (a nonterminal or a
terminal) in some sentential form derived from the start symbol; bit ``num_terminals`` marks
the end of input (in ``FOLLOW(start)`` and whatever can end a sentence).

Both are least fixed points of "base sets plus inclusions along edges", solved by one worklist
pass: FIRST(B) is included in FIRST(A) when B starts a rule of A after a nullable prefix; for
``A -> alpha X beta``, FIRST(beta) is included in FOLLOW(X), and FOLLOW(A) in FOLLOW(X) when
beta is nullable. (Iterating every rule until nothing changes costs rules x chain length:
seconds on large JSON-schema grammars.) Used by the LR tables (reductions on FOLLOW) and the
lexer's follow filter.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from formcast.grammar.cfg.rules import PreparedGrammar


@dataclass(frozen=True)
class FirstFollow:
    """FIRST / FOLLOW bit sets of one grammar (see module docstring).

    Attributes
    ----------
    first:
        Per nonterminal.
    follow:
        Per nonterminal.
    terminal_follow:
        Per terminal.
    """

    first: list[int]
    follow: list[int]
    terminal_follow: list[int]


def first_follow(grammar: PreparedGrammar) -> FirstFollow:
    """FIRST and FOLLOW of ``grammar`` (rule 0, ``S' -> start``, is the augmented start);
    computed once per grammar (the LR tables and the lexer's follow sets both need them)."""
    found = grammar.__dict__.get("_first_follow")
    if found is None:
        found = grammar.__dict__["_first_follow"] = _first_follow(grammar)
    return found


def _first_follow(grammar: PreparedGrammar) -> FirstFollow:
    rules, is_nullable = grammar.rules, grammar.is_nullable
    num_nt = len(grammar.nonterminal_names)
    first_base = [0] * num_nt
    first_edges: list[list[int]] = [[] for _ in range(num_nt)]  # B -> A: FIRST(B) in FIRST(A)
    for lhs, rhs in rules[1:]:
        for s in rhs:
            if s >= 0:
                first_base[lhs] |= 1 << s
                break
            first_edges[~s].append(lhs)
            if not is_nullable[~s]:
                break
    first = least_fixed_point(first_base, first_edges)
    # FOLLOW over nodes: nonterminal n is node n, terminal t is node num_nt + t
    num_nodes = num_nt + grammar.num_terminals
    follow_base = [0] * num_nodes
    follow_base[grammar.start] |= 1 << grammar.num_terminals
    follow_edges: list[list[int]] = [[] for _ in range(num_nodes)]  # A -> X: FOLLOW(A) in FOLLOW(X)
    for lhs, rhs in rules[1:]:
        suffix_first, is_suffix_nullable = 0, True  # FIRST / nullability of the rhs after s
        for s in reversed(rhs):
            node = num_nt + s if s >= 0 else ~s
            follow_base[node] |= suffix_first
            if is_suffix_nullable:
                follow_edges[lhs].append(node)
            if s >= 0:
                suffix_first, is_suffix_nullable = 1 << s, False
            elif is_nullable[~s]:
                suffix_first |= first[~s]
            else:
                suffix_first, is_suffix_nullable = first[~s], False
    follow = least_fixed_point(follow_base, follow_edges)
    return FirstFollow(first, follow[:num_nt], follow[num_nt:])


def least_fixed_point(base: list[int], edges: list[list[int]]) -> list[int]:
    """Smallest ``sets`` with ``sets[v] >= base[v]`` and ``sets[v] >= sets[u]`` for every edge
    ``u -> v`` in ``edges[u]`` (int bit sets)."""
    sets = list(base)
    queue = deque(v for v in range(len(base)) if base[v])
    is_queued = [bool(b) for b in base]
    while queue:
        u = queue.popleft()
        is_queued[u] = False
        bits = sets[u]
        for v in edges[u]:
            merged = sets[v] | bits
            if merged != sets[v]:
                sets[v] = merged
                if not is_queued[v]:
                    is_queued[v] = True
                    queue.append(v)
    return sets


def bit_set(bits: int) -> set[int]:
    """The members of an int bit set (one step per member: FOLLOW sets are sparse)."""
    members = set()
    while bits:
        lowest = bits & -bits
        members.add(lowest.bit_length() - 1)
        bits ^= lowest
    return members
