"""Grammar requests through the engine's API on the tiny random Llama (real SmolLM2 vocabulary).

Mechanics, not model quality: asynchronous compilation (a slow grammar never delays an
unconstrained request; one compilation per key; compile errors), jump-forward spans against
the reference loop (KV and prefix cache stay right), streaming, forks, stop conditions,
unfinished structures and dead ends.
"""

from __future__ import annotations

import math
import re
import threading

import pytest
import torch

from formcast.decoding.reference import generate_reference
from formcast.engine.llm_engine import LLM
from formcast.errors import DeadEndError, RequestError, SchemaError
from formcast.grammar import compile_choice, compile_regex
from formcast.grammar.spec import GrammarSpec
from formcast.samplers import SamplingParams

PATTERNS = [
    r'\{"name": "[a-z]{1,6}", "is_active": (true|false), "count": [0-9]{1,3}\}',
    r"The answer is (Paris|London|Berlin)\.",
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
]


@pytest.fixture(scope="module")
def llm(tiny_folders):
    # small blocks: jump-forward spans cross block boundaries and fill prefix-cache blocks
    return LLM(tiny_folders["llama"], max_num_seqs=8, num_kv_blocks=160, block_size=4)


@pytest.fixture(scope="module")
def tiny_logits_fn(tiny_folders):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_folders["llama"], dtype=torch.float32)
    model.eval()

    @torch.no_grad()
    def logits_fn(token_ids):
        return model(torch.tensor([list(token_ids)])).logits[0, -1]

    return logits_fn


def _assert_idle(llm):
    assert not llm.has_unfinished_requests()
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks


def test_engine_equals_reference_with_and_without_jump_forward(llm, tiny_logits_fn):
    vocab = llm.structured_output.vocab
    grammars = [compile_regex(p, vocab) for p in PATTERNS]
    prompts = ["Describe a user.", "Capital of France?", "A date:"]
    params = SamplingParams(temperature=0, max_tokens=30)
    for _ in range(2):  # the second round re-reads prompt and forced-token blocks from cache
        outputs = {}
        for jump_forward in (False, True):
            outs = llm.generate(prompts, params, grammar=grammars, jump_forward=jump_forward)
            outputs[jump_forward] = outs
        for jump_forward, outs in outputs.items():
            for out, grammar, pattern in zip(outs, grammars, PATTERNS, strict=True):
                ref = generate_reference(
                    tiny_logits_fn,
                    out.prompt_token_ids,
                    params,
                    vocab_size=llm.vocab_size,
                    eos_token_ids=set(llm.eos_token_ids),
                    grammar=grammar,
                    jump_forward=jump_forward,
                    encode=llm.structured_output.encode,
                )
                assert out.token_ids == ref.token_ids, (pattern, jump_forward)
                assert out.finish_reason == ref.finish_reason
                assert out.outputs[0].num_forced_tokens == len(ref.forced_positions)
                assert out.is_grammar_complete == bool(re.fullmatch(pattern, out.text))
        assert outputs[True][0].outputs[0].num_forced_tokens >= 8  # '{"name": "' etc.
    assert llm.block_manager.num_prefix_hit_tokens > 0
    _assert_idle(llm)


LARK_LIST = r"""
start: "[" item ("," item)* "]"
item: NUMBER | "[" item ("," item)* "]"
NUMBER: /[1-9][0-9]?/
"""
RECURSIVE_SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["leaf", "node"]}, "child": {"$ref": "#"}},
    "required": ["label"],
}


def _lark_parses(text: str) -> bool:
    import lark

    try:
        lark.Lark(LARK_LIST, start="start").parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def test_context_free_grammars_equal_reference(llm, tiny_logits_fn):
    """Lark and recursive-schema grammars (CFG matchers) through the engine == reference loop."""
    import json

    from formcast.grammar.cfg.lark_frontend import compile_lark
    from formcast.grammar.json_schema.compile import compile_json_schema

    vocab = llm.structured_output.vocab
    grammars = [compile_lark(LARK_LIST, vocab), compile_json_schema(RECURSIVE_SCHEMA, vocab)]
    params = SamplingParams(temperature=0, max_tokens=24)
    for jump_forward in (False, True):
        outs = llm.generate(["List:", "Tree:"], params, grammar=grammars, jump_forward=jump_forward)
        for out, grammar in zip(outs, grammars, strict=True):
            ref = generate_reference(
                tiny_logits_fn,
                out.prompt_token_ids,
                params,
                vocab_size=llm.vocab_size,
                eos_token_ids=set(llm.eos_token_ids),
                grammar=grammar,
                jump_forward=jump_forward,
                encode=llm.structured_output.encode,
            )
            assert out.token_ids == ref.token_ids
            assert out.outputs[0].num_forced_tokens == len(ref.forced_positions)
        lark_out, tree_out = outs
        assert lark_out.is_grammar_complete == _lark_parses(lark_out.text)
        if tree_out.is_grammar_complete:
            assert json.loads(tree_out.text)["label"] in ("leaf", "node")
        else:
            assert tree_out.finish_reason == "length"
    _assert_idle(llm)


def test_slow_grammar_does_not_delay_unconstrained_request(llm):
    release = threading.Event()
    vocab = llm.structured_output.vocab

    def slow_compile(v):
        assert release.wait(timeout=120), "the test never released the compilation"
        return compile_regex(r"(red|green|blue)", v)

    spec = GrammarSpec(("slow", id(release)), slow_compile, "slow colour regex")
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    try:
        slow_id = llm.add_request("Pick a colour:", params, grammar=spec)
        free_id = llm.add_request("Hello", params)
        order = []
        while not llm.get_output(free_id).finished:
            order.extend(d.request_id for d in llm.step())
        # the unconstrained request ran to completion while the grammar was still compiling
        assert order == [free_id] * 4
        assert llm.get_output(slow_id).outputs[0].token_ids == []
        assert llm.has_unfinished_requests()
    finally:
        release.set()
    while llm.has_unfinished_requests():
        llm.step()
    slow = llm.take_output(slow_id)
    assert slow.text in ("red", "green", "blue") and slow.is_grammar_complete
    llm.take_output(free_id)
    assert vocab is llm.structured_output.vocab
    _assert_idle(llm)


def test_requests_with_the_same_grammar_share_one_compilation(llm):
    before = llm.stats
    grammar = {"regex": r"(cat|dog|bird) number [0-9]"}
    params = SamplingParams(temperature=1.0, seed=3, max_tokens=12)
    outs = llm.generate(["a", "b", "c"], params, grammar=grammar)
    assert llm.stats.since(before).num_grammar_compiles == 1
    for out in outs:
        assert re.fullmatch(r"(cat|dog|bird) number [0-9]", out.text)
        assert out.finish_reason == "stop" and out.is_grammar_complete
    _assert_idle(llm)


def test_grammar_compile_error_is_raised_and_the_call_cleaned_up(llm):
    unsatisfiable = {"type": "integer", "minimum": 5, "maximum": 1}
    with pytest.raises(SchemaError) as info:
        llm.generate(
            ["x", "y"], SamplingParams(max_tokens=4), grammar={"json_schema": unsatisfiable}
        )
    assert any("request" in note for note in getattr(info.value, "__notes__", []))
    _assert_idle(llm)
    with pytest.raises(RequestError, match="grammar must be"):
        llm.add_request("x", grammar=42)
    with pytest.raises(RequestError, match="either matcher= or grammar="):
        llm.add_request("x", grammar={"regex": "a"}, matcher=object())
    _assert_idle(llm)


def test_stream_with_jump_forward_and_forks(llm):
    pattern = PATTERNS[0]
    params = SamplingParams(temperature=1.0, seed=11, n=3, max_tokens=40, logprobs=1)
    tokens: dict[int, list[int]] = {}
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    for delta in llm.stream(["Describe a user."], params, grammar={"regex": pattern}):
        tokens.setdefault(delta.index, []).extend(delta.token_ids)
        texts[delta.index] = texts.get(delta.index, "") + delta.text
        assert len(delta.logprobs) == len(delta.token_ids)
        if delta.finished:
            reasons[delta.index] = delta.finish_reason
    assert sorted(tokens) == [0, 1, 2]
    for index in tokens:
        # forks share the jump-forward prefix '{"name": "' that was appended before the prompt ran
        assert texts[index].startswith('{"name": "')
        if reasons[index] == "stop":
            assert re.fullmatch(pattern, texts[index])
    assert len({tuple(t) for t in tokens.values()}) > 1
    _assert_idle(llm)


def test_logprobs_of_forced_tokens_are_nan(llm):
    params = SamplingParams(temperature=0, max_tokens=30, logprobs=0)
    out = llm.generate(["Q"], params, grammar={"regex": PATTERNS[0]})[0]
    forced = [e for e in out.logprobs if all(math.isnan(v) for v in e.values())]
    assert len(forced) == out.outputs[0].num_forced_tokens > 0
    assert len(out.logprobs) == len(out.token_ids)


def test_max_tokens_on_an_unfinished_structure_is_flagged(llm):
    params = SamplingParams(temperature=0, max_tokens=3)
    out = llm.generate(["x"], params, grammar={"regex": PATTERNS[0]}, jump_forward=False)[0]
    assert out.finish_reason == "length" and len(out.token_ids) == 3
    assert out.is_grammar_complete is False
    # jump-forward tokens count against max_tokens too
    out = llm.generate(["x"], params, grammar={"regex": PATTERNS[0]}, jump_forward=True)[0]
    assert out.finish_reason == "length" and len(out.token_ids) == 3
    assert out.outputs[0].num_forced_tokens >= 2 and out.is_grammar_complete is False
    free = llm.generate(["x"], params)[0]
    assert free.is_grammar_complete is None
    _assert_idle(llm)


def test_stop_string_inside_constrained_text(llm):
    pattern = r"The answer is (Paris|London|Berlin)\."
    params = SamplingParams(temperature=0, max_tokens=20, stop=("answer",))
    out = llm.generate(["Q"], params, grammar={"regex": pattern})[0]
    assert out.finish_reason == "stop" and out.outputs[0].stop_reason == "answer"
    assert out.text == "The "
    assert out.is_grammar_complete is False  # cut by the stop string: not a full match
    _assert_idle(llm)


def test_grammar_forcing_everything_finishes_without_sampling(llm):
    grammar = compile_choice(["hello world"], llm.structured_output.vocab)
    before = llm.stats
    deltas = list(llm.stream(["Say it"], SamplingParams(max_tokens=10), grammar=grammar))
    assert "".join(d.text for d in deltas) == "hello world"
    assert deltas[-1].finish_reason == "stop"
    assert llm.stats.since(before).num_steps == 0
    _assert_idle(llm)


def test_dead_end_names_the_grammar_and_position(llm):
    vocab = llm.structured_output.vocab
    prefixes = (b"yes", b"no")
    banned = {
        i: -math.inf
        for i, data in enumerate(vocab.token_bytes)
        if data and any(p.startswith(data) for p in prefixes)
    }
    params = SamplingParams(temperature=0, max_tokens=5, logit_bias=banned)
    with pytest.raises(DeadEndError, match=r"choice .*output position 0"):
        llm.generate(["Yes or no?"], params, grammar={"choice": ["yes", "no"]})
    _assert_idle(llm)


def test_min_tokens_gives_way_when_the_grammar_only_allows_the_end(llm):
    # "ab?" is complete after "a" (EOS or "b") and after "ab" (EOS only): min_tokens bans EOS
    # after "a", and yields after "ab", where ending is the only valid continuation
    for seed in range(4):
        params = SamplingParams(temperature=1.0, seed=seed, min_tokens=3, max_tokens=5)
        out = llm.generate(["Letters:"], params, grammar={"regex": "ab?"})[0]
        assert (out.text, out.finish_reason, out.is_grammar_complete) == ("ab", "stop", True)
    empty = llm.generate(
        ["Nothing:"], SamplingParams(min_tokens=1, max_tokens=1), grammar={"regex": ""}
    )[0]
    assert (empty.text, empty.finish_reason, empty.is_grammar_complete) == ("", "stop", True)
    _assert_idle(llm)


def test_grammar_for_another_vocabulary_is_refused(llm, smollm2_tokenizer):
    from formcast.grammar import Vocabulary

    other = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=llm.vocab_size + 32)
    grammar = compile_regex("abc", other)
    with pytest.raises(RequestError, match="vocab_size"):
        llm.add_request("x", grammar=grammar)
    _assert_idle(llm)


class _RecordingMatcher:
    """Wraps a real matcher; records which thread fills its mask rows."""

    def __init__(self, inner, threads: list[str]) -> None:
        self.inner, self.threads = inner, threads

    def fill_bitmask(self, bitmask, row):
        self.threads.append(threading.current_thread().name)
        self.inner.fill_bitmask(bitmask, row)

    def accept_token(self, token_id):
        return self.inner.accept_token(token_id)

    def is_terminated(self):
        return self.inner.is_terminated()

    def fork(self):
        return _RecordingMatcher(self.inner.fork(), self.threads)


def test_masks_are_filled_by_the_worker_thread(llm):
    threads: list[str] = []
    grammar = compile_regex(r"[a-z]{3,8}", llm.structured_output.vocab)
    matcher = _RecordingMatcher(grammar.matcher(), threads)
    request_id = llm.add_request("w", SamplingParams(temperature=0, max_tokens=5), matcher=matcher)
    while llm.has_unfinished_requests():
        llm.step()
    out = llm.take_output(request_id)
    assert re.fullmatch(r"[a-z]{1,8}", out.text)
    assert threads and all(name.startswith("formcast-mask") for name in threads)
    assert threading.current_thread().name not in threads
