"""After speculative rejections, KV cache, prefix cache and matcher state equal a clean run's.

A tiny random-weight Llama (SmolLM2's vocabulary) decodes greedily with a test proposer that
proposes a few correct tokens and then a wrong one (so every step both accepts and rejects).
After every engine step, for every running sequence:

- its tokens are a prefix of plain greedy decoding's (so the output is exact);
- the paged KV of its cached tokens equals the keys and values transformers computes for those
  tokens from scratch (a run that never saw the rejected drafts);
- every block registered in the prefix cache holds exactly the sequence's tokens at that place;
- the grammar matcher's state equals a fresh matcher fed the output tokens;
- block reference counts and the free list agree (``check_invariants``).
"""

from __future__ import annotations

import pytest
import torch

from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams

MAX_TOKENS = 14
GREEDY = SamplingParams(temperature=0, max_tokens=MAX_TOKENS)
REGEX = r"[a-z]+( [a-z]+){1,6}\."


class HalfOracle:
    """Proposes the true continuation's next ``j`` tokens (j cycles 0..2), then a wrong one."""

    def __init__(self, references: list[list[int]], vocab_size: int) -> None:
        self.references = references
        self.vocab_size = vocab_size
        self.num_calls = 0

    def propose(self, token_ids: list[int], num_tokens: int) -> list[int]:
        self.num_calls += 1
        for full in self.references:
            if full[: len(token_ids)] == token_ids and len(full) > len(token_ids):
                j = len(token_ids) % 3
                good = full[len(token_ids) : len(token_ids) + j]
                after = full[len(token_ids) + j : len(token_ids) + j + 2]
                if len(after) == 2 and after[1] != after[0]:
                    wrong = after[1]  # a token of the same text: often grammar-valid
                elif after:
                    wrong = (after[0] + 1) % self.vocab_size
                else:
                    return good[:num_tokens]
                return (good + [wrong])[:num_tokens]
        return []


def _hf_kv(hf, token_ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    with torch.no_grad():
        out = hf(torch.tensor([token_ids]), use_cache=True)
    cache = out.past_key_values
    return [(layer.keys[0], layer.values[0]) for layer in cache.layers]  # (Hkv, T, D)


def _paged_kv(llm: LLM, seq, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    bs = llm.config.block_size
    positions = torch.arange(seq.num_cached_tokens)
    blocks = torch.tensor(seq.block_table)[positions // bs]
    offsets = positions % bs
    kv = llm.runner.kv_cache[layer]  # (2, Hkv, N, bs, D)
    return kv[0][:, blocks, offsets], kv[1][:, blocks, offsets]  # (Hkv, T, D)


def _check_state(llm: LLM, hf, references, grammar) -> int:
    bm = llm.block_manager
    live = list(llm.scheduler.running) + list(llm.scheduler.waiting)
    bm.check_invariants(live)
    checked = 0
    for seq in llm.scheduler.running:
        full = next(r for r in references if r[: seq.num_tokens] == seq.token_ids)
        assert full[: seq.num_tokens] == seq.token_ids
        assert 0 < seq.num_cached_tokens < seq.num_tokens
        assert len(seq.block_table) == bm.blocks_for(seq.num_cached_tokens)
        expected = _hf_kv(hf, seq.token_ids[: seq.num_cached_tokens])
        for layer, (keys, values) in enumerate(expected):
            got_keys, got_values = _paged_kv(llm, seq, layer)
            torch.testing.assert_close(got_keys, keys, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(got_values, values, atol=1e-4, rtol=1e-4)
        bs = llm.config.block_size
        for i in range(len(seq.block_hashes)):
            block = bm.blocks[seq.block_table[i]]
            if block.hash is not None:
                assert block.token_ids == tuple(seq.token_ids[i * bs : (i + 1) * bs])
                assert bm.hash_to_block_id.get(block.hash) in (None, block.block_id)
        assert len(seq.block_hashes) <= seq.num_cached_tokens // bs
        if grammar is not None:
            fresh = seq.grammar.matcher()
            assert fresh.accept_tokens(seq.output_token_ids) == seq.num_output_tokens
            assert fresh.num_accepted == seq.matcher.num_accepted
            assert (fresh.packed_row() == seq.matcher.packed_row()).all()
        checked += 1
    return checked


@pytest.mark.parametrize("grammar", [None, {"regex": REGEX}], ids=["free", "regex"])
def test_state_after_rejections_equals_clean_run(tiny_folders, grammar):
    from transformers import AutoModelForCausalLM

    folder = tiny_folders["llama"]
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(11)
    # prompts longer than a block, repeated text, so prefix-cache blocks get committed
    prompts = [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in (5, 19, 33)]
    config = dict(block_size=8, num_kv_blocks=96, max_num_seqs=4, max_model_len=128)
    plain = LLM(folder, **config)
    outputs = plain.generate(prompts, GREEDY, grammar=grammar)
    references = [p + o.token_ids for p, o in zip(prompts, outputs, strict=True)]

    proposer = HalfOracle(references, 49152)
    llm = LLM(
        folder,
        tokenizer=plain.tokenizer,
        speculative=dict(method="custom", proposer=proposer, num_draft_tokens=3, adaptive=False),
        **config,
    )
    request_ids = [llm.add_request(p, GREEDY, grammar=grammar) for p in prompts]
    num_checked = 0
    while llm.has_unfinished_requests():
        llm.step()
        num_checked += _check_state(llm, hf, references, grammar)
    got = [llm.take_output(r).token_ids for r in request_ids]
    assert got == [o.token_ids for o in outputs]
    stats = llm.speculator.stats
    assert num_checked > 5
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    llm.block_manager.check_invariants([])


def test_separate_draft_model_folder(tiny_folders):
    """A draft model loaded from its own folder (here a copy of the target: every greedy draft
    is accepted) and a draft of another architecture (Qwen2: mostly rejected) both give
    plain greedy's tokens, without and with a grammar."""
    folder = tiny_folders["llama"]
    generator = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in (4, 12, 27)]
    config = dict(num_kv_blocks=64, max_num_seqs=4, max_model_len=128)
    plain = LLM(folder, **config)
    expected = {
        g: [o.token_ids for o in plain.generate(prompts, GREEDY, grammar=grammar)]
        for g, grammar in enumerate((None, {"regex": REGEX}))
    }
    for draft, is_same in ((folder, True), (tiny_folders["qwen2"], False)):
        spec = dict(method="draft_model", draft_model=str(draft), num_draft_tokens=3)
        llm = LLM(folder, tokenizer=plain.tokenizer, speculative=spec, **config)
        for g, grammar in enumerate((None, {"regex": REGEX})):
            got = [o.token_ids for o in llm.generate(prompts, GREEDY, grammar=grammar)]
            assert got == expected[g]
        stats = llm.speculator.stats
        assert stats.num_draft_tokens > 0 and stats.num_draft_forwards > 0
        if is_same:
            assert stats.num_accepted_tokens == stats.num_draft_tokens
        llm.block_manager.check_invariants([])
        assert not llm.speculator.draft.shadows  # finished sequences freed their drafts
        draft_bm = llm.speculator.draft.block_manager
        assert draft_bm.num_free_blocks == draft_bm.num_blocks


def test_logprobs_stop_strings_and_min_tokens_match_plain(tiny_folders):
    """Raw and processed logprobs (top-2), stop strings found inside accepted drafts, stop ids,
    min_tokens and penalties behave as without speculation (half-correct drafts)."""
    folder = tiny_folders["llama"]
    generator = torch.Generator().manual_seed(9)
    prompts = [torch.randint(3, 49152, (n,), generator=generator).tolist() for n in (6, 9, 14)]
    config = dict(num_kv_blocks=64, max_num_seqs=4, max_model_len=128)
    plain = LLM(folder, **config)
    proposer = HalfOracle([], 49152)
    spec = dict(method="custom", proposer=proposer, num_draft_tokens=4, adaptive=False)
    llm = LLM(folder, tokenizer=plain.tokenizer, speculative=spec, **config)
    free = plain.generate(prompts, SamplingParams(temperature=0, max_tokens=12))
    # stop on the text of the 7th output token of each prompt, and on a token id
    stop_text = [plain.tokenizer.decode([o.token_ids[6]]) for o in free]
    cases = [
        SamplingParams(temperature=0, max_tokens=12, logprobs=2),
        # processed logprobs (here: after the penalty) come from the verified rows too
        SamplingParams(
            temperature=0,
            max_tokens=12,
            logprobs=2,
            logprobs_mode="processed",
            repetition_penalty=1.5,
        ),
        SamplingParams(temperature=0, max_tokens=12, stop=[t for t in stop_text if t.strip()]),
        SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[free[0].token_ids[5]]),
        SamplingParams(temperature=0, max_tokens=12, min_tokens=8, repetition_penalty=1.3),
    ]
    for params in cases:
        expected = plain.generate(prompts, params)
        proposer.references = [p + e.token_ids for p, e in zip(prompts, expected, strict=True)]
        got = llm.generate(prompts, params)
        for e, g in zip(expected, got, strict=True):
            assert g.token_ids == e.token_ids
            assert g.text == e.text
            assert g.finish_reason == e.finish_reason
            if params.logprobs is not None:
                for e_entry, g_entry in zip(e.logprobs, g.logprobs, strict=True):
                    assert set(e_entry) == set(g_entry)
                    for token_id, value in e_entry.items():
                        assert abs(g_entry[token_id] - value) < 1e-4
    stats = llm.speculator.stats
    assert 0 < stats.num_accepted_tokens <= stats.num_draft_tokens


class Oracle:
    """Proposes the true continuation (every draft is accepted)."""

    def __init__(self) -> None:
        self.references: list[list[int]] = []

    def propose(self, token_ids: list[int], num_tokens: int) -> list[int]:
        for full in self.references:
            if full[: len(token_ids)] == token_ids:
                return full[len(token_ids) : len(token_ids) + num_tokens]
        return []


def test_jump_forward_tokens_ride_inside_proposals(tiny_folders):
    """Under a schema with long forced keys, forced text after an accepted draft joins the
    proposal as free drafts (no extra forward pass) and the output is plain decoding's."""
    schema = {
        "type": "object",
        "properties": {
            "alpha_beta_gamma_delta": {"type": "boolean"},
            "epsilon_zeta_eta_theta": {"type": "boolean"},
            "iota_kappa_lambda": {"type": "integer"},
        },
        "required": ["alpha_beta_gamma_delta", "epsilon_zeta_eta_theta", "iota_kappa_lambda"],
    }
    folder = tiny_folders["llama"]
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12, 13, 14]]
    config = dict(num_kv_blocks=64, max_num_seqs=4, max_model_len=128)
    params = SamplingParams(temperature=0, max_tokens=40)
    plain = LLM(folder, **config)
    expected = plain.generate(prompts, params, grammar={"json_schema": schema})
    oracle = Oracle()
    oracle.references = [p + e.token_ids for p, e in zip(prompts, expected, strict=True)]
    spec = dict(method="custom", proposer=oracle, num_draft_tokens=4)
    llm = LLM(folder, tokenizer=plain.tokenizer, speculative=spec, **config)
    got = llm.generate(prompts, params, grammar={"json_schema": schema})
    assert [g.token_ids for g in got] == [e.token_ids for e in expected]
    stats = llm.speculator.stats
    assert stats.num_forced_draft_tokens > 0
    assert stats.num_accepted_tokens == stats.num_draft_tokens
    assert llm.stats.num_steps < plain.stats.num_steps
