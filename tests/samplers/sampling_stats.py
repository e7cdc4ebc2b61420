"""Statistics helpers of the samplers tests (chi-square goodness of fit, exact counts)."""

import torch


def chi_square_p_value(counts: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Pearson chi-square goodness-of-fit p-value (float64; cells with p = 0 excluded).

    Asserts that no zero-probability cell was observed. The survival function of chi2(df) is
    the regularised upper incomplete gamma ``Q(df / 2, x / 2)``.
    """
    counts = counts.double()
    probs = expected_probs.double()
    support = probs > 0
    assert counts[~support].sum() == 0, "a zero-probability token was sampled"
    total = counts.sum()
    expected = probs[support] / probs[support].sum() * total
    statistic = ((counts[support] - expected) ** 2 / expected).sum()
    df = int(support.sum()) - 1
    if df == 0:
        return 1.0
    return float(
        torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64), statistic / 2.0)
    )


def token_counts(token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(V,) histogram of a 1-D tensor of token ids."""
    return torch.bincount(token_ids, minlength=vocab_size)
