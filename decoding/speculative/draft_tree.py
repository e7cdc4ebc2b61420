"""Token trees for tree speculation (Medusa): a static topology, candidate trees, masks.

A *topology* is Medusa's list of "choices": each choice is a path of per-head top-k ranks
from the root, e.g. ``(0,)`` = head 0's best token, ``(0, 1)`` = head 1's second best below
it, ``(1, 0)`` = head 1's best below head 0's second best. Every proper prefix of a choice is
a choice too (a tree). Choices are kept sorted by ``(length, ranks)`` (parents first).

A *draft tree* (`DraftTree`) holds concrete tokens: ``N`` nodes (the root, the sequence's
last committed token, is implicit with index ``-1``), each with a token id, a parent index
(``-1`` = root), a depth (``1`` for the root's children) and an ``is_forced`` flag (a
grammar jump-forward token: kept without verification once its parent is accepted). Nodes
are in topological order: a parent precedes its children, so the ancestor mask is lower
triangular. Node ``i`` is stored in the KV cache at ``prefix_len + i`` and sits at sequence
position ``prefix_len - 1 + depth[i]`` (RoPE), where ``prefix_len`` = committed tokens.

`build_tree` expands a topology over head candidates ``(K, max_k)``: the token of a node at
depth ``d`` (counting forced nodes above it) with rank ``r`` is head ``head_offset + d - 1``'s
``r``-th candidate. An optional `TreeGuard` (the grammar matcher and stop checks) admits each
token along its path; a rejected token is pruned with its subtree, and tokens the grammar
forces after an admitted token are inserted as forced nodes (free drafts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from formcast.errors import EngineConfigError

Choice = tuple[int, ...]
# CPU default (4 nodes, depth 2; a span of 5 rows with the root): on this machine 2-4 rows cost
# ~1.1-1.2x one row but 8 rows ~2.3x, and with the shipped heads a 6-node tree accepted no more
# per step than head 0's top-3 alone (benchmarks/RESULTS.md, issue 11): head 0's top-3 plus
# head 1's best below head 0's best.
DEFAULT_TREE_CHOICES: tuple[Choice, ...] = ((0,), (1,), (2,), (0, 0))


def normalize_choices(choices: Sequence[Sequence[int]], where: str = "medusa_tree") -> tuple:
    """Validate a topology and sort it parents-first.

    Raises
    ------
    EngineConfigError
        If a choice is empty, holds a negative / non-int rank, repeats, or lacks its parent.
    """
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence) or not choices:
        raise EngineConfigError(f"{where}={choices!r} must be a non-empty list of rank paths")
    result: set[Choice] = set()
    for choice in choices:
        if isinstance(choice, (str, bytes)) or not isinstance(choice, Sequence) or not choice:
            raise EngineConfigError(f"{where}: choice {choice!r} must be a non-empty rank list")
        for rank in choice:
            if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
                raise EngineConfigError(f"{where}: choice {choice!r} has a bad rank {rank!r}")
        path = tuple(int(r) for r in choice)
        if path in result:
            raise EngineConfigError(f"{where}: choice {list(path)} appears twice")
        result.add(path)
    for path in result:
        if len(path) > 1 and path[:-1] not in result:
            raise EngineConfigError(f"{where}: choice {list(path)} lacks its parent {path[:-1]}")
    return tuple(sorted(result, key=lambda p: (len(p), p)))


@dataclass(frozen=True)
class TreeTopology:
    """A static tree of rank paths (see module docstring).

    Parameters
    ----------
    choices : Sequence[Sequence[int]]
        Rank paths; validated and sorted parents-first.
    """

    choices: tuple[Choice, ...]

    def __init__(self, choices: Sequence[Sequence[int]] = DEFAULT_TREE_CHOICES) -> None:
        object.__setattr__(self, "choices", normalize_choices(choices))

    @property
    def num_nodes(self) -> int:
        """Nodes of the full tree (root excluded)."""
        return len(self.choices)

    @property
    def depth(self) -> int:
        """Longest path (heads needed)."""
        return max(len(c) for c in self.choices)

    @property
    def max_rank(self) -> int:
        """Largest rank used + 1 (the top-k every head must provide)."""
        return max(max(c) for c in self.choices) + 1

    def child_ranks(self, path: Choice) -> list[int]:
        """Ranks of ``path``'s children, in order."""
        n = len(path)
        return [c[-1] for c in self.choices if len(c) == n + 1 and c[:n] == path]

    def truncated(self, max_depth: int) -> TreeTopology:
        """The subtree of paths no longer than ``max_depth`` (>= 1)."""
        return TreeTopology([c for c in self.choices if len(c) <= max(1, max_depth)])


@dataclass
class DraftTree:
    """Concrete candidate tokens in topological order (see module docstring).

    Attributes
    ----------
    token_ids, parents, depths : list[int]
        Per node: token, parent index (``-1`` = root), depth (root's children: 1).
    is_forced : list[bool]
        Per node: a jump-forward token (kept without verification when its parent is).
    mask_rows : list[int]
        Per node: the caller's bitmask row of the distribution after this node (engine use).
    """

    token_ids: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    is_forced: list[bool] = field(default_factory=list)
    mask_rows: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.token_ids)

    def add(self, token_id: int, parent: int, is_forced: bool = False, mask_row: int = -1) -> int:
        """Append a node below ``parent`` (``-1``: the root); return its index."""
        if not -1 <= parent < len(self.token_ids):
            raise EngineConfigError(f"DraftTree.add: parent {parent} is not a node yet")
        self.token_ids.append(int(token_id))
        self.parents.append(parent)
        self.depths.append(1 if parent < 0 else self.depths[parent] + 1)
        self.is_forced.append(bool(is_forced))
        self.mask_rows.append(mask_row)
        return len(self.token_ids) - 1

    def truncate(self, num_nodes: int) -> None:
        """Keep the first ``num_nodes`` nodes (only valid when none later is a parent of them)."""
        for name in ("token_ids", "parents", "depths", "is_forced", "mask_rows"):
            del getattr(self, name)[num_nodes:]

    def children(self, node: int) -> list[int]:
        """Children of ``node`` (``-1``: the root), in order."""
        return [i for i, p in enumerate(self.parents) if p == node]

    @property
    def num_drafts(self) -> int:
        """Nodes that need verification (forced nodes excluded)."""
        return len(self.is_forced) - sum(self.is_forced)

    @property
    def depth(self) -> int:
        """Longest root path (0 for an empty tree)."""
        return max(self.depths, default=0)

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node`` (empty for the root)."""
        path = []
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    def leaves(self) -> list[int]:
        """Nodes without children."""
        parents = set(self.parents)
        return [i for i in range(len(self)) if i not in parents]

    def leaf_paths(self) -> list[list[int]]:
        """Every root-to-leaf path (node indices)."""
        return [self.path_to(leaf) for leaf in self.leaves()]

    def ancestor_mask(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """``(N, N)`` bool: ``[i, j]`` iff node ``j`` is ``i`` or an ancestor of ``i``."""
        n = len(self)
        mask = torch.zeros((n, n), dtype=torch.bool)
        for i, parent in enumerate(self.parents):
            mask[i, i] = True
            if parent >= 0:
                mask[i] |= mask[parent]
        return mask.to(device)


class TreeGuard(Protocol):
    """Admits tokens along a tree path (grammar + stop rules); a stack of entered tokens."""

    def enter(self, token_id: int, is_forced: bool) -> int | None:
        """Accept a token after the current path; its mask row, or None if rejected."""

    def leave(self) -> None:
        """Undo the last entered token."""

    def forced_after(self) -> list[int]:
        """Tokens the grammar forces now (jump-forward); empty when none."""

    def can_extend(self) -> bool:
        """True when tokens may follow the current path (no stop condition met)."""


def build_tree(
    topology: TreeTopology,
    candidates: Sequence[Sequence[int]],
    head_offset: int = 0,
    guard: TreeGuard | None = None,
    max_nodes: int | None = None,
) -> DraftTree:
    """Expand ``topology`` over head candidates into a `DraftTree` (depth first).

    Parameters
    ----------
    topology : TreeTopology
        Rank paths.
    candidates : Sequence[Sequence[int]]
        ``(K, max_k)`` token ids of each head, best first.
    head_offset : int
        Head of the root's children (``u - 1`` when the root is the ``u``-th token after the
        position whose hidden state fed the heads).
    guard : TreeGuard, optional
        Grammar and stop checks; a rejected token prunes its subtree.
    max_nodes : int, optional
        Most nodes (forced included). A draft whose forced run would not fit is withdrawn.
    """
    tree = DraftTree()
    limit = topology.num_nodes * 8 if max_nodes is None else max_nodes
    num_heads = len(candidates)

    def expand(path: Choice, parent: int, depth: int) -> None:
        head = head_offset + depth  # the head predicting the children of a depth-`depth` node
        if head >= num_heads:
            return
        siblings: set[int] = set()
        for rank in topology.child_ranks(path):
            if len(tree) >= limit:
                return
            token_id = int(candidates[head][rank])
            if token_id in siblings:
                continue
            row = -1 if guard is None else guard.enter(token_id, False)
            if row is None:
                continue  # the grammar rejects it: pruned with its subtree
            siblings.add(token_id)
            start = len(tree)
            last = tree.add(token_id, parent, False, row)
            num_entered = 1
            is_open = guard is None or guard.can_extend()
            fits = True
            while is_open and guard is not None:
                forced = guard.forced_after()
                if not forced:
                    break
                for forced_id in forced:
                    if len(tree) >= limit:
                        fits = False
                        break
                    forced_row = guard.enter(forced_id, True)
                    if forced_row is None:
                        raise EngineConfigError(
                            f"the grammar rejected its own forced token {forced_id}"
                        )
                    num_entered += 1
                    last = tree.add(forced_id, last, True, forced_row)
                    if not guard.can_extend():
                        is_open = False
                        break
                if not fits:
                    break
            if not fits:  # plain decoding would append the whole forced run: withdraw
                tree.truncate(start)
                siblings.discard(token_id)
            elif is_open:
                expand(path + (rank,), last, tree.depths[last])
            if guard is not None:
                for _ in range(num_entered):
                    guard.leave()

    expand((), -1, 0)
    return tree
