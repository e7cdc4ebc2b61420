"""The NFA builder shares a subtree named twice with the same continuation, exactly.

An object's optional member is written either first or after a comma (``B(,p)? | p``): the
tree names ``p`` twice, both followed by the same text. Built as two copies, the copies double
at every nesting level; built right to left with shared ``(node, next state)`` entries, the
NFA grows linearly with the depth. The language must not change: trees with shared subtrees
(repeats, alternations, nested objects, non-ASCII sets) are checked against ``re.fullmatch``
of their own Python regex on sampled and mutated strings.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import CompileBudgetError
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize
from formcast.grammar.automata.nfa_builder import build_nfa, unshared_states
from formcast.grammar.regex.combinators import alt, char_range, literal, opt, repeat, seq, star
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    CharSet,
    Concat,
    Node,
    Repeat,
    to_python_regex,
)


def _object(members: list[Node], required: list[bool]) -> Node:
    """``{`` members in order, optional ones optional, comma-separated ``}`` (as objects.py)."""
    sep = literal(",")
    body: Node | None = None
    empty_ok = True
    for pair, is_req in zip(members, required, strict=True):
        if body is None:
            body = pair
        elif is_req:
            body = seq(opt(seq(body, sep)), pair) if empty_ok else seq(body, sep, pair)
        else:
            body = (
                alt([seq(body, opt(seq(sep, pair))), pair])
                if empty_ok
                else seq(body, opt(seq(sep, pair)))
            )
        empty_ok = empty_ok and not is_req
    assert body is not None
    return seq(literal("{"), opt(body) if empty_ok else body, literal("}"))


def _nested(depth: int) -> Node:
    """Objects ``{"x":0?, "a":<the next level>?, "y":0?}``, ``depth`` levels: the minimal DFA
    grows linearly with the depth (one nested member per level)."""
    value: Node = literal("0")
    for _ in range(depth):
        members = [seq(literal(f'"{k}":'), v) for k, v in (("x", literal("0")), ("a", value))]
        members.append(seq(literal('"y":'), literal("0")))
        value = _object(members, [False, False, False])
    return value


def test_nested_optional_members_build_a_linear_nfa():
    budget = CompileBudget(max_states=10**6, timeout_s=60.0)
    sizes = [build_nfa(_nested(depth), budget).num_states for depth in (4, 8, 12)]
    # two copies per member per level would be ~2**depth; shared, each level adds a constant
    assert sizes[2] - sizes[1] == sizes[1] - sizes[0], sizes
    assert sizes[2] < 40 * 12, sizes
    dfa = determinize(build_nfa(_nested(12), budget), budget)
    assert dfa.num_states < 40 * 12


def _sample(node: Node, rng: random.Random, out: list[str]) -> None:
    """Append one random string of ``node``'s language (counts capped at 3 extra copies)."""
    if isinstance(node, CharSet):
        lo, hi = rng.choice(node.ranges)
        out.append(chr(rng.randint(lo, hi)))
    elif isinstance(node, Concat):
        for item in node.items:
            _sample(item, rng, out)
    elif isinstance(node, Alternation):
        _sample(rng.choice(node.options), rng, out)
    elif isinstance(node, Repeat):
        top = node.max_count if node.max_count is not None else node.min_count + 3
        for _ in range(rng.randint(node.min_count, top)):
            _sample(node.item, rng, out)
    else:  # pragma: no cover - the strategy builds no other node
        raise TypeError(node)


_LEAVES = [literal("a"), literal("bc"), char_range("0", "9"), char_range("é", "ü"), literal("€")]


@st.composite
def _shared_trees(draw, depth: int = 2) -> Node:
    """Trees whose parts reuse the same subtree objects in several places."""
    if depth == 0:
        return draw(st.sampled_from(_LEAVES))
    parts = [draw(_shared_trees(depth - 1)) for _ in range(draw(st.integers(1, 3)))]
    kind = draw(st.sampled_from(["object", "alt_shared", "repeat", "star", "seq"]))
    if kind == "object":
        required = draw(st.lists(st.booleans(), min_size=len(parts), max_size=len(parts)))
        return _object(parts, required)
    if kind == "alt_shared":  # X(,Y)? | Y and Y X | X: the same object on both sides
        x, y = parts[0], parts[-1]
        return alt([seq(x, opt(seq(literal(","), y))), y, seq(y, x)])
    if kind == "repeat":
        lo = draw(st.integers(0, 2))
        return repeat(seq(*parts), lo, lo + draw(st.integers(0, 2)))
    if kind == "star":
        return seq(star(parts[0]), *parts)
    return seq(*parts, *parts)


@settings(max_examples=150, deadline=None)
@given(_shared_trees(), st.integers(0, 2**32))
def test_shared_subtrees_keep_the_language(node: Node, seed: int):
    budget = CompileBudget(max_states=10**6, timeout_s=60.0)
    dfa = determinize(build_nfa(node, budget), budget)
    pattern = re.compile(to_python_regex(node), re.DOTALL)
    rng = random.Random(seed)
    for _ in range(20):
        out: list[str] = []
        _sample(node, rng, out)
        text = "".join(out)
        candidates = [text]
        if text:  # mutations: drop, duplicate or replace one character
            k = rng.randrange(len(text))
            candidates += [text[:k] + text[k + 1 :], text[:k] + text[k] + text[k:]]
            candidates.append(text[:k] + rng.choice("a,{}0é€x") + text[k + 1 :])
        for candidate in candidates:
            state = dfa.walk(dfa.start_state, candidate.encode())
            is_accepted = state >= 0 and bool(np.asarray(dfa.is_accepting)[state])
            assert is_accepted == (pattern.fullmatch(candidate) is not None), (
                to_python_regex(node),
                candidate,
            )


@settings(max_examples=100, deadline=None)
@given(_shared_trees())
def test_the_unshared_count_bounds_the_built_states(node: Node):
    budget = CompileBudget(max_states=10**6, timeout_s=60.0)
    num_built = build_nfa(node, budget).num_states - 1  # the final state is not the tree's
    assert num_built <= unshared_states(node, budget)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_LEAVES), min_size=1, max_size=4), st.integers(0, 3))
def test_the_unshared_count_is_exact_when_nothing_repeats(leaves: list[Node], num_opt: int):
    # distinct subtrees throughout (each leaf wrapped in its own literal): nothing to share
    parts = [seq(literal(str(k)), leaf) for k, leaf in enumerate(leaves)]
    node = seq(alt([seq(*parts), literal("z")]), repeat(literal("q"), 1, 1 + num_opt))
    budget = CompileBudget(max_states=10**6, timeout_s=60.0)
    assert build_nfa(node, budget).num_states - 1 == unshared_states(node, budget)


def test_an_expansion_over_the_budget_is_refused():
    # 64 copies of an item that holds two 256-character strings: the old builder made 2M
    # states in Python before the budget stopped it
    string = seq(literal('"'), repeat(char_range("a", "z"), 0, 256), literal('"'))
    item = seq(literal("{"), string, literal(","), string, literal("}"))
    node = repeat(item, 0, 64 * 64)
    budget = CompileBudget(max_states=10**6, timeout_s=60.0)
    assert unshared_states(item, budget) * 64 * 64 > budget.max_nfa_states
    with pytest.raises(CompileBudgetError, match="automaton states"):
        build_nfa(node, budget)
