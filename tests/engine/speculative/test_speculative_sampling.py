"""Sampling with speculation follows the target distribution exactly (tiny-vocabulary model).

A random-weight Llama with a 5-token vocabulary generates 3 tokens after a fixed prompt;
the exact distribution of the 125 possible outputs is enumerated from transformers' own
forward pass, and the engine's outputs with speculation (n-gram point-mass drafts; the
self-draft with sampled drafts and their probabilities) are compared by a chi-square test.

Power: N = 2,000 samples, 125 cells, alpha = 1e-4. The test enumerates the distribution a
verifier with the classic bug (a rejected draft's replacement drawn from ``p`` instead of the
residual) would produce, and asserts its chi-square noncentrality at this N exceeds 3x the
critical value, so that bug is detected with probability ~1.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from formcast.decoding.speculative.ngram_proposer import NgramProposer
from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams

VOCAB = 5
PROMPT = [1, 2, 3, 1, 2, 3, 1, 2, 0, 4]
NUM_NEW = 3
NUM_SAMPLES = 2000
PARAMS = SamplingParams(temperature=1.0, max_tokens=NUM_NEW, ignore_eos=True, n=500)


@pytest.fixture(scope="module")
def tiny_vocab_folder(tmp_path_factory):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-vocab")
    vocab = {f"t{i}": i for i in range(VOCAB)}
    raw = Tokenizer(WordLevel(vocab, unk_token="t0"))
    raw.pre_tokenizer = WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="t4", unk_token="t0")
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        initializer_range=0.3,
        eos_token_id=4,
        bos_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(3)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _conditionals(folder) -> dict[tuple[int, ...], list[float]]:
    """``p(. | PROMPT + prefix)`` for every output prefix shorter than NUM_NEW (float64)."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    table = {}
    with torch.no_grad():
        for prefix in itertools.product(range(VOCAB), repeat=NUM_NEW - 1):
            ids = torch.tensor([PROMPT + list(prefix)])
            probs = torch.softmax(hf(ids).logits[0].double(), dim=-1)  # (T, V)
            for j in range(NUM_NEW):
                table[prefix[:j]] = probs[len(PROMPT) - 1 + j].tolist()
    return table


def _sequence_probs(cond, bug_draft=None) -> dict[tuple[int, ...], float]:
    """Exact output distribution; with ``bug_draft(prefix) -> token | None``, the one a
    verifier produces that samples its recovery token from ``p`` instead of the residual
    ``norm(p - onehot(draft))`` (the classic bug; used for the power computation)."""
    out = {}
    for seq in itertools.product(range(VOCAB), repeat=NUM_NEW):
        prob = 1.0
        for j, token in enumerate(seq):
            p = cond[seq[:j]]
            draft = bug_draft(seq[:j]) if bug_draft is not None and j > 0 else None
            if draft is None:
                prob *= p[token]
            elif token == draft:  # accepted, or rejected and then resampled as the draft
                prob *= p[draft] + (1 - p[draft]) * p[draft]
            else:
                prob *= (1 - p[draft]) * p[token]
        out[seq] = prob
    return out


def _p_value(counts: dict, exact: dict) -> float:
    cells = sorted(exact)
    probs = torch.tensor([exact[c] for c in cells], dtype=torch.float64)
    observed = torch.tensor([counts.get(c, 0) for c in cells], dtype=torch.float64)
    assert sum(counts.values()) == observed.sum(), "an output outside the enumeration"
    expected = probs * observed.sum()
    statistic = ((observed - expected) ** 2 / expected).sum()
    df = torch.tensor((len(cells) - 1) / 2.0, dtype=torch.float64)
    return float(torch.special.gammaincc(df, statistic / 2.0))


@pytest.mark.parametrize(
    "speculative",
    [
        dict(method="ngram", num_draft_tokens=3, max_batch_size=4096, adaptive=False),
        dict(
            method="self_draft",
            num_draft_tokens=2,
            max_batch_size=4096,
            adaptive=False,
            draft_num_layers=1,
        ),
    ],
    ids=["ngram", "self_draft"],
)
def test_sampling_distribution_equals_target(tiny_vocab_folder, speculative):
    cond = _conditionals(tiny_vocab_folder)
    exact = _sequence_probs(cond)
    assert abs(sum(exact.values()) - 1) < 1e-9
    llm = LLM(
        tiny_vocab_folder,
        speculative=speculative,
        max_num_seqs=NUM_SAMPLES,
        num_kv_blocks=NUM_SAMPLES + 64,
        max_model_len=32,
        max_num_batched_tokens=4 * NUM_SAMPLES,
    )
    outputs = llm.generate([PROMPT] * (NUM_SAMPLES // PARAMS.n), PARAMS)
    counts: dict[tuple[int, ...], int] = {}
    for out in outputs:
        for completion in out.outputs:
            key = tuple(completion.token_ids)
            counts[key] = counts.get(key, 0) + 1
    stats = llm.speculator.stats
    assert stats.num_draft_tokens > NUM_SAMPLES  # most sequences verified drafts
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    assert _p_value(counts, exact) > 1e-4
    # power against a verifier that resamples rejected drafts from p (n-gram drafts)
    proposer = NgramProposer(1, 4)

    def bug_draft(prefix):
        drafts = proposer.propose(PROMPT + list(prefix), 1)
        return drafts[0] if drafts else None

    wrong = _sequence_probs(cond, bug_draft)
    noncentrality = NUM_SAMPLES * sum((wrong.get(c, 0.0) - p) ** 2 / p for c, p in exact.items())
    critical = len(exact) - 1 + 4.0 * (2 * (len(exact) - 1)) ** 0.5
    assert noncentrality > 3 * critical
