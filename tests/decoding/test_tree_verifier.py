"""Tree verification: greedy equals plain greedy; recursive rejection is exact (enumeration
and a chi-square test of whole trees); typical acceptance is a separate, lossy option."""

from __future__ import annotations

import itertools

import pytest
import torch

from formcast.decoding.speculative.draft_tree import TreeTopology, build_tree
from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.decoding.speculative.tree_verifier import (
    recursive_rejection,
    rejection_schedule,
    verify_tree_greedy,
    verify_tree_sampled,
    verify_tree_typical,
)
from formcast.errors import EngineConfigError, EngineError

V = 4


def _enumerated(probs: torch.Tensor, candidates: list[int]) -> torch.Tensor:
    """The exact distribution of the emitted token, from the rule's branch probabilities."""
    accept, residual = rejection_schedule(probs, candidates)
    out = torch.zeros(probs.shape[0], dtype=torch.float64)
    reach = 1.0  # probability that every earlier candidate was rejected
    for token_id, a in zip(candidates[: len(accept)], accept, strict=True):
        out[token_id] += reach * a
        reach *= 1 - a
    if residual is not None:
        out += reach * residual
    return out


@pytest.mark.parametrize("seed", range(6))
def test_recursive_rejection_exact_by_enumeration(seed):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(7, generator=generator) * 2, dim=0).double()
    probs[seed % 7] = 0.0  # a candidate of zero probability
    probs /= probs.sum()
    for m in range(0, 6):
        for candidates in itertools.permutations(range(7), m):
            if len(candidates) > 3 and hash(candidates) % 7:  # subsample the long ones
                continue
            got = _enumerated(probs, list(candidates))
            assert torch.allclose(got, probs, atol=1e-12), candidates
    point = torch.zeros(7, dtype=torch.float64)
    point[2] = 1.0
    assert torch.allclose(_enumerated(point, [5, 2, 1]), point)


def test_recursive_rejection_sampler_follows_schedule():
    probs = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(V)
    n = 20000
    for _ in range(n):
        _, token_id = recursive_rejection(probs, [1, 0], generator)
        counts[token_id] += 1
    expected = probs * n
    statistic = float(((counts - expected) ** 2 / expected).sum())
    assert statistic < 21.1  # chi-square, 3 df, alpha = 1e-4


def _tree():
    # root: children a=0, b=1, c=2; under a: 0, 3; under b: 2
    return build_tree(TreeTopology([[0], [1], [2], [0, 0], [0, 1], [1, 0]]), [[0, 1, 2], [0, 3, 2]])


def test_greedy_tree_emits_greedy_chain():
    tree = _tree()
    assert tree.token_ids == [0, 0, 3, 1, 0, 2]
    # argmax at root = 1 (node 3), at node 3 = 0 (node 4), at node 4 = 2 (bonus)
    argmax = [1, 9, 9, 9, 0, 2, 9]
    verdict = verify_tree_greedy(tree, argmax)
    assert verdict.path == [3, 4] and verdict.num_accepted == 2
    assert verdict.final_token_id == 2 and verdict.final_row == 5
    verdict = verify_tree_greedy(tree, [3] + [0] * 6)  # root argmax 3: no child matches
    assert verdict.path == [] and verdict.final_token_id == 3 and verdict.final_row == 0
    with pytest.raises(EngineError):
        verify_tree_greedy(tree, [0, 1])


def test_sampled_tree_output_follows_target():
    """Two tokens emitted by tree verification (completed from the target when only one was
    emitted) follow ``p(x1) p(x2 | x1)``; chi-square over 16 cells, N = 6,000, alpha 1e-4.
    Power: a verifier that accepts the first child whenever it has positive probability
    shifts the cells by far more than the critical value (checked below)."""
    generator = torch.Generator().manual_seed(1)
    cond = {(): torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)}
    for t in range(V):
        cond[(t,)] = torch.softmax(torch.randn(V, generator=generator), 0).double()
    tree = _tree()
    rows = [cond[()]] + [cond[(tree.token_ids[i],)] for i in range(len(tree))]
    # node rows: the distribution after node i given its path; depth-2 nodes get any row
    target = torch.stack(rows)
    n = 6000
    counts = torch.zeros(V, V)
    for _ in range(n):
        verdict = verify_tree_sampled(tree, target, generator)
        emitted = [tree.token_ids[i] for i in verdict.path] + [verdict.final_token_id]
        if len(emitted) == 1:
            emitted.append(int(torch.multinomial(cond[(emitted[0],)], 1, generator=generator)))
        counts[emitted[0], emitted[1]] += 1
    exact = torch.stack([cond[()][a] * cond[(a,)] for a in range(V)]).float()
    expected = exact * n
    statistic = float(((counts - expected) ** 2 / expected).sum())
    assert statistic < 44.3  # chi-square 15 df, alpha = 1e-4
    # the "always accept the first child" bug: x1 = 0 always
    wrong = torch.zeros(V, V)
    wrong[0] = cond[(0,)].float()
    noncentrality = n * float(((wrong - exact) ** 2 / exact).sum())
    assert noncentrality > 3 * 44.3


def test_typical_acceptance_is_lossy_and_explicit():
    tree = _tree()
    flat = torch.full((len(tree) + 1, V), 1.0 / V)
    # flat p: threshold min(0.09, 0.3 * exp(-ln 4)) = 0.075 < 0.25: first child accepted
    verdict = verify_tree_typical(tree, flat, torch.Generator().manual_seed(0))
    assert verdict.path[0] == 0
    for bad in (
        dict(method="medusa", posterior_threshold=0.1),
        dict(method="medusa", acceptance="typical", posterior_alpha=1.5),
        dict(method="medusa", acceptance="greedy"),
        dict(method="ngram", acceptance="typical"),
        dict(method="ngram", medusa_tree=[[0]]),
        dict(method="medusa", medusa_tree=[[1, 0]]),
        dict(method="medusa", medusa_heads=3),
    ):
        field = list(bad)[-1]
        with pytest.raises(EngineConfigError, match=field):
            SpeculativeConfig(**bad)
    config = SpeculativeConfig(method="medusa", acceptance="typical", posterior_threshold=0.2)
    assert config.acceptance == "typical"
    assert SpeculativeConfig(method="medusa").acceptance == "exact"
