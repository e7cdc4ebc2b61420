"""Tree verification: which root path of a `DraftTree` the target keeps, and the token it adds.

Inputs: the target's distribution (or argmax) at the root and at every node, rows ``0 .. N``
(row ``0``: after the root, i.e. the last committed token; row ``i + 1``: after node ``i``),
already processed like the sampler does (penalties, bias, grammar mask, temperature,
truncation), so ``softmax`` of a row is exactly the token distribution plain decoding uses.

- **greedy** (`verify_tree_greedy`): from the root, descend into the child whose token is the
  argmax of the current node's row; stop where no child matches and emit the argmax. Forced
  children (jump-forward) are always descended into. The emitted tokens are exactly those of
  one-token-at-a-time greedy decoding.
- **exact sampling** (`verify_tree_sampled`): recursive rejection sampling for point-mass
  drafts. At a node with target distribution ``p`` and draft children ``c_1 .. c_m`` (distinct
  tokens): ``p_0 = p``; child ``c_i`` is accepted with probability ``p_{i-1}(c_i)``; after a
  rejection ``p_i = normalize(p_{i-1}`` with ``c_i`` zeroed``)``; if all are rejected the
  token is drawn from ``p_m``. Then ``P(emit c_i) = prod_{j<i} (1 - p_{j-1}(c_j)) p_{i-1}(c_i)
  = p(c_i)`` and ``P(emit t)`` for any other ``t`` is ``p(t)``: lossless. A node without
  children emits a sample of its ``p`` (the bonus token).
- **typical acceptance** (`verify_tree_typical`, Medusa, LOSSY): a child ``c`` is accepted
  when ``p(c) > min(posterior_threshold, posterior_alpha * exp(-H(p)))`` with ``H`` the
  entropy of ``p``; the first accepted child (in order) is descended into; the final token is
  sampled from ``p`` at the last accepted node. The output does NOT follow the target's
  distribution; only offered when chosen explicitly (``acceptance="typical"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from formcast.decoding.speculative.draft_tree import DraftTree
from formcast.errors import EngineError

DEFAULT_POSTERIOR_THRESHOLD = 0.09  # Medusa's epsilon
DEFAULT_POSTERIOR_ALPHA = 0.3  # Medusa's delta (= sqrt(epsilon))


@dataclass(frozen=True)
class TreeVerdict:
    """Outcome of verifying one tree.

    Attributes
    ----------
    path : list[int]
        Accepted node indices, root's child first (forced nodes included).
    num_accepted : int
        Accepted draft nodes on the path (forced excluded).
    final_token_id : int
        The token the target adds after the path.
    final_row : int
        The logits row it came from (``0``: root, ``i + 1``: node ``i``).
    """

    path: list[int]
    num_accepted: int
    final_token_id: int

    @property
    def final_row(self) -> int:
        """Row of the last accepted node (``0`` when nothing was accepted)."""
        return self.path[-1] + 1 if self.path else 0


def _uniform(generator: torch.Generator | None) -> torch.Tensor:
    """One U[0, 1) float64 draw on the generator's own device (a CUDA generator cannot
    drive a CPU draw)."""
    device = generator.device if generator is not None else torch.device("cpu")
    return torch.rand((), generator=generator, dtype=torch.float64, device=device)


def _check_rows(tree: DraftTree, num_rows: int, name: str) -> None:
    if num_rows != len(tree) + 1:
        raise EngineError(f"{name}: {num_rows} target rows for a tree of {len(tree)} nodes")


def _children_lists(tree: DraftTree) -> list[list[int]]:
    """Children of the root (index 0) and of each node (index i + 1)."""
    children: list[list[int]] = [[] for _ in range(len(tree) + 1)]
    for i, parent in enumerate(tree.parents):
        children[parent + 1].append(i)
    return children


def _walk(tree: DraftTree, choose) -> TreeVerdict:
    """Descend from the root; ``choose(row, children) -> (child or None, token)``."""
    children = _children_lists(tree)
    path: list[int] = []
    num_accepted = 0
    node = -1
    while True:
        kids = children[node + 1]
        if kids and tree.is_forced[kids[0]]:
            node = kids[0]  # jump-forward text: plain decoding appends it without sampling
            path.append(node)
            continue
        child, token_id = choose(node + 1, kids)
        if child is None:
            return TreeVerdict(path, num_accepted, int(token_id))
        node = child
        path.append(node)
        num_accepted += 1


def verify_tree_greedy(tree: DraftTree, target_token_ids: Sequence[int]) -> TreeVerdict:
    """Greedy verification against the target's argmax at the root and every node.

    Parameters
    ----------
    tree : DraftTree
        ``N`` nodes.
    target_token_ids : Sequence[int]
        ``N + 1`` argmax tokens (rows as in the module docstring).
    """
    _check_rows(tree, len(target_token_ids), "verify_tree_greedy")
    argmax = [int(t) for t in target_token_ids]

    def choose(row: int, kids: list[int]):
        for child in kids:
            if tree.token_ids[child] == argmax[row]:
                return child, argmax[row]
        return None, argmax[row]

    return _walk(tree, choose)


def rejection_schedule(
    probs: torch.Tensor, candidates: Sequence[int]
) -> tuple[list[float], torch.Tensor | None]:
    """The exact branch probabilities of recursive rejection at one node.

    Returns
    -------
    tuple[list[float], torch.Tensor | None]
        ``a_i = p_{i-1}(c_i)``, the probability of accepting ``c_i`` once ``c_1 .. c_{i-1}``
        were rejected, and the float64 residual ``p_m`` sampled when all are rejected (None
        when some ``a_i = 1``, so all-rejected cannot happen). ``P(emit c_i) = a_i prod_{j<i}
        (1 - a_j)``, ``P(emit t) = p_m(t) prod_j (1 - a_j)`` otherwise; both equal ``p``.
    """
    p = probs.double().clone()
    total = float(p.sum())
    if not total > 0:
        raise EngineError("recursive_rejection: the target distribution has no mass")
    p /= total
    accept = []
    for token_id in candidates:
        mass = float(p[token_id])
        accept.append(mass)
        remaining = 1.0 - mass
        if remaining <= 1e-12:  # all mass on c_i: it is accepted surely
            accept[-1] = 1.0
            return accept, None
        if mass > 0.0:
            p[token_id] = 0.0
            p /= remaining
    return accept, p


def recursive_rejection(
    probs: torch.Tensor, candidates: Sequence[int], generator: torch.Generator | None = None
) -> tuple[int | None, int]:
    """One node of exact multi-candidate rejection sampling (point-mass drafts).

    Parameters
    ----------
    probs : torch.Tensor
        ``(V,)`` target distribution ``p``.
    candidates : Sequence[int]
        Distinct draft tokens ``c_1 .. c_m`` in order.
    generator : torch.Generator, optional
        Randomness (seeded requests).

    Returns
    -------
    tuple[int | None, int]
        (index into ``candidates`` of the accepted one or None, emitted token); the token is
        distributed exactly as ``p`` (see `rejection_schedule`).
    """
    accept, residual = rejection_schedule(probs, candidates)
    for i, a in enumerate(accept):
        if a >= 1.0:
            return i, int(candidates[i])
        if a > 0.0 and float(_uniform(generator)) < a:
            return i, int(candidates[i])
    return None, int(torch.multinomial(residual, 1, generator=generator))


def verify_tree_sampled(
    tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None = None
) -> TreeVerdict:
    """Exact (lossless) verification by recursive rejection sampling down the tree.

    Parameters
    ----------
    tree : DraftTree
        ``N`` nodes; siblings must carry distinct tokens.
    target_probs : torch.Tensor
        ``(N + 1, V)`` target distributions (rows as in the module docstring).
    generator : torch.Generator, optional
        Per-request generator.
    """
    _check_rows(tree, target_probs.shape[0], "verify_tree_sampled")

    def choose(row: int, kids: list[int]):
        tokens = [tree.token_ids[c] for c in kids]
        if len(set(tokens)) != len(tokens):
            raise EngineError(f"verify_tree_sampled: siblings repeat a token {tokens}")
        index, token_id = recursive_rejection(target_probs[row], tokens, generator)
        return (None if index is None else kids[index]), token_id

    return _walk(tree, choose)


def verify_tree_typical(
    tree: DraftTree,
    target_probs: torch.Tensor,
    generator: torch.Generator | None = None,
    posterior_threshold: float = DEFAULT_POSTERIOR_THRESHOLD,
    posterior_alpha: float = DEFAULT_POSTERIOR_ALPHA,
) -> TreeVerdict:
    """Medusa's typical acceptance (LOSSY: the output does not follow the target exactly).

    A child ``c`` of a node with distribution ``p`` is accepted when ``p(c) >
    min(posterior_threshold, posterior_alpha * exp(-H(p)))``; the first accepted child is
    descended into; the final token is sampled from ``p`` at the last accepted node.
    """
    _check_rows(tree, target_probs.shape[0], "verify_tree_typical")

    def choose(row: int, kids: list[int]):
        p = target_probs[row].double()
        p = p / p.sum()
        entropy = float(-(p * torch.log(p.clamp_min(1e-30))).sum())
        threshold = min(
            posterior_threshold, posterior_alpha * float(torch.exp(torch.tensor(-entropy)))
        )
        for child in kids:
            if float(p[tree.token_ids[child]]) > threshold:
                return child, tree.token_ids[child]
        return None, int(torch.multinomial(p, 1, generator=generator))

    return _walk(tree, choose)
