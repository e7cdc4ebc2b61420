"""After tree verification, KV cache, prefix cache and matcher state equal a clean run's.

A tiny random-weight Llama (SmolLM2's vocabulary) decodes greedily with oracle Medusa
candidates (the true continuation at varying ranks, or missing), so every step accepts some
path of a tree and rejects its siblings, whose K/V sat between the accepted nodes. After
every engine step the checks of ``test_speculative_state`` run: tokens are a prefix of plain
greedy's, the paged K/V of every cached token equals transformers' K/V for those tokens from
scratch, prefix-cache blocks hold their tokens, the matcher equals a fresh one fed the output,
block counts agree.
"""

from __future__ import annotations

import pytest
import torch
from medusa_oracle import OracleCandidates
from test_speculative_state import GREEDY, REGEX, _check_state

from formcast.engine.llm_engine import LLM
from formcast.engine.speculative.medusa_heads import MedusaHeads

TREE = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 1]]


@pytest.mark.parametrize("grammar", [None, {"regex": REGEX}], ids=["free", "regex"])
def test_state_after_tree_verification_equals_clean_run(tiny_folders, grammar):
    from transformers import AutoModelForCausalLM

    folder = tiny_folders["llama"]
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(11)
    prompts = [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in (5, 19, 33)]
    config = dict(block_size=8, num_kv_blocks=96, max_num_seqs=4, max_model_len=128)
    plain = LLM(folder, **config)
    outputs = plain.generate(prompts, GREEDY, grammar=grammar)
    references = [p + o.token_ids for p, o in zip(prompts, outputs, strict=True)]
    heads = MedusaHeads(64, 3, plain.runner.model.model.embed_tokens.weight)
    spec = dict(method="medusa", medusa_heads=heads, medusa_tree=TREE, adaptive=False)
    llm = LLM(folder, tokenizer=plain.tokenizer, speculative=spec, **config)
    oracle = OracleCandidates(llm, 49152)
    oracle.references = references
    request_ids = [llm.add_request(p, GREEDY, grammar=grammar) for p in prompts]
    num_checked = 0
    while llm.has_unfinished_requests():
        llm.step()
        num_checked += _check_state(llm, hf, references, grammar)
    got = [llm.take_output(r).token_ids for r in request_ids]
    assert got == [o.token_ids for o in outputs]
    stats = llm.speculator.stats
    assert num_checked > 5 and oracle.num_calls > 3
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    assert stats.num_accepted_tokens > stats.num_verifications  # paths deeper than one node
    llm.block_manager.check_invariants([])
