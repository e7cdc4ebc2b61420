"""Per-row logprobs modes: ``"raw"`` (the model's distribution) and ``"processed"`` (the one
the token was drawn from), mixed in one batch.

Oracle: log-probabilities computed here by hand from the logits (``log_softmax`` of the raw
logits; or the logits with the bitmask's disallowed tokens, then temperature, then top-k
applied, for processed rows), not through the sampler's own ``process_logits``.
"""

import math

import pytest
import torch

from formcast.errors import SamplingParamsError
from formcast.samplers import Sampler, SamplingBatch, SamplingParams

VOCAB = 16
ALLOWED = [1, 4, 5, 9, 12]  # the grammar's tokens in every row


def _bitmask(num_rows: int) -> torch.Tensor:
    word = sum(1 << token for token in ALLOWED)
    return torch.full((num_rows, 1), word, dtype=torch.int32)


def _processed_reference(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    row = torch.full_like(logits, -math.inf)
    row[ALLOWED] = logits[ALLOWED]
    if not params.is_greedy:
        row = row / params.temperature
        if params.top_k > 0:
            kth = row.topk(params.top_k).values[-1]
            row = row.masked_fill(row < kth, -math.inf)
    return torch.log_softmax(row, dim=-1)


def test_mixed_batch_reports_each_row_in_its_mode():
    params = [
        SamplingParams(temperature=0.7, logprobs=4, logprobs_mode="processed", seed=1),
        SamplingParams(temperature=0.7, logprobs=4, logprobs_mode="raw", seed=2),
        SamplingParams(temperature=1.3, top_k=3, logprobs=6, logprobs_mode="processed", seed=3),
        SamplingParams(temperature=0, logprobs=2, logprobs_mode="processed"),
        SamplingParams(temperature=0.7, logprobs=4, seed=4),  # None: the sampler's default
    ]
    torch.manual_seed(7)
    logits = torch.randn(len(params), VOCAB) * 2
    generators = [torch.Generator().manual_seed(p.seed) if p.seed else None for p in params]
    batch = SamplingBatch.build(
        params, [()] * len(params), [()] * len(params), VOCAB, [0], generators
    )
    out = Sampler()(logits, batch, _bitmask(len(params)))
    for row, row_params in enumerate(params):
        token = int(out.token_ids[row])
        assert token in ALLOWED
        if row_params.logprobs_mode == "processed":
            reference = _processed_reference(logits[row], row_params)
        else:
            reference = torch.log_softmax(logits[row], dim=-1)
        assert math.isclose(float(out.logprobs[row]), float(reference[token]), abs_tol=1e-5)
        num_top = row_params.logprobs
        ids = out.top_logprob_ids[row, :num_top].tolist()
        values = out.top_logprobs[row, :num_top]
        torch.testing.assert_close(values, reference.sort(descending=True).values[:num_top])
        if row_params.logprobs_mode == "processed":
            finite = [t for t, v in zip(ids, values.tolist(), strict=True) if v > -math.inf]
            assert set(finite) <= set(ALLOWED)  # only drawable tokens carry a finite value
            assert values.isfinite().tolist() == sorted(values.isfinite().tolist(), reverse=True)
    # row 2 keeps 3 tokens after top-k, so 3 of its 6 alternatives are -inf
    assert int(out.top_logprobs[2].isfinite().sum()) == 3


def test_sampler_default_mode_applies_to_rows_without_one():
    params = [SamplingParams(temperature=0.5, logprobs=3, seed=9)]
    logits = torch.randn(1, VOCAB)
    batch = SamplingBatch.build(params, [()], [()], VOCAB, [0], [torch.Generator().manual_seed(9)])
    out = Sampler(logprobs_mode="processed")(logits, batch, _bitmask(1))
    reference = _processed_reference(logits[0], params[0])
    assert math.isclose(
        float(out.logprobs[0]), float(reference[int(out.token_ids[0])]), abs_tol=1e-5
    )
    assert set(out.top_logprob_ids[0].tolist()) <= set(ALLOWED)


def test_logprobs_mode_is_checked():
    with pytest.raises(SamplingParamsError, match="logprobs_mode"):
        SamplingParams(logprobs_mode="final")
    assert SamplingParams(logprobs_mode="raw").logprobs_mode == "raw"
