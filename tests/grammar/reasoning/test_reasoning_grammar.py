"""ReasoningGrammar on the real SmolLM2 vocabulary: masks against a brute-force oracle (every
token checked by string search on the whole text), walks of valid and invalid outputs, the
budget to the token, rollback / fork against fresh matchers, Hypothesis over thoughts."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.bitmask import allocate_token_bitmask
from formcast.errors import GrammarError
from formcast.grammar import GrammarSpec, compile_json_schema, compile_lark, compile_regex
from formcast.grammar.reasoning import ReasoningConfig, ReasoningGrammar

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
    "required": ["a", "b"],
}
LARK = 'start: "yes" | "no" | "maybe " NUMBER\nNUMBER: /[0-9]+/'


@pytest.fixture(scope="module")
def json_answer(smollm2_vocab):
    return compile_json_schema(SCHEMA, smollm2_vocab)


@pytest.fixture(scope="module")
def lark_answer(smollm2_vocab):
    return compile_lark(LARK, smollm2_vocab)


class Oracle:
    """The language by plain string search: ``start``, thoughts in which ``end`` does not
    occur, ``end`` (its first occurrence), then an answer the answer grammar starts."""

    def __init__(self, config: ReasoningConfig, answer) -> None:
        self.start, self.end = config.start.encode(), config.end.encode()
        self.answer = answer
        self._answer_prefixes: dict[bytes, bool] = {}

    def _answer_ok(self, data: bytes) -> bool:
        found = self._answer_prefixes.get(data)
        if found is None:
            found = self._answer_prefixes[data] = self.answer.matcher().accept_bytes(data)
        return found

    def is_prefix(self, text: bytes) -> bool:
        if len(text) <= len(self.start):
            return self.start.startswith(text)
        if not text.startswith(self.start):
            return False
        body = text[len(self.start) :]
        cut = body.find(self.end)
        return cut < 0 or self._answer_ok(body[cut + len(self.end) :])

    def rest_of_tags(self, text: bytes) -> bytes:
        """What the budget forces after ``text`` (still in the reasoning)."""
        if len(text) < len(self.start):
            return self.start[len(text) :] + self.end
        body = text[len(self.start) :]
        matched = max(k for k in range(len(self.end)) if body.endswith(self.end[:k]))
        return self.end[matched:]


def _mask(matcher) -> set[int]:
    return set(matcher.allowed_token_ids().tolist())


def _oracle_mask(oracle: Oracle, vocab, prefix: bytes, is_forced: bool) -> set[int]:
    allowed = set()
    rest = oracle.rest_of_tags(prefix) if is_forced else b""
    for token_id, data in enumerate(vocab.token_bytes):
        if not data or not oracle.is_prefix(prefix + data):
            continue
        if is_forced and not (rest.startswith(data) or data.startswith(rest)):
            continue
        allowed.add(token_id)
    return allowed


CONFIGS = [
    ReasoningConfig(),
    ReasoningConfig(start="", end="</think>"),
    # an end tag with borders: "aXa" then "aXaY" (KMP failure links matter)
    ReasoningConfig(start="[[", end="aXaXaY"),
]

PREFIXES = {
    CONFIGS[0]: [b"", b"<th", b"<think>", b"<think>so </", b"<think>so </think", b"<think><</th",
                 b"<think>x</think>", b"<think>x</think>{\"a\":1"],
    CONFIGS[1]: [b"", b"hm <", b"hm </think", b"</think>"],
    CONFIGS[2]: [b"[", b"[[aXaX", b"[[aXaXa", b"[[aXaXaXa", b"[[q aXaXaY"],
}  # fmt: skip


def _check_masks(vocab, grammar: ReasoningGrammar, oracle: Oracle) -> None:
    """The mask after each of the config's prefixes equals the oracle's, token by token."""
    for prefix in PREFIXES[grammar.config]:
        matcher = grammar.matcher()
        assert matcher.accept_bytes(prefix) or not prefix, prefix
        assert _mask(matcher) == _oracle_mask(oracle, vocab, prefix, False), prefix


@pytest.mark.parametrize("config", CONFIGS, ids=["think", "opened", "borders"])
def test_masks_equal_brute_force(smollm2_vocab, json_answer, config):
    _check_masks(smollm2_vocab, ReasoningGrammar(json_answer, config), Oracle(config, json_answer))


@pytest.mark.parametrize("vocab_name", ["llama_vocab", "gemma_vocab"])
def test_masks_equal_brute_force_on_llama_and_gemma(vocab_name, request):
    """Llama 3.2 and Gemma 3 cut the tags differently (``</``, ``think``, ``>{"``, ``▁{``)."""
    vocab = request.getfixturevalue(vocab_name)
    answer = compile_json_schema(SCHEMA, vocab)
    config = CONFIGS[0]
    _check_masks(vocab, ReasoningGrammar(answer, config), Oracle(config, answer))


@pytest.mark.parametrize("config", CONFIGS, ids=["think", "opened", "borders"])
def test_budget_masks_equal_brute_force(smollm2_vocab, lark_answer, config):
    """With the budget spent, only tokens along the rest of the tags (then a valid answer
    start) are allowed, whatever part of the tags was already written."""
    grammar = ReasoningGrammar(lark_answer, ReasoningConfig(config.start, config.end, 0))
    oracle = Oracle(config, lark_answer)
    for prefix in PREFIXES[config]:
        matcher = grammar.matcher()
        if prefix and not matcher.accept_bytes(prefix):
            continue  # the answer part of the JSON prefixes is not a Lark sentence start
        if matcher.is_in_answer:
            continue
        expected = _oracle_mask(oracle, smollm2_vocab, prefix, True)
        assert _mask(matcher) == expected, prefix
        assert expected  # the tags can always be closed


def test_valid_outputs_accepted_and_invalid_rejected(smollm2_tokenizer, json_answer):
    grammar = ReasoningGrammar(json_answer, ReasoningConfig())
    validator = jsonschema.Draft202012Validator(SCHEMA)
    outputs = [
        ('<think>Let me see: a is 3, b is "x".</think>{"a":3,"b":"x"}', True),
        ('<think></think>{"a":-1,"b":"y"}', True),
        ('<think>tags like <think> and </thinking> are fine</think>{"a":0,"b":"y"}', True),
        ('<think>{"a":1,"b":"x"}</think>{"a":1,"b":"x"}', True),
        ('<think>a</think>b</think>{"a":1,"b":"x"}', False),  # the answer starts at "b"
        ('<think>ok</think>{"a":1,"b":"z"}', False),
        ('{"a":1,"b":"x"}', False),  # no reasoning block
        ("<think>never closed", False),
    ]
    for text, is_valid in outputs:
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        num = 0
        for token_id in ids:
            if token_id not in _mask(matcher):
                assert not matcher.accept_token(token_id)
                break
            assert matcher.accept_token(token_id)
            num += 1
        complete = num == len(ids) and matcher.is_accepting()
        assert complete == is_valid, text
        if is_valid:
            _, answer = ReasoningConfig().split(text)
            validator.validate(json.loads(answer))


def test_a_token_straddling_the_end_tag_and_the_answer(smollm2_vocab):
    """Tokens that finish ``</think`` and start the answer are allowed exactly when the rest
    starts the answer: ``>=`` and ``>"`` yes, ``>",`` and ``>>`` no."""
    answer = compile_regex('=[0-9]+|"[a-z]*"', smollm2_vocab)
    grammar = ReasoningGrammar(answer, ReasoningConfig())
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"<think>hm</think")
    allowed = _mask(matcher)
    straddling = [
        t for t, d in enumerate(smollm2_vocab.token_bytes) if d.startswith(b">") and len(d) > 1
    ]
    assert straddling
    for token_id in straddling:
        rest = smollm2_vocab.token_bytes[token_id][1:]
        assert (token_id in allowed) == answer.matcher().accept_bytes(rest)
    assert any(token_id in allowed for token_id in straddling)
    assert any(token_id not in allowed for token_id in straddling)


@pytest.mark.parametrize("budget", [0, 1, 5, 17])
def test_random_walks_keep_the_budget_to_the_token(smollm2_vocab, lark_answer, budget):
    """Random walks (tokens drawn from the mask, biased toward the tag's pieces): every walk
    ends in a sentence, at most ``budget`` tokens carry thoughts, and once the budget is spent
    the mask holds only tokens along the end tag."""
    config = ReasoningConfig(max_tokens=budget)
    grammar = ReasoningGrammar(lark_answer, config)
    oracle = Oracle(config, lark_answer)
    rng = random.Random(budget)
    eos = set(smollm2_vocab.eos_token_ids)
    num_start = len(config.start.encode())
    for _ in range(6):
        matcher = grammar.matcher()
        text = b""
        spans: list[tuple[int, int]] = []  # byte span of every sampled token
        for _step in range(60):
            if matcher.is_in_answer:
                break
            allowed = sorted(_mask(matcher))
            assert allowed
            if matcher.num_thought_tokens >= budget:
                rest = oracle.rest_of_tags(text)
                for token_id in allowed:
                    data = smollm2_vocab.token_bytes[token_id]
                    assert rest.startswith(data) or data.startswith(rest)
            pieces = [t for t in allowed if set(smollm2_vocab.token_bytes[t]) & set(b"</>")]
            token_id = rng.choice(pieces if pieces and rng.random() < 0.3 else allowed)
            assert matcher.accept_token(token_id)
            data = smollm2_vocab.token_bytes[token_id]
            spans.append((len(text), len(text) + len(data)))
            text += data
        if not matcher.is_in_answer:  # close the thoughts by hand (not sampled: not counted)
            rest = oracle.rest_of_tags(text)
            assert matcher.accept_bytes(rest)
            text += rest
        while not matcher.is_terminated():  # the answer: forced bytes, else EOS / shortest
            forced = matcher.forced_bytes()
            if forced:
                assert matcher.accept_bytes(forced)
                text += forced
                continue
            token_id = min(
                _mask(matcher), key=lambda t: (t not in eos, len(smollm2_vocab.token_bytes[t]))
            )
            assert matcher.accept_token(token_id)
            text += smollm2_vocab.token_bytes[token_id]
        assert matcher.is_accepting() and oracle.is_prefix(text)
        body = text[num_start:]
        thoughts_end = num_start + body.find(config.end.encode())
        assert lark_answer.matcher().accept_bytes(text[thoughts_end + len(config.end) :])
        # tokens holding a byte of the thoughts (strictly between the tags)
        num_thinking = sum(1 for lo, hi in spans if max(lo, num_start) < min(hi, thoughts_end))
        assert num_thinking <= budget


def test_rollback_and_fork_match_fresh_matchers(smollm2_tokenizer, json_answer):
    grammar = ReasoningGrammar(json_answer, ReasoningConfig(max_tokens=4))
    text = '<think>a short thought here, ok</think>{"a":12,"b":"y"}'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    matcher = grammar.matcher()
    num = matcher.accept_tokens(ids)
    assert 0 < num < len(ids)  # the budget cuts the free thought
    for back in range(num + 1):
        twin = matcher.fork()
        twin.rollback(back)
        fresh = grammar.matcher()
        assert fresh.accept_tokens(ids[: num - back]) == num - back
        assert np.array_equal(twin.allowed_token_ids(), fresh.allowed_token_ids())
        assert twin.num_thought_tokens == fresh.num_thought_tokens
        assert twin.forced_bytes() == fresh.forced_bytes()
    matcher.reset()
    assert matcher.num_accepted == 0 and matcher.forced_bytes() == b"<think>"


def test_forced_bytes_jump_the_closed_tags_into_the_answer(smollm2_vocab, json_answer):
    grammar = ReasoningGrammar(json_answer, ReasoningConfig(max_tokens=0))
    matcher = grammar.matcher()
    forced = matcher.forced_bytes()
    assert forced == b'<think></think>{"a":'
    assert matcher.accept_bytes(forced)
    assert matcher.is_in_answer and not matcher.is_accepting()
    assert matcher.accept_bytes(b'7,"b":"x"}')
    assert matcher.is_accepting()


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet='<>/thinkab {}"', max_size=24))
def test_hypothesis_thoughts(smollm2_tokenizer, json_answer, thought):
    """Any thought without the end tag is accepted, through tokens and through bytes; a
    thought holding it is rejected (the answer would start inside it)."""
    grammar = ReasoningGrammar(json_answer, ReasoningConfig())
    text = f'<think>{thought}</think>{{"a":5,"b":"y"}}'
    expected = "</think>" not in thought
    by_bytes = grammar.matcher()
    assert (by_bytes.accept_bytes(text.encode()) and by_bytes.is_accepting()) == expected
    by_tokens = grammar.matcher()
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert (by_tokens.accept_tokens(ids) == len(ids) and by_tokens.is_accepting()) == expected


def test_bad_configs_are_refused(smollm2_vocab, json_answer):
    with pytest.raises(GrammarError, match="end tag must not be empty"):
        ReasoningConfig(end="")
    with pytest.raises(GrammarError, match="non-negative integer"):
        ReasoningConfig(max_tokens=-1)
    with pytest.raises(GrammarError, match="unknown reasoning option"):
        ReasoningConfig.of({"budget": 3})
    with pytest.raises(GrammarError, match="expects True"):
        ReasoningConfig.of("yes")
    with pytest.raises(GrammarError, match="cannot be written"):
        ReasoningGrammar(json_answer, ReasoningConfig(end="\x04done"))  # no token holds 0x04


def test_spec_wraps_any_answer_and_round_trips_its_recipe(smollm2_vocab):
    config = ReasoningConfig(max_tokens=3)
    spec = GrammarSpec.reasoning(GrammarSpec.regex("[0-9]+"), config)
    assert spec.key != GrammarSpec.regex("[0-9]+").key
    rebuilt = spec.recipe.spec()
    assert rebuilt.key == spec.key
    grammar = rebuilt.compile_fn(smollm2_vocab)
    assert isinstance(grammar, ReasoningGrammar)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"<think>x</think>42") and matcher.is_accepting()


def test_fill_bitmask_writes_the_allowed_ids_on_both_paths(smollm2_vocab, json_answer):
    """A CPU bitmask of rows of exactly ``ceil(V/32)`` words takes a numpy row copy, any
    other (a wider bitmask, one 1-D row) the torch copy; both write the allowed ids, in the
    thoughts, in a forced end tag and in the answer, and leave the other rows alone."""
    grammar = ReasoningGrammar(json_answer, ReasoningConfig(max_tokens=2))
    vocab_size = smollm2_vocab.vocab_size
    num_words = (vocab_size + 31) // 32
    token_of = {data: i for i, data in enumerate(smollm2_vocab.token_bytes) if data}
    # thoughts are tokens (the budget counts them); the tags and the answer are bytes
    walks = [
        (),
        (b"<think>", b"so"),
        (b"<think>", b"so", b" far"),
        (b"<think>", b"so", b" far", b"</think>{"),
    ]
    for walk in walks:
        matcher = grammar.matcher()
        for k, data in enumerate(walk):
            assert (
                matcher.accept_token(token_of[data]) if k in (1, 2) else matcher.accept_bytes(data)
            )
        assert matcher.is_in_answer == (len(walk) == 4)
        expected = matcher.allowed_token_ids().tolist()
        prefix = b"".join(walk)
        prepared = allocate_token_bitmask(4, vocab_size)
        prepared.fill_(-1)
        wider = torch.full((2, num_words + 3), -1, dtype=torch.int32)
        one_row = torch.zeros(num_words, dtype=torch.int32)
        for bitmask, row in ((prepared, 2), (wider, 1), (one_row, 0)):
            matcher.fill_bitmask(bitmask, row)
            target = bitmask if bitmask.dim() == 1 else bitmask[row]
            bits = np.unpackbits(target.numpy().view(np.uint8), bitorder="little")
            assert np.flatnonzero(bits).tolist() == expected, (prefix, bitmask.shape)
        assert (prepared[[0, 1, 3]] == -1).all()  # other rows untouched
