"""rejection_sample: the emitted tokens follow the target distribution exactly.

With position-wise (prefix-independent) target p_j and draft q_j, exactness means: for every
position j and every emitted prefix s, P(y_j = a | y_<j = s, at least j + 1 tokens emitted)
= p_j(a). Checked by exact enumeration over all draft sequences (float64, using the
sampler's own acceptance and recovery probabilities) and by sampling (chi-square, alpha 1e-4).
"""

import itertools
from collections import defaultdict

import pytest
import torch
from sampling_stats import chi_square_p_value, token_counts

from formcast.samplers import rejection_probabilities, rejection_sample

ALPHA = 1e-4


def random_probs(generator, *shape, zero_fraction=0.25):
    probs = torch.rand(*shape, generator=generator, dtype=torch.float64)
    probs[torch.rand(*shape, generator=generator) < zero_fraction] = 0.0
    probs[..., 0] += 1e-3  # never an all-zero row
    return probs / probs.sum(dim=-1, keepdim=True)


def emitted_distribution(target, draft, draft_sequences, weights):
    """Exact P(emitted sequence) by enumeration over draft sequences and accept decisions."""
    num_draft = target.shape[0] - 1
    batch = len(draft_sequences)
    ids = torch.tensor(draft_sequences, dtype=torch.int64)
    accept, recovery = rejection_probabilities(
        target.expand(batch, -1, -1),
        None if draft is None else draft.expand(batch, -1, -1),
        ids,
    )
    outcome = defaultdict(float)
    for row, weight in enumerate(weights):
        reach = weight  # probability that the first j drafts were all accepted
        for j in range(num_draft):
            for token, p_token in enumerate(recovery[row, j].tolist()):
                outcome[tuple(draft_sequences[row][:j]) + (token,)] += (
                    reach * (1 - float(accept[row, j])) * p_token
                )
            reach *= float(accept[row, j])
        for token, p_token in enumerate(target[num_draft].tolist()):
            outcome[tuple(draft_sequences[row]) + (token,)] += reach * p_token
    return outcome


def assert_target_conditionals(outcome, target):
    total = sum(outcome.values())
    assert abs(total - 1.0) < 1e-9
    num_positions, vocab_size = target.shape
    for j in range(num_positions):
        joint = defaultdict(lambda: torch.zeros(vocab_size, dtype=torch.float64))
        for sequence, prob in outcome.items():
            if len(sequence) > j:
                joint[sequence[:j]][sequence[j]] += prob
        for prefix, row in joint.items():
            if row.sum() > 1e-12:
                torch.testing.assert_close(
                    row / row.sum(),
                    target[j],
                    rtol=0,
                    atol=1e-9,
                    msg=f"position {j} prefix {prefix}",
                )


@pytest.mark.parametrize("seed", range(4))
def test_enumeration_with_draft_distribution(seed):
    generator = torch.Generator().manual_seed(seed)
    num_draft, vocab_size = 3, 4
    target = random_probs(generator, num_draft + 1, vocab_size)
    draft = random_probs(generator, num_draft, vocab_size)
    if seed == 0:
        draft[1] = target[1]  # p == q: nothing is ever rejected there
    sequences = list(itertools.product(range(vocab_size), repeat=num_draft))
    weights = [
        float(torch.prod(draft[torch.arange(num_draft), torch.tensor(s)])) for s in sequences
    ]
    assert_target_conditionals(emitted_distribution(target, draft, sequences, weights), target)


@pytest.mark.parametrize("seed", range(3))
def test_enumeration_with_point_mass_draft(seed):
    # n-gram / greedy proposers: the draft is deterministic, any fixed sequence must be exact
    generator = torch.Generator().manual_seed(10 + seed)
    target = random_probs(generator, 3, 5)
    for sequence in [(0, 0), (1, 4), (4, 2), (-1, 3) if seed == 0 else (2, -1)]:
        outcome = emitted_distribution(target, None, [sequence], [1.0])
        assert_target_conditionals(outcome, target)


def test_sampling_matches_target_with_draft_distribution():
    generator = torch.Generator().manual_seed(21)
    num_rows, num_draft, vocab_size = 100_000, 3, 6
    target = random_probs(generator, num_draft + 1, vocab_size).float()
    draft = random_probs(generator, num_draft, vocab_size).float()
    torch.manual_seed(0)
    draft_ids = torch.stack(
        [torch.multinomial(draft[j], num_rows, replacement=True) for j in range(num_draft)], 1
    )
    output, num_accepted = rejection_sample(
        target.expand(num_rows, -1, -1), draft.expand(num_rows, -1, -1), draft_ids
    )
    check_sampled_output(output, num_accepted, draft_ids, target)


def test_sampling_matches_target_with_point_mass_draft():
    generator = torch.Generator().manual_seed(22)
    num_rows, vocab_size = 100_000, 7
    target = random_probs(generator, 3, vocab_size).float()
    draft_ids = torch.tensor([[int(target[0].argmax()), 3]]).expand(num_rows, -1)
    torch.manual_seed(1)
    output, num_accepted = rejection_sample(target.expand(num_rows, -1, -1), None, draft_ids)
    check_sampled_output(output, num_accepted, draft_ids, target)


def check_sampled_output(output, num_accepted, draft_ids, target):
    num_rows, num_positions = output.shape
    vocab_size = target.shape[1]
    columns = torch.arange(num_positions)
    # layout: accepted drafts, one sampled token, then -1
    assert torch.equal(
        output[:, :-1][columns[:-1] < num_accepted[:, None]],
        draft_ids[columns[:-1] < num_accepted[:, None]],
    )
    assert bool((output[columns > num_accepted[:, None]] == -1).all())
    assert bool((output.gather(1, num_accepted[:, None]) >= 0).all())
    for j in range(num_positions):
        # position j is emitted iff num_accepted >= j; conditioned on that, y_j ~ p_j
        rows = num_accepted >= j
        if int(rows.sum()) < 1000:
            continue
        counts = token_counts(output[rows, j], vocab_size)
        assert chi_square_p_value(counts, target[j]) > ALPHA, f"position {j}"


def test_seeded_rows_are_reproducible_and_batch_independent():
    generator = torch.Generator().manual_seed(5)
    target = random_probs(generator, 4, 4, 50).float()
    draft = random_probs(generator, 4, 3, 50).float()
    ids = torch.randint(50, (4, 3), generator=generator)

    def run(rows):
        generators = [torch.Generator().manual_seed(100 + r) for r in rows]
        output, accepted = rejection_sample(target[rows], draft[rows], ids[rows], generators)
        return output, accepted

    full_output, full_accepted = run([0, 1, 2, 3])
    for row in range(4):
        output, accepted = run([row])
        assert torch.equal(output[0], full_output[row]) and accepted[0] == full_accepted[row]


def test_everything_accepted_when_draft_equals_target_greedy():
    # a one-hot target equal to the point-mass draft: accept everything, bonus from p_K
    target = torch.zeros(2, 3, 5)
    target[:, 0, 1] = target[:, 1, 2] = target[:, 2, 4] = 1.0
    output, accepted = rejection_sample(target, None, torch.tensor([[1, 2], [1, 3]]))
    assert output.tolist() == [[1, 2, 4], [1, 2, -1]]
    assert accepted.tolist() == [2, 1]
