"""The sampler's general path (``sync_free=True``, what a GPU runs) against its CPU fast path.

Both paths see the same processed distribution (`Sampler.process_logits` is equal), and a
seeded row draws the same token on both: its noise is the same full draw, raced over all
tokens or over its candidates only. Unseeded rows are checked by chi-square against the
processed distribution (alpha = 1e-4, fixed seeds, as in ``test_sampling_distribution``).
Errors (dead rows, NaN logits) are raised after the step's one copy back, with the same
messages on both paths.
"""

from __future__ import annotations

import math

import pytest
import torch
from sampling_stats import chi_square_p_value, token_counts

from formcast.errors import DeadEndError
from formcast.samplers import (
    Sampler,
    SamplerInputError,
    SamplingBatch,
    SamplingParams,
    make_generator,
)

ALPHA = 1e-4
VOCAB = 3000

MIXED = [
    SamplingParams(temperature=0, repetition_penalty=1.2),
    SamplingParams(temperature=0.8, top_k=20, seed=1),
    SamplingParams(top_p=0.9, seed=2, frequency_penalty=0.4),
    SamplingParams(temperature=0.7, min_p=0.1, seed=3, logit_bias={5: 4.0}),
    SamplingParams(top_k=5, top_p=0.8, min_p=0.05, seed=4),
    SamplingParams(typical_p=0.5, seed=5, min_tokens=3),
    SamplingParams(top_p=0.999, seed=6),  # flat rows below: far beyond the first candidates
    SamplingParams(top_k=2000, seed=7, presence_penalty=-0.5),
    SamplingParams(temperature=0, seed=8, logprobs=3, logprobs_mode="processed"),
    SamplingParams(temperature=1.3, top_p=0.5, typical_p=0.9, seed=9, logprobs=2),
]


def _batch(params, vocab_size=VOCAB, outputs=None):
    outputs = outputs if outputs is not None else [[3, 3, 4]] * len(params)
    return SamplingBatch.build(
        params,
        [[1, 2]] * len(params),
        outputs,
        vocab_size,
        [0],
        [make_generator(p) for p in params],
    )


def _logits(scale: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(MIXED), VOCAB, generator=generator) * scale
    logits[6] = torch.randn(VOCAB, generator=generator) * 0.01  # nearly flat
    return logits


@pytest.mark.parametrize("scale", [0.5, 2.0, 8.0])
def test_seeded_rows_draw_the_same_tokens_on_both_paths(scale):
    logits = _logits(scale, seed=int(scale * 10))
    bitmask = torch.full((len(MIXED), (VOCAB + 31) // 32), -1, dtype=torch.int32)
    bitmask[3, 2:] = 0  # row 3: tokens 0..63 only
    results = []
    for sync_free in (False, True):
        batch = _batch(MIXED)  # fresh generators: both paths start from the same streams
        sampler = Sampler(num_candidates=64, sync_free=sync_free)
        steps = [sampler(logits, batch, bitmask) for _ in range(3)]
        results.append(
            (
                [step.token_ids.tolist() for step in steps],
                [step.host.token_ids.tolist() for step in steps],
                sampler.process_logits(logits, batch, bitmask),
                steps[0].logprobs,
            )
        )
    (cpu_tokens, cpu_host, cpu_processed, cpu_logprobs) = results[0]
    (tokens, host, processed, logprobs) = results[1]
    assert tokens == cpu_tokens
    assert host == tokens  # the host copy is the device result
    assert torch.equal(processed, cpu_processed)
    torch.testing.assert_close(logprobs, cpu_logprobs)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.6, top_k=5),
        SamplingParams(temperature=1.3, top_p=0.8),
        SamplingParams(temperature=0.9, min_p=0.15),
        SamplingParams(temperature=1.0, typical_p=0.7),
        SamplingParams(temperature=0.8, top_k=10, top_p=0.9, min_p=0.05),
    ],
)
def test_unseeded_rows_follow_the_processed_distribution(params):
    torch.manual_seed(4321)
    vocab_size, num_samples = 16, 60_000
    base = torch.randn(1, vocab_size) * 1.5
    batch = _batch([params] * num_samples, vocab_size, outputs=[[]] * num_samples)
    sampler = Sampler(sync_free=True)
    tokens = sampler(base.expand(num_samples, -1), batch).token_ids
    probs = sampler.process_logits(base, _batch([params], vocab_size, [[]])).softmax(dim=-1)
    assert chi_square_p_value(token_counts(tokens, vocab_size), probs[0]) > ALPHA


@pytest.mark.parametrize("sync_free", [False, True])
def test_errors_are_raised_after_the_copy_back_with_their_messages(sync_free):
    sampler = Sampler(sync_free=sync_free)
    params = [SamplingParams(), SamplingParams(top_p=0.5), SamplingParams(temperature=0)]
    batch = _batch(params, 40, [[]] * 3)
    bitmask = torch.full((3, 2), -1, dtype=torch.int32)
    bitmask[1] = 0
    with pytest.raises(DeadEndError, match=r"rows \[1\] have no token allowed"):
        sampler(torch.randn(3, 40), batch, bitmask)
    with pytest.raises(DeadEndError, match=r"rows \[1\]"):
        sampler.process_logits(torch.randn(3, 40), batch, bitmask)
    logits = torch.randn(3, 40)
    logits[2, 7] = math.nan
    with pytest.raises(SamplerInputError, match=r"logits of rows \[2\] hold NaN"):
        sampler(logits, batch)
    with pytest.raises(SamplerInputError, match="NaN"):
        sampler.process_logits(logits, batch)


def test_the_min_tokens_ban_yields_to_the_grammar_on_the_general_path():
    logits = torch.randn(2, 40)
    allowed = torch.zeros(2, 40, dtype=torch.bool)
    allowed[0, 0] = True  # row 0: only EOS (id 0) is allowed
    allowed[1, [0, 7, 9]] = True  # row 1: EOS or two other tokens
    bitmask = torch.zeros(2, 2, dtype=torch.int64)
    for row, token in allowed.nonzero().tolist():
        bitmask[row, token // 32] |= 1 << (token % 32)
    bitmask = torch.where(bitmask >= 2**31, bitmask - 2**32, bitmask).to(torch.int32)
    batch = _batch([SamplingParams(min_tokens=2)] * 2, 40, [[5], [5]])
    sampler = Sampler(sync_free=True)
    for _ in range(20):
        out = sampler(logits, batch, bitmask)
        assert out.host.token_ids[0] == 0  # the ban gave way in row 0 only
        assert out.host.token_ids[1] in (7, 9)  # row 1 keeps its ban
    processed = sampler.process_logits(logits, batch, bitmask)
    assert processed[0].isfinite().nonzero().flatten().tolist() == [0]
    assert processed[1].isfinite().nonzero().flatten().tolist() == [7, 9]


def test_overflowing_logits_sample_among_the_infinite_ones_on_the_general_path():
    logits = torch.tensor([[3e38, 1.0, 3e38, -5.0]] * 2000)
    params = [SamplingParams(temperature=0.1, top_p=0.9, min_p=0.1)] * 2000
    batch = _batch(params, 4, [[]] * 2000)
    counts = token_counts(Sampler(sync_free=True)(logits, batch).token_ids, 4)
    assert counts[1] == 0 and counts[3] == 0 and counts[0] > 800 and counts[2] > 800


def test_sync_free_must_be_a_bool_or_none():
    with pytest.raises(SamplerInputError, match="sync_free"):
        Sampler(sync_free="yes")
