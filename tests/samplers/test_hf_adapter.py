"""FormcastLogitsProcessor drives transformers' generate, on a tiny random-weight Llama.

Oracles: a hand-written greedy loop over the model's own forward pass with transformers'
RepetitionPenaltyLogitsProcessor and a plain boolean mask; transformers' warper chain on the
raw logits generate reports (output_logits) for the sampled scores.
"""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.generation.logits_process import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
)

from formcast.samplers import SamplingParams
from formcast.samplers.hf_adapter import FormcastLogitsProcessor

VOCAB = 300
NO_HF_WARPERS = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


def allowed_table(input_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """A deterministic per-row, per-step allowed set (bool (B, V)), like a grammar's."""
    generator = torch.Generator().manual_seed(int(input_ids.shape[1]) * 7919)
    table = torch.rand(input_ids.shape[0], vocab_size, generator=generator) < 0.2
    table[:, 3] = True
    table[:, 2] = False  # EOS never allowed: generation runs to max_new_tokens
    return table


def pack(table: torch.Tensor) -> torch.Tensor:
    num_rows, vocab_size = table.shape
    padded = torch.zeros(num_rows, (vocab_size + 31) // 32 * 32, dtype=torch.int64)
    padded[:, :vocab_size] = table.long()
    weights = 2 ** torch.arange(32, dtype=torch.int64)
    words = (padded.view(num_rows, -1, 32) * weights).sum(-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def test_greedy_generate_equals_manual_masked_loop(tiny_model):
    prompt = torch.tensor([[1, 5, 9, 11, 5], [1, 40, 41, 42, 43]])
    processor = FormcastLogitsProcessor(
        SamplingParams(temperature=0, repetition_penalty=1.4),
        eos_token_ids=[2],
        bitmask_fn=lambda ids: pack(allowed_table(ids, VOCAB)),
    )
    generated = tiny_model.generate(
        prompt,
        do_sample=False,
        max_new_tokens=10,
        logits_processor=[processor],
        pad_token_id=0,
    )
    ids = prompt.clone()
    penalty = RepetitionPenaltyLogitsProcessor(1.4)
    with torch.no_grad():
        for _ in range(10):
            logits = tiny_model(ids).logits[:, -1].float()
            logits = penalty(ids, logits).masked_fill(~allowed_table(ids, VOCAB), -torch.inf)
            ids = torch.cat([ids, logits.argmax(dim=-1, keepdim=True)], dim=1)
    assert torch.equal(generated, ids)


def test_sampled_generate_scores_equal_transformers_chain(tiny_model):
    prompt = torch.tensor([[1, 5, 9], [1, 7, 7]])
    params = [SamplingParams(temperature=0.7, top_k=5), SamplingParams(temperature=1.3, top_k=9)]
    processor = FormcastLogitsProcessor(
        params, eos_token_ids=[2], bitmask_fn=lambda ids: pack(allowed_table(ids, VOCAB))
    )
    torch.manual_seed(4)
    out = tiny_model.generate(
        prompt,
        do_sample=True,
        max_new_tokens=6,
        logits_processor=[processor],
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
        pad_token_id=0,
        **NO_HF_WARPERS,
    )
    sequences = out.sequences
    for step, (scores, raw) in enumerate(zip(out.scores, out.logits, strict=True)):
        ids = sequences[:, : prompt.shape[1] + step]
        masked = raw.float().masked_fill(~allowed_table(ids, VOCAB), -torch.inf)
        for row, row_params in enumerate(params):
            expected = TemperatureLogitsWarper(row_params.temperature)(ids, masked[row : row + 1])
            expected = TopKLogitsWarper(row_params.top_k)(ids, expected)
            assert torch.equal(torch.isfinite(scores[row]), torch.isfinite(expected[0]))
            torch.testing.assert_close(
                scores[row][torch.isfinite(scores[row])], expected[0][torch.isfinite(expected[0])]
            )
            chosen = sequences[row, prompt.shape[1] + step]
            assert bool(torch.isfinite(scores[row, chosen]))


def test_min_tokens_and_params_count_checks(tiny_model):
    processor = FormcastLogitsProcessor([SamplingParams()] * 3)
    with pytest.raises(ValueError, match="3 SamplingParams for 2 rows"):
        processor(torch.tensor([[1], [1]]), torch.zeros(2, VOCAB))
    early = FormcastLogitsProcessor(
        SamplingParams(min_tokens=2), eos_token_ids=[2], prompt_length=2
    )
    scores = early(torch.tensor([[1, 4, 5]]), torch.zeros(1, VOCAB))  # one new token so far
    assert scores[0, 2] == -torch.inf and bool(torch.isfinite(scores[0, 3:]).all())
