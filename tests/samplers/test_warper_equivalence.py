"""Sampler.process_logits equals transformers' warper chain, row by row in mixed batches.

Oracle, per row: RepetitionPenaltyLogitsProcessor -> TemperatureLogitsWarper -> TopK -> TopP
-> MinP -> Typical (transformers' own order), each with that row's parameters, on a batch of
one. Equal means: the same tokens removed (-inf) and the same surviving values. The one
documented difference: on a tie at the top-p cut, transformers keeps an arbitrary (sort-order
dependent) part of the tie, formcast keeps all of it; the tests check exactly that.
"""

import pytest
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from formcast.samplers import Sampler, SamplingBatch, SamplingParams

VOCAB = 2000


def hf_chain(scores: torch.Tensor, params: SamplingParams, input_ids: list[int]) -> torch.Tensor:
    """transformers' processors for one row (1, V) with the row's parameters."""
    ids = torch.tensor([input_ids], dtype=torch.long)
    scores = scores.clone()
    if params.repetition_penalty != 1:
        scores = RepetitionPenaltyLogitsProcessor(float(params.repetition_penalty))(ids, scores)
    if params.is_greedy:
        return scores
    scores = TemperatureLogitsWarper(float(params.temperature))(ids, scores)
    if params.top_k > 0:
        scores = TopKLogitsWarper(params.top_k)(ids, scores)
    if params.top_p < 1:
        scores = TopPLogitsWarper(params.top_p)(ids, scores)
    if params.min_p > 0:
        scores = MinPLogitsWarper(params.min_p)(ids, scores)
    if params.typical_p < 1:
        scores = TypicalLogitsWarper(params.typical_p)(ids, scores)
    return scores


def random_params(generator: torch.Generator, num_rows: int) -> list[SamplingParams]:
    """A mixed batch: greedy rows, several temperatures, every filter alone and combined."""

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=generator))]

    rows = []
    for _ in range(num_rows):
        rows.append(
            SamplingParams(
                temperature=pick([0.0, 0.3, 0.7, 1.0, 1.5]),
                top_k=pick([0, 0, 1, 5, 50, 500]),
                top_p=pick([1.0, 1.0, 0.3, 0.9, 0.99]),
                min_p=pick([0.0, 0.0, 0.05, 0.3]),
                typical_p=pick([1.0, 1.0, 1.0, 0.5, 0.9]),
                repetition_penalty=pick([1.0, 1.0, 1.3, 0.8]),
            )
        )
    return rows


def process(logits, params, histories):
    batch = SamplingBatch.build(params, histories, [[] for _ in params], logits.shape[1], [])
    return Sampler(num_candidates=64).process_logits(logits, batch)


def assert_rows_equal(ours: torch.Tensor, reference: torch.Tensor, context: str) -> None:
    ours_kept = torch.isfinite(ours)
    reference_kept = torch.isfinite(reference)
    assert torch.equal(ours_kept, reference_kept), (
        f"{context}: kept sets differ at {(ours_kept != reference_kept).nonzero().tolist()[:8]}"
    )
    torch.testing.assert_close(ours[ours_kept], reference[reference_kept], rtol=1e-6, atol=0)


def test_mixed_batch_random_logits_equal_transformers_chain():
    generator = torch.Generator().manual_seed(0)
    num_rows = 48
    params = random_params(generator, num_rows)
    logits = torch.randn(num_rows, VOCAB, generator=generator) * 3
    histories = [torch.randint(VOCAB, (20,), generator=generator).tolist() for _ in params]
    ours = process(logits, params, histories)
    for row, row_params in enumerate(params):
        reference = hf_chain(logits[row : row + 1], row_params, histories[row])
        assert_rows_equal(ours[row : row + 1], reference, f"row {row} {row_params}")


def adversarial_logits(kind: str, generator: torch.Generator, num_rows: int) -> torch.Tensor:
    if kind == "ties":  # few distinct values: ties everywhere, including at every cut
        return torch.randint(-4, 4, (num_rows, VOCAB), generator=generator).float()
    if kind == "neg_inf":  # most tokens banned, some rows with a single finite token
        logits = torch.randn(num_rows, VOCAB, generator=generator)
        banned = torch.rand(num_rows, VOCAB, generator=generator) < 0.97
        banned[:4, 1:] = True
        banned[:4, 0] = False
        return logits.masked_fill(banned, float("-inf"))
    if kind == "huge":  # huge magnitudes: softmax saturates, differences of 1e30
        logits = torch.randn(num_rows, VOCAB, generator=generator) * 1e30
        # near float32's limits, but finite after every temperature used below (>= 0.6)
        logits[:, :3] = torch.tensor([2e38, -3e38, 1e4])
        return logits
    raise AssertionError(kind)


SINGLE_WARPERS = [
    ("top_k", [1, 2, 7, 100, 1999]),
    ("top_p", [0.05, 0.3, 0.5, 0.9, 0.999]),
    ("min_p", [0.01, 0.1, 0.5, 1.0]),
    ("typical_p", [0.2, 0.5, 0.95]),
    ("repetition_penalty", [0.5, 1.2, 3.0]),
    ("temperature", [0.7, 2.0, 100.0]),
]


@pytest.mark.parametrize("kind", ["ties", "neg_inf", "huge"])
def test_adversarial_logits_single_warper_per_row(kind):
    generator = torch.Generator().manual_seed(1)
    params = []
    for field, values in SINGLE_WARPERS:
        for value in values:
            for temperature in (0.6, 1.0):
                settings = {"temperature": temperature, field: value}
                params.append(SamplingParams(**settings))
    logits = adversarial_logits(kind, generator, len(params))
    histories = [torch.randint(VOCAB, (50,), generator=generator).tolist() for _ in params]
    ours = process(logits, params, histories)
    for row, row_params in enumerate(params):
        reference = hf_chain(logits[row : row + 1], row_params, histories[row])
        context = f"{kind} row {row} {row_params}"
        if row_params.top_p < 1 and kind == "ties":
            assert_top_p_tie_superset(ours[row], reference[0], logits[row], context)
        else:
            assert_rows_equal(ours[row : row + 1], reference, context)


def assert_top_p_tie_superset(ours, reference, logits, context):
    """formcast keeps the whole tie at the top-p cut; transformers keeps part of it."""
    ours_kept = torch.isfinite(ours)
    reference_kept = torch.isfinite(reference)
    assert bool((ours_kept | ~reference_kept).all()), f"{context}: formcast dropped a token"
    cut_value = logits[reference_kept].min()
    extra = ours_kept & ~reference_kept
    assert bool((logits[extra] == cut_value).all()), f"{context}: extra token is not in the tie"
    # and formcast's set is closed under ties: nothing tied with a kept token is dropped
    assert not bool((~ours_kept & (logits == cut_value)).any()), context


def test_greedy_rows_get_penalties_and_mask_only():
    generator = torch.Generator().manual_seed(2)
    params = [SamplingParams(temperature=0, repetition_penalty=1.5, top_k=3, top_p=0.1)] * 4
    logits = torch.randn(4, VOCAB, generator=generator)
    histories = [torch.randint(VOCAB, (30,), generator=generator).tolist() for _ in params]
    ours = process(logits, params, histories)
    for row in range(4):
        reference = hf_chain(logits[row : row + 1], params[row], histories[row])
        assert_rows_equal(ours[row : row + 1], reference, f"greedy row {row}")
