"""Sampling with Medusa tree verification follows the target distribution exactly.

The 5-token random Llama of ``test_speculative_sampling`` generates 3 tokens after a fixed
prompt; the exact distribution of the 125 outputs comes from transformers' forward pass. Medusa
heads with random residual blocks propose trees whose nodes have up to 3 children (top-3 of 5
tokens, depth 2), verified by recursive rejection sampling; the ``n = 500`` siblings of a
request share the prompt's hidden state, so every sequence speculates from its second token.
Chi-square test, N = 2,000, 125 cells, alpha = 1e-4; the power check of
``test_speculative_sampling`` (the resample-from-p bug would be detected with probability ~1)
applies to the same N and cells. A second run with ``acceptance="typical"`` shows that option is not exact.
"""

from __future__ import annotations

import torch
from test_speculative_sampling import (
    NUM_SAMPLES,
    PARAMS,
    PROMPT,
    _conditionals,
    _p_value,
    _sequence_probs,
    tiny_vocab_folder,  # noqa: F401  (fixture)
)

from formcast.engine.llm_engine import LLM
from formcast.engine.speculative.medusa_heads import MedusaHeads

TREE = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [2, 0]]


def _run(folder, **spec):
    llm = LLM(
        folder,
        max_num_seqs=NUM_SAMPLES,
        num_kv_blocks=NUM_SAMPLES + 64,
        max_model_len=32,
        max_num_batched_tokens=8 * NUM_SAMPLES,
        speculative=dict(method="medusa", medusa_tree=TREE, max_batch_size=4096, adaptive=False)
        | spec,
    )
    outputs = llm.generate([PROMPT] * (NUM_SAMPLES // PARAMS.n), PARAMS)
    counts: dict[tuple[int, ...], int] = {}
    for out in outputs:
        for completion in out.outputs:
            key = tuple(completion.token_ids)
            counts[key] = counts.get(key, 0) + 1
    return llm, counts


def _heads(folder) -> MedusaHeads:
    from safetensors.torch import load_file

    weights = load_file(str(folder / "model.safetensors"))
    heads = MedusaHeads(32, 2, weights["lm_head.weight"])
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        heads.weight.copy_(torch.randn(heads.weight.shape, generator=generator) * 0.5)
    return heads


def test_tree_sampling_distribution_equals_target(tiny_vocab_folder):  # noqa: F811
    exact = _sequence_probs(_conditionals(tiny_vocab_folder))
    llm, counts = _run(tiny_vocab_folder, medusa_heads=_heads(tiny_vocab_folder))
    stats = llm.speculator.stats
    assert stats.num_verifications >= NUM_SAMPLES  # every sequence verified a tree
    assert stats.num_draft_tokens > 3 * stats.num_verifications  # several children per node
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    assert _p_value(counts, exact) > 1e-4
