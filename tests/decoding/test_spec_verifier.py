"""Speculative decoding's decoding-level pieces: prompt lookup, adaptive k, the verifier.

The verifier is checked on a toy Markov target (no model): full decoding loops with
speculation (drafts from a point mass or from a draft distribution, forced jump-forward
tokens after a chosen token) must produce sequences whose distribution is the target's
exactly. Exact enumeration computes the target's sequence probabilities; a chi-square test
compares them with the speculative loop's counts.
"""

from __future__ import annotations

import functools
import itertools
import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.decoding.speculative.acceptance import AcceptanceTracker, best_num_drafts
from formcast.decoding.speculative.ngram_proposer import NgramProposer
from formcast.decoding.speculative.verifier import (
    Proposal,
    kept_length,
    verify_greedy,
    verify_sampled,
)

# -- prompt lookup ----------------------------------------------------------------------------


def test_ngram_copies_what_followed_the_most_recent_match():
    proposer = NgramProposer(1, 3)
    tokens = [5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3, 5, 6, 7]
    # the longest suffix with an earlier match is [5, 6, 7]; most recent earlier one at 6
    assert proposer.propose(tokens, 3) == [2, 3, 5]
    assert proposer.propose(tokens, 1) == [2]
    assert proposer.propose([1, 2, 3], 4) == []
    assert proposer.propose([4, 4], 3) == [4]  # the match may overlap the suffix
    assert NgramProposer(2, 2).propose([1, 2, 9, 2], 2) == []  # needs a 2-gram match


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=40),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 6),
)
def test_ngram_property(tokens, min_n, extra, k):
    max_n = min_n + extra - 1
    drafts = NgramProposer(min_n, max_n).propose(tokens, k)
    assert len(drafts) <= k
    if not drafts:
        # no n in range has an earlier occurrence of the suffix followed by a token
        for n in range(min_n, max_n + 1):
            if n >= len(tokens):
                continue
            suffix = tokens[-n:]
            assert all(tokens[s : s + n] != suffix for s in range(len(tokens) - n))
        return
    # the drafts continue an earlier occurrence of a suffix of length n in [min_n, max_n]
    found = False
    for n in range(max_n, min_n - 1, -1):
        suffix = tokens[-n:] if n < len(tokens) else None
        starts = [s for s in range(len(tokens) - n) if suffix and tokens[s : s + n] == suffix]
        if starts:
            begin = starts[-1] + n
            assert drafts == tokens[begin : begin + k]
            found = True
            break
    assert found


def test_adaptive_k_grows_with_acceptance():
    assert best_num_drafts(0.05, 8, 0.1) == 0  # not worth speculating
    assert best_num_drafts(0.3, 8, 0.1) >= 1
    assert best_num_drafts(0.95, 8, 0.1) == 8
    ks = [best_num_drafts(a, 8, 0.1) for a in (0.2, 0.4, 0.6, 0.8, 0.9)]
    assert ks == sorted(ks)
    # a fixed span overhead (CPU) demands a higher acceptance before speculating
    assert best_num_drafts(0.5, 8, 0.15, span_overhead=1.0) == 0
    assert best_num_drafts(0.85, 8, 0.15, span_overhead=1.0) >= 4
    tracker = AcceptanceTracker(6, adaptive=True, draft_cost=0.1, probe_interval=4)
    assert tracker.num_drafts(7) == 6  # no history: probe with the maximum
    for _ in range(10):
        tracker.update(7, 6, 6)
    assert tracker.num_drafts(7) == 6
    for _ in range(10):
        tracker.update(7, 6, 0)
    assert [tracker.num_drafts(7) for _ in range(4)] == [0, 0, 0, 2]  # paused, then a probe
    tracker.retain(set())
    assert tracker.acceptance(7) is None
    assert AcceptanceTracker(3, adaptive=False).num_drafts(1) == 3


# -- greedy verification ----------------------------------------------------------------------


def _proposal(tokens, forced=()):
    proposal = Proposal()
    for i, t in enumerate(tokens):
        proposal.append(t, i in forced)
    return proposal


def test_greedy_verdicts_with_forced_tokens():
    # drafts 10, 11 (forced 50, 51 after 11), 12
    proposal = _proposal([10, 11, 50, 51, 12], forced={2, 3})
    assert proposal.sample_rows == [0, 1, 4, 5]
    verdict = verify_greedy(proposal, [10, 11, 12, 99])
    assert (verdict.num_accepted, verdict.num_kept, verdict.final_token_id) == (3, 5, 99)
    verdict = verify_greedy(proposal, [10, 11, 7, 99])  # third draft rejected after forced
    assert (verdict.num_accepted, verdict.num_kept, verdict.final_token_id) == (2, 4, 7)
    verdict = verify_greedy(proposal, [10, 3, 7, 99])  # forced tokens go with their draft
    assert (verdict.num_accepted, verdict.num_kept, verdict.final_token_id) == (1, 1, 3)
    verdict = verify_greedy(proposal, [4, 3, 7, 99])
    assert (verdict.num_accepted, verdict.num_kept, verdict.final_token_id) == (0, 0, 4)
    assert kept_length(proposal, 2) == 4
    proposal.truncate(2)
    assert proposal.token_ids == [10, 11] and proposal.sample_rows == [0, 1, 2]


# -- sampling verification: a toy decoding loop against exact enumeration ---------------------

VOCAB = 4
LENGTH = 3  # tokens per generated sequence
FORCING_TOKEN, FORCED_TOKEN = 3, 0  # after token 3, "the grammar" forces token 0


@functools.cache
def _toy_target(prefix: tuple[int, ...]) -> torch.Tensor:
    """p(. | prefix): a fixed pseudo-random distribution per (last token, length)."""
    last = prefix[-1] if prefix else VOCAB
    g = torch.Generator().manual_seed(1000 + 17 * last + len(prefix))
    logits = 1.5 * torch.randn(VOCAB, generator=g, dtype=torch.float64)
    return torch.softmax(logits, dim=0)


@functools.cache
def _toy_draft(prefix: tuple[int, ...]) -> torch.Tensor:
    """q(. | prefix): a different distribution (some tokens impossible)."""
    last = prefix[-1] if prefix else VOCAB
    g = torch.Generator().manual_seed(5000 + 7 * last)
    probs = torch.softmax(torch.randn(VOCAB, generator=g, dtype=torch.float64), dim=0)
    probs[(last + 1) % VOCAB] = 0.0
    return probs / probs.sum()


@functools.cache
def _toy_draft_list(prefix: tuple[int, ...]) -> list[float]:
    return _toy_draft(prefix).tolist()


def _exact_distribution() -> dict[tuple[int, ...], float]:
    """Plain decoding: sample from p, append the forced token after FORCING_TOKEN."""
    out: dict[tuple[int, ...], float] = {}

    def walk(prefix, prob):
        if len(prefix) >= LENGTH:
            out[prefix[:LENGTH]] = out.get(prefix[:LENGTH], 0.0) + prob
            return
        p = _toy_target(prefix)
        for token in range(VOCAB):
            nxt = prefix + (token,)
            if token == FORCING_TOKEN:
                nxt = nxt + (FORCED_TOKEN,)
            walk(nxt, prob * float(p[token]))

    walk((), 1.0)
    return out


def _speculative_samples(num_samples, use_draft_probs, seed):
    """Run ``num_samples`` toy sequences with speculation, batched across sequences."""
    rng = random.Random(seed)
    seqs = [() for _ in range(num_samples)]
    while True:
        active = [i for i, s in enumerate(seqs) if len(s) < LENGTH]
        if not active:
            return [s[:LENGTH] for s in seqs]
        proposals, targets = [], []
        for i in active:
            prefix = seqs[i]
            proposal = Proposal()
            context = prefix
            num_drafts = 1 + (i + len(prefix)) % 3  # 1..3 drafts, varying per row
            for _ in range(num_drafts):
                q = _toy_draft(context)
                if use_draft_probs:
                    token = rng.choices(range(VOCAB), weights=_toy_draft_list(context))[0]
                    proposal.append(token, False, q)
                else:  # point mass: the draft's most likely token
                    token = int(q.argmax())
                    proposal.append(token, False)
                context = context + (token,)
                if token == FORCING_TOKEN:
                    proposal.append(FORCED_TOKEN, True)
                    context = context + (FORCED_TOKEN,)
            rows = [prefix + tuple(proposal.token_ids[:r]) for r in proposal.sample_rows]
            proposals.append(proposal)
            targets.append(torch.stack([_toy_target(r) for r in rows]))
        verdicts = verify_sampled(proposals, targets, [None] * len(proposals))
        for i, proposal, verdict in zip(active, proposals, verdicts, strict=True):
            emitted = tuple(proposal.token_ids[: verdict.num_kept]) + (verdict.final_token_id,)
            if verdict.final_token_id == FORCING_TOKEN:
                emitted = emitted + (FORCED_TOKEN,)  # plain jump-forward after a sampled token
            seqs[i] = seqs[i] + emitted


def _chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    statistic = ((counts - expected) ** 2 / expected).sum()
    df = torch.tensor((len(probs) - 1) / 2.0, dtype=torch.float64)
    return float(torch.special.gammaincc(df, statistic / 2.0))


MIN_EXPECTED_COUNT = 5.0  # chi-square's approximation needs >= 5 expected per cell


def _pooled_cells(exact, num_samples):
    """Cell index per sequence: sequences expected fewer than 5 times share one rare cell
    (a single hit in a cell expected 0.003 times would otherwise read as p ~ 1e-70)."""
    common = sorted(c for c, p in exact.items() if p * num_samples >= MIN_EXPECTED_COUNT)
    index = {c: i for i, c in enumerate(common)}
    rare = len(common)
    return {c: index.get(c, rare) for c in exact}, rare + 1


def _pooled_probs(distribution, exact, num_samples):
    index, num_cells = _pooled_cells(exact, num_samples)
    probs = torch.zeros(num_cells, dtype=torch.float64)
    for c, p in distribution.items():
        probs[index[c]] += p
    return probs


def _check_distribution(samples, exact):
    index, num_cells = _pooled_cells(exact, len(samples))
    probs = _pooled_probs(exact, exact, len(samples))
    counts = torch.zeros(num_cells, dtype=torch.float64)
    for s in samples:
        assert s in index, f"impossible sequence {s}"
        counts[index[s]] += 1
    return _chi_square_p_value(counts, probs), counts, probs


def test_exact_enumeration_is_normalised():
    exact = _exact_distribution()
    assert abs(sum(exact.values()) - 1.0) < 1e-12
    # every generated sequence respects the forcing rule
    for seq in exact:
        for a, b in itertools.pairwise(seq):
            if a == FORCING_TOKEN:
                assert b == FORCED_TOKEN


def test_speculative_loop_matches_target_distribution():
    """N = 8,000 sequences, 40-ish cells, alpha = 1e-4 per test.

    Power: a verifier that keeps every draft (no rejection) produces a distribution whose
    chi-square noncentrality at this N is computed below and asserted to exceed 10x the
    critical value, so such a bug is detected with probability ~1.
    """
    exact = _exact_distribution()
    num_samples = 8_000
    for use_draft_probs, seed in ((False, 0), (True, 1)):
        samples = _speculative_samples(num_samples, use_draft_probs, seed)
        p_value, counts, probs = _check_distribution(samples, exact)
        assert p_value > 1e-4, (use_draft_probs, p_value)
    # power against the "always accept" bug, computed by exact enumeration of that process
    wrong: dict[tuple[int, ...], float] = {}

    def walk(prefix, prob):
        if len(prefix) >= LENGTH:
            wrong[prefix[:LENGTH]] = wrong.get(prefix[:LENGTH], 0.0) + prob
            return
        token = int(_toy_draft(prefix).argmax())  # always accepted point-mass draft
        nxt = prefix + (token,) + ((FORCED_TOKEN,) if token == FORCING_TOKEN else ())
        walk(nxt, prob)

    walk((), 1.0)
    probs = _pooled_probs(exact, exact, num_samples)
    wrong_probs = _pooled_probs(wrong, exact, num_samples)
    noncentrality = num_samples * float(((wrong_probs - probs) ** 2 / probs).sum())
    critical = len(probs) - 1 + 4.0 * (2 * (len(probs) - 1)) ** 0.5  # > 1e-4 quantile
    assert noncentrality > 10 * critical


# -- configuration ----------------------------------------------------------------------------


def test_config_errors_name_the_field():
    import pytest

    from formcast.decoding.speculative.spec_config import SpeculativeConfig
    from formcast.errors import EngineConfigError

    for kwargs, word in [
        (dict(method="bogus"), "method"),
        (dict(num_draft_tokens=0), "num_draft_tokens"),
        (dict(min_ngram=3, max_ngram=2), "min_ngram"),
        (dict(span_overhead=-1.0), "span_overhead"),
        (dict(probe_interval=0), "probe_interval"),
        (dict(method="draft_model"), "draft_model"),
        (dict(method="custom"), "proposer"),
        (dict(draft_num_layers=0), "draft_num_layers"),
    ]:
        with pytest.raises(EngineConfigError, match=word):
            SpeculativeConfig(**kwargs)
    with pytest.raises(EngineConfigError, match="unknown"):
        SpeculativeConfig.coerce({"k": 3})
    assert SpeculativeConfig.coerce({"num_draft_tokens": 3}).num_draft_tokens == 3
    assert SpeculativeConfig.coerce(None) is None
