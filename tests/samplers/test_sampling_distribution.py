"""Sampled frequencies match the processed distribution; structural properties of filtering.

Chi-square goodness of fit at significance alpha = 1e-4 (a correct sampler fails a given
test with probability 1e-4; seeds are fixed, so the outcome is deterministic). Sample size
N = 120,000 per configuration: moving 1% of probability mass between two tokens of
probability ~0.1-0.3 gives a non-centrality N * sum(delta^2 / p) >= 120,000 * 2e-4 / 0.3 = 80,
so the test has power > 0.999 at that alpha with df <= 15 (`test_chi_square_detects_one_percent`
checks this on the real sampler output).
"""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sampling_stats import chi_square_p_value, token_counts

from formcast.errors import DeadEndError
from formcast.samplers import Sampler, SamplingBatch, SamplingParams, make_generator

ALPHA = 1e-4
NUM_SAMPLES = 120_000
VOCAB = 16


def build(params, vocab_size, generators=None, outputs=None):
    no_tokens = [()] * len(params)
    outputs = outputs if outputs is not None else no_tokens
    return SamplingBatch.build(params, no_tokens, outputs, vocab_size, [0], generators)


CONFIGS = [
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.6, top_k=5),
    SamplingParams(temperature=1.3, top_p=0.8),
    SamplingParams(temperature=0.9, min_p=0.15),
    SamplingParams(temperature=1.0, typical_p=0.7),
    SamplingParams(temperature=0.8, top_k=10, top_p=0.9, min_p=0.05),
]


def sample_many(base_logits, params, num_samples, bitmask=None, num_candidates=256):
    """Sample ``num_samples`` rows at once per config; returns tokens (C, N) and probs (C, V)."""
    num_configs = len(params)
    row_params = [p for p in params for _ in range(num_samples)]
    logits = base_logits.repeat_interleave(num_samples, dim=0)  # (C * N, V)
    batch = build(row_params, base_logits.shape[1])
    row_bitmask = None if bitmask is None else bitmask.repeat_interleave(num_samples, dim=0)
    sampler = Sampler(num_candidates=num_candidates)
    tokens = sampler(logits, batch, row_bitmask).token_ids.view(num_configs, num_samples)
    small_batch = build(list(params), base_logits.shape[1])
    probs = sampler.process_logits(base_logits, small_batch, bitmask).softmax(dim=-1)
    return tokens, probs


def test_sampled_frequencies_match_processed_distribution():
    torch.manual_seed(1234)
    base = torch.randn(len(CONFIGS), VOCAB) * 1.5
    tokens, probs = sample_many(base, CONFIGS, NUM_SAMPLES)
    for config, row_tokens, row_probs in zip(CONFIGS, tokens, probs, strict=True):
        counts = token_counts(row_tokens, VOCAB)
        assert chi_square_p_value(counts, row_probs) > ALPHA, config


def test_candidate_path_and_full_path_sample_the_same_distribution():
    # num_candidates=2 forces the candidate-widening path for top-p / typical rows
    torch.manual_seed(99)
    base = torch.randn(len(CONFIGS), VOCAB)
    tokens, probs = sample_many(base, CONFIGS, NUM_SAMPLES // 4, num_candidates=2)
    for config, row_tokens, row_probs in zip(CONFIGS, tokens, probs, strict=True):
        assert chi_square_p_value(token_counts(row_tokens, VOCAB), row_probs) > ALPHA, config


def test_chi_square_detects_one_percent():
    torch.manual_seed(7)
    base = torch.randn(1, VOCAB)
    tokens, probs = sample_many(base, [SamplingParams()], NUM_SAMPLES)
    counts = token_counts(tokens[0], VOCAB)
    wrong = probs[0].clone()
    top, second = wrong.topk(2).indices.tolist()
    wrong[top] -= 0.01
    wrong[second] += 0.01  # 1% of the mass moved
    assert chi_square_p_value(counts, probs[0]) > ALPHA
    assert chi_square_p_value(counts, wrong) < ALPHA


def test_bitmask_zero_probability_tokens_never_appear():
    torch.manual_seed(3)
    vocab_size = 70  # three bitmask words, the last one partial
    base = torch.randn(3, vocab_size)
    allowed = torch.rand(3, vocab_size) < 0.3
    allowed[:, 0] = True
    bitmask = pack_bitmask(allowed)
    params = [SamplingParams(), SamplingParams(top_p=0.9), SamplingParams(temperature=2.0)]
    tokens, probs = sample_many(base, params, 40_000, bitmask)
    for row in range(3):
        assert bool(allowed[row, tokens[row]].all())
        assert chi_square_p_value(token_counts(tokens[row], vocab_size), probs[row]) > ALPHA
    assert bool((probs[~allowed] == 0).all())


def pack_bitmask(allowed: torch.Tensor) -> torch.Tensor:
    """Pack a bool (B, V) table into the int32 (B, ceil(V / 32)) layout (oracle, in Python)."""
    num_rows, vocab_size = allowed.shape
    num_words = (vocab_size + 31) // 32
    words = torch.zeros(num_rows, num_words, dtype=torch.int64)
    for row, token in allowed.nonzero().tolist():
        words[row, token // 32] |= 1 << (token % 32)
    words = torch.where(words >= 2**31, words - 2**32, words)  # two's complement
    return words.to(torch.int32)


def test_dead_end_row_raises_naming_the_row():
    logits = torch.randn(3, 40)
    allowed = torch.ones(3, 40, dtype=torch.bool)
    allowed[1] = False
    batch = build([SamplingParams()] * 3, 40)
    try:
        Sampler()(logits, batch, pack_bitmask(allowed))
    except DeadEndError as error:
        assert "rows [1]" in str(error)
    else:
        raise AssertionError("no DeadEndError")


def test_min_tokens_ban_yields_to_a_grammar_that_only_allows_the_end():
    logits = torch.randn(2, 40)
    allowed = torch.zeros(2, 40, dtype=torch.bool)
    allowed[0, 0] = True  # row 0: the grammar is complete, only EOS (id 0) is allowed
    allowed[1, [0, 7, 9]] = True  # row 1: EOS or two other tokens
    early = build([SamplingParams(min_tokens=2)] * 2, 40, outputs=[[5], [5]])
    sampler = Sampler(logprobs_mode="processed")
    for _ in range(20):
        out = sampler(logits, early, pack_bitmask(allowed))
        assert out.token_ids[0].item() == 0  # the ban gave way in row 0 only
        assert out.token_ids[1].item() in (7, 9)  # row 1 keeps its ban
    processed = sampler.process_logits(logits, early, pack_bitmask(allowed))
    assert processed[0].isfinite().nonzero().flatten().tolist() == [0]
    assert processed[1].isfinite().nonzero().flatten().tolist() == [7, 9]


def test_seeded_row_is_independent_of_the_rest_of_the_batch():
    torch.manual_seed(5)
    vocab_size = 3000
    seeded = SamplingParams(temperature=0.9, top_p=0.95, seed=42)
    logits = torch.randn(8, vocab_size)

    def run(batch_params, position, num_candidates):
        generators = [make_generator(p) for p in batch_params]
        tokens = []
        for _ in range(4):
            batch = build(batch_params, vocab_size, generators)
            rows_logits = logits[: len(batch_params)].clone()
            rows_logits[position] = logits[0]
            out = Sampler(num_candidates=num_candidates)(rows_logits, batch)
            tokens.append(int(out.token_ids[position]))
        return tokens

    alone = run([seeded], 0, 256)
    others = [
        SamplingParams(temperature=0),
        SamplingParams(top_k=3),
        SamplingParams(min_p=0.2),
        SamplingParams(typical_p=0.5),
        SamplingParams(seed=7),
        SamplingParams(top_k=2000),
    ]
    assert run(others[:3] + [seeded] + others[3:], 3, 256) == alone
    assert run([seeded] + others, 0, 1) == alone  # candidate widening changes nothing
    assert run([SamplingParams(top_p=0.5)] * 5 + [seeded], 5, 4096) == alone


def test_seeded_rows_follow_the_distribution():
    vocab_size = 8
    base = torch.randn(1, vocab_size, generator=torch.Generator().manual_seed(11))
    num_rows = 20_000
    params = [SamplingParams(temperature=0.8, seed=seed) for seed in range(num_rows)]
    batch = build(params, vocab_size, [make_generator(p) for p in params])
    tokens = Sampler()(base.expand(num_rows, -1), batch).token_ids
    probs = (base[0] / 0.8).softmax(dim=-1)
    assert chi_square_p_value(token_counts(tokens, vocab_size), probs) > ALPHA


def test_greedy_rows_take_the_argmax_in_a_mixed_batch():
    torch.manual_seed(8)
    logits = torch.randn(6, 500)
    params = [SamplingParams(temperature=0), SamplingParams(top_k=1)] * 3
    out = Sampler()(logits, build(params, 500))
    assert torch.equal(out.token_ids, logits.argmax(dim=-1))


finite_logits = st.lists(
    st.floats(min_value=-30, max_value=30, allow_nan=False, width=32), min_size=2, max_size=40
)


@settings(max_examples=60, deadline=None)
@given(
    logits=finite_logits,
    temperature=st.floats(0.1, 3.0),
    top_k=st.integers(0, 45),
    top_p=st.floats(0.01, 1.0),
    min_p=st.floats(0.0, 1.0),
)
def test_argmax_always_survives(logits, temperature, top_k, top_p, min_p):
    row = torch.tensor([logits])
    params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    processed = Sampler(num_candidates=4).process_logits(row, build([params], row.shape[1]))
    assert bool(torch.isfinite(processed[0, row[0].argmax()]))


def kept(row, **settings_):
    params = SamplingParams(**settings_)
    processed = Sampler(num_candidates=4).process_logits(row, build([params], row.shape[1]))
    return torch.isfinite(processed[0])


@settings(max_examples=60, deadline=None)
@given(
    logits=finite_logits,
    low=st.floats(0.0, 1.0),
    high=st.floats(0.0, 1.0),
    top_k=st.integers(0, 10),
)
def test_raising_min_p_never_adds_a_token(logits, low, high, top_k):
    low, high = min(low, high), max(low, high)
    row = torch.tensor([logits])
    assert bool((kept(row, min_p=high, top_k=top_k) <= kept(row, min_p=low, top_k=top_k)).all())


@settings(max_examples=60, deadline=None)
@given(
    logits=finite_logits,
    low=st.floats(0.01, 1.0),
    high=st.floats(0.01, 1.0),
    min_p=st.sampled_from([0.0, 0.1]),
)
def test_raising_top_p_never_removes_a_token(logits, low, high, min_p):
    low, high = min(low, high), max(low, high)
    row = torch.tensor([logits])
    assert bool((kept(row, top_p=low, min_p=min_p) <= kept(row, top_p=high, min_p=min_p)).all())


def test_overflowing_logits_sample_among_the_infinite_ones():
    logits = torch.tensor([[3e38, 1.0, 3e38, -5.0]] * 2000)
    params = [SamplingParams(temperature=0.1, top_p=0.9, min_p=0.1)] * 2000
    out = Sampler()(logits, build(params, 4))
    counts = token_counts(out.token_ids, 4)
    assert counts[1] == 0 and counts[3] == 0 and counts[0] > 800 and counts[2] > 800


def test_penalties_bias_and_min_tokens_match_their_formulas():
    vocab_size = 10
    logits = torch.linspace(-2, 2, vocab_size).repeat(2, 1)
    params = [
        SamplingParams(
            temperature=0,
            frequency_penalty=0.5,
            presence_penalty=0.25,
            logit_bias={"3": 2.0, 9: float("-inf")},
            min_tokens=5,
            stop_token_ids=[7],
        ),
        SamplingParams(temperature=0, repetition_penalty=2.0, min_tokens=4, ignore_eos=True),
    ]
    outputs = [[1, 1, 2, 99], [0, 9, -1]]  # 99 and -1 lie outside the vocabulary: ignored
    batch = SamplingBatch.build(params, [[5], [5]], outputs, vocab_size, [0])
    processed = Sampler().process_logits(logits, batch)
    expected = logits.clone()
    expected[0, 1] -= 0.5 * 2 + 0.25
    expected[0, 2] -= 0.5 * 1 + 0.25
    expected[0, 3] += 2.0
    expected[0, 9] = float("-inf")
    expected[0, [0, 7]] = float("-inf")  # EOS and stop id below min_tokens
    for token in (0, 5, 9):  # prompt + output, once each; ignore_eos keeps EOS allowed
        value = expected[1, token]
        expected[1, token] = value * 2.0 if value < 0 else value / 2.0
    torch.testing.assert_close(processed, expected)


def test_bf16_logits_are_processed_in_float32():
    torch.manual_seed(12)
    logits = torch.randn(4, 300).to(torch.bfloat16)
    params = [SamplingParams(temperature=0, logprobs=3), SamplingParams(top_k=5, logprobs=0)] * 2
    batch = build(params, 300)
    out = Sampler()(logits, batch)
    reference = logits.float()
    assert torch.equal(out.token_ids[::2], reference[::2].argmax(dim=-1))
    expected = reference.log_softmax(dim=-1).gather(1, out.token_ids[:, None]).squeeze(1)
    torch.testing.assert_close(out.logprobs, expected)  # raw-mode logprobs, float32
    assert out.top_logprobs.dtype == torch.float32 and out.top_logprob_ids.shape == (4, 3)
    assert bool(torch.isfinite(Sampler().process_logits(logits, batch)[1]).sum() == 5)
