"""The per-node summaries of syntax trees against walks of the tree.

Composite nodes compute ``has_lookahead``, ``has_reference``, ``has_anchor`` and
``largest_count`` once, from their children's; route choices (the structural route's regular
runs, the regex route's largest repetition) and ``strip_anchors`` read them instead of walking
the tree. Each is compared here with its definition written as a walk, over random trees.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.regex.syntax_tree import (
    Alternation,
    Anchor,
    CharSet,
    Concat,
    Lookahead,
    Node,
    Reference,
    Repeat,
    children,
    has_anchor,
    has_reference,
    is_guarded,
    largest_count,
    strip_anchors,
    subtrees,
)

_LEAVES = st.one_of(
    st.integers(0x61, 0x63).map(lambda cp: CharSet(((cp, cp),), -1)),
    st.sampled_from(["start", "end"]).map(lambda kind: Anchor(kind, 0)),
    st.integers(0, 3).map(Reference),
)


def _extend(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    counts = st.tuples(st.integers(0, 40), st.one_of(st.none(), st.integers(0, 40)))
    return st.one_of(
        st.lists(inner, max_size=4).map(lambda items: Concat(tuple(items))),
        st.lists(inner, min_size=1, max_size=3).map(lambda options: Alternation(tuple(options))),
        st.tuples(inner, counts).map(lambda pair: Repeat(pair[0], pair[1][0], pair[1][1], -1)),
        inner.map(lambda guard: Lookahead(guard, 0)),
    )


TREES = st.recursive(_LEAVES, _extend, max_leaves=12)


def _has_reference_walk(node: Node) -> bool:
    """A Reference reachable through concatenations, options and repetitions."""
    if isinstance(node, Reference):
        return True
    if isinstance(node, Concat | Alternation | Repeat):
        return any(_has_reference_walk(child) for child in children(node))
    return False


def _largest_count_walk(node: Node) -> int:
    bounds = [
        item.min_count if item.max_count is None else item.max_count
        for item in subtrees(node)
        if isinstance(item, Repeat)
    ]
    return max(bounds, default=0)


@settings(max_examples=400, deadline=None)
@given(TREES)
def test_summaries_equal_their_walks(tree):
    for node in subtrees(tree):
        assert has_reference(node) == _has_reference_walk(node)
        assert has_anchor(node) == any(isinstance(x, Anchor) for x in subtrees(node))
        assert largest_count(node) == _largest_count_walk(node)
        assert is_guarded(node) == (
            isinstance(node, Concat) and any(isinstance(x, Lookahead) for x in node.items)
        )


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_anchor_free_trees_are_stripped_as_they_are(tree):
    if not has_anchor(tree):
        assert strip_anchors(tree) is tree
