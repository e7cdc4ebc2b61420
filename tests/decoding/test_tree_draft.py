"""Token trees: topology validation, expansion over head candidates, masks, grammar guard."""

from __future__ import annotations

import pytest
import torch

from formcast.decoding.speculative.draft_tree import (
    DEFAULT_TREE_CHOICES,
    DraftTree,
    TreeTopology,
    build_tree,
    normalize_choices,
)
from formcast.errors import EngineConfigError

CHOICES = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0], [2]]
CANDIDATES = [[10, 11, 12], [20, 21, 22], [30, 31, 32]]  # (K=3 heads, top-3)


def test_topology_sorted_parents_first_and_validated():
    topology = TreeTopology(CHOICES)
    assert topology.choices[:3] == ((0,), (1,), (2,))
    assert topology.num_nodes == 7 and topology.depth == 3 and topology.max_rank == 3
    assert topology.child_ranks((0,)) == [0, 1]
    assert topology.truncated(1).choices == ((0,), (1,), (2,))
    assert TreeTopology().num_nodes == len(DEFAULT_TREE_CHOICES)
    for bad in ([], [[0, 1]], [[0], [0]], [[-1]], [[0], []], "01", [[0.5]]):
        with pytest.raises(EngineConfigError, match="medusa_tree"):
            normalize_choices(bad)


def test_build_tree_tokens_parents_depths_and_ancestor_mask():
    tree = build_tree(TreeTopology(CHOICES), CANDIDATES)
    # depth first: (0,) (0,0) (0,0,0) (0,1) (1,) (1,0) (2,)
    assert tree.token_ids == [10, 20, 30, 21, 11, 20, 12]
    assert tree.parents == [-1, 0, 1, 0, -1, 4, -1]
    assert tree.depths == [1, 2, 3, 2, 1, 2, 1]
    assert tree.num_drafts == 7 and tree.depth == 3
    mask = tree.ancestor_mask()
    for i in range(len(tree)):
        expected = set(tree.path_to(i))
        assert {j for j in range(len(tree)) if mask[i, j]} == expected
    assert torch.equal(mask, mask.tril())  # parents precede children
    assert sorted(map(tuple, tree.leaf_paths())) == [(0, 1, 2), (0, 3), (4, 5), (6,)]


def test_head_offset_skips_heads_and_limits_depth():
    tree = build_tree(TreeTopology(CHOICES), CANDIDATES, head_offset=1)
    # root's children come from head 1, grandchildren from head 2, no head 3
    assert tree.token_ids == [20, 30, 31, 21, 30, 22]
    assert tree.depth == 2
    assert build_tree(TreeTopology(CHOICES), CANDIDATES, max_nodes=3).token_ids == [10, 20, 30]


def test_duplicate_sibling_candidates_are_merged():
    tree = build_tree(TreeTopology([[0], [1], [0, 0]]), [[5, 5], [7, 8]])
    assert tree.token_ids == [5, 7]


class ToyGuard:
    """Rejects odd tokens, forces token 99 after token 20, stops after token 30."""

    def __init__(self):
        self.path = []

    def enter(self, token_id, is_forced):
        if token_id % 2 and not is_forced:
            return None
        self.path.append(token_id)
        return len(self.path)

    def leave(self):
        self.path.pop()

    def forced_after(self):
        return [99] if self.path[-1] == 20 else []

    def can_extend(self):
        return self.path[-1] != 30


def test_guard_prunes_forces_and_stops():
    guard = ToyGuard()
    tree = build_tree(TreeTopology(CHOICES), CANDIDATES, guard=guard)
    # 11 rejected (with its subtree); 20 is followed by forced 99, whose children come from
    # head 2 (depth counts the forced node); 21 rejected; 30 stops its path
    assert tree.token_ids == [10, 20, 99, 12]
    assert tree.is_forced == [False, False, True, False]
    assert tree.parents == [-1, 0, 1, -1]
    assert guard.path == []  # every entered token was left again
    # a forced run that does not fit withdraws the draft that led to it
    small = build_tree(TreeTopology(CHOICES), CANDIDATES, guard=ToyGuard(), max_nodes=2)
    assert small.token_ids == [10, 12]


def test_draft_tree_rejects_unknown_parent():
    tree = DraftTree()
    with pytest.raises(EngineConfigError):
        tree.add(3, 0)
