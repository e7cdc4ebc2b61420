"""Medusa tree speculation on the real SmolLM2: greedy output equals plain greedy decoding.

The 16 prompts and 4 grammars (JSON schemas, regexes; jump-forward on) of the chain tests,
in a batch of 16 and one at a time, for (a) real heads (`MedusaHeads` with random residual
blocks: wrong most of the time, as greedy equality must hold for any heads) and (b) oracle
candidates that put the true continuation at varying ranks or leave it out, so accepted
paths of every length (and their K/V moves) occur on the real model. The oracle for the
tokens is the same engine without speculation.
"""

from __future__ import annotations

import pytest
import torch
from medusa_oracle import OracleCandidates
from test_speculative_greedy_smollm2 import ENGINE, GRAMMAR_LIST, GREEDY, PROMPTS

from formcast.engine.llm_engine import LLM
from formcast.engine.speculative.medusa_heads import MedusaHeads

TREE = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


@pytest.fixture(scope="module")
def plain():
    llm = LLM("smollm2-135m", **ENGINE)
    free = [o.token_ids for o in llm.generate(PROMPTS, GREEDY)]
    constrained = [o.token_ids for o in llm.generate(PROMPTS, GREEDY, grammar=GRAMMAR_LIST)]
    return llm, free, constrained


def _heads(llm: LLM, seed: int) -> MedusaHeads:
    heads = MedusaHeads(576, 3, llm.runner.model.model.embed_tokens.weight)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        heads.weight.copy_(torch.randn(heads.weight.shape, generator=generator) * 0.03)
    return heads


def _check(llm, free, constrained, indices, batch):
    for grammar_on, expected in ((False, free), (True, constrained)):
        prompts = [PROMPTS[i] for i in indices]
        grammars = [GRAMMAR_LIST[i] for i in indices] if grammar_on else None
        got = []
        for start in range(0, len(prompts), batch):
            chunk = slice(start, start + batch)
            outputs = llm.generate(
                prompts[chunk], GREEDY, grammar=None if grammars is None else grammars[chunk]
            )
            got.extend(o.token_ids for o in outputs)
        for i, tokens in zip(indices, got, strict=True):
            assert tokens == expected[i], f"prompt {i} (grammar {grammar_on})"


def test_medusa_heads_greedy_equals_plain(plain):
    base, free, constrained = plain
    spec = dict(method="medusa", medusa_heads=_heads(base, 0), medusa_tree=TREE, adaptive=False)
    llm = LLM(
        "smollm2-135m",
        tokenizer=base.tokenizer,
        speculative=dict(spec, max_batch_size=16),
        **ENGINE,
    )
    _check(llm, free, constrained, range(len(PROMPTS)), 16)
    stats = llm.speculator.stats
    assert stats.num_verifications > 0 and stats.num_draft_tokens > stats.num_verifications
    llm.block_manager.check_invariants([])
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks


def test_oracle_trees_greedy_equals_plain(plain):
    base, free, constrained = plain
    spec = dict(
        method="medusa",
        medusa_heads=_heads(base, 1),
        medusa_tree=TREE,
        adaptive=False,
        max_batch_size=16,
    )
    llm = LLM("smollm2-135m", tokenizer=base.tokenizer, speculative=spec, **ENGINE)
    oracle = OracleCandidates(llm, base.vocab_size)
    prompts_ids = [base.encode_prompt(p)[1] for p in PROMPTS]
    oracle.references = [p + o for p, o in zip(prompts_ids, free, strict=True)]
    oracle.references += [p + o for p, o in zip(prompts_ids, constrained, strict=True)]
    _check(llm, free, constrained, range(len(PROMPTS)), 16)
    # the same requests as the fixture's plain runs: fewer target forward passes
    assert llm.stats.num_steps < base.stats.num_steps
    _check(llm, free, constrained, [0, 8, 15], 1)
    stats = llm.speculator.stats
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    assert stats.num_forced_draft_tokens > 0  # jump-forward text rode inside trees
    llm.block_manager.check_invariants([])
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
