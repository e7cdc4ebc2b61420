"""formcast grammars in transformers' ``generate``, on the real SmolLM2.

Oracles: our engine's greedy output for the same prompt tokens (identical tokens, fp32, no
jump-forward so both sample every token), ``jsonschema`` / ``re.fullmatch`` for finished
outputs, and a fresh matcher walked over every beam and sample.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch
from transformers import LogitsProcessorList

from formcast.engine.llm_engine import LLM
from formcast.errors import RequestError
from formcast.grammar import compile_json_schema, compile_regex
from formcast.integrations.transformers import GrammarLogitsProcessor, generate
from formcast.samplers import SamplingParams

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
    },
    "required": ["name", "age", "role"],
}
CASES = [  # (prompt, grammar kind, grammar)
    ("Describe a user as JSON.", "json_schema", PERSON),
    ("Ada Lovelace, 36, runs the system.", "json_schema", PERSON),
    ("Is the sky blue?", "regex", r"(yes|no|maybe)"),
    ("When did the Berlin wall fall?", "regex", r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    ("Give me a US phone number.", "regex", r"\(\d{3}\) \d{3}-\d{4}"),
    ("Give me a color as hex.", "regex", r"#[0-9a-fA-F]{6}"),
    ("Name a fruit.", "choice", ["apple", "banana", "cherry"]),
    ("List two numbers.", "json_schema", {"type": "array", "items": {"type": "integer"}}),
]
MAX_NEW_TOKENS = 40


@pytest.fixture(scope="module")
def llm(smol_folder):
    return LLM(smol_folder, max_num_seqs=8, max_model_len=512, num_kv_blocks=200)


def _chat_ids(tokenizer, text: str) -> list[int]:
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return tokenizer.encode(chat, add_special_tokens=False)


def _walk(grammar, token_ids: list[int], eos_ids: set[int]) -> bool:
    """Every token accepted by a fresh matcher; True if the row ended (EOS), padding after."""
    matcher = grammar.matcher()
    for token_id in token_ids:
        if matcher.is_terminated():
            return True  # padding after the end
        assert matcher.accept_token(token_id), (token_ids, token_id)
    return matcher.is_terminated() or bool(set(token_ids) & eos_ids)


def test_greedy_equals_our_engine_on_eight_prompts(llm, smol_hf, smol_tokenizer):
    params = SamplingParams(temperature=0, max_tokens=MAX_NEW_TOKENS)
    eos_ids = list(llm.eos_token_ids)
    for prompt, kind, source in CASES:
        prompt_ids = _chat_ids(smol_tokenizer, prompt)
        ours = llm.generate([prompt_ids], params, grammar={kind: source}, jump_forward=False)[0]
        processor = GrammarLogitsProcessor({kind: source}, smol_tokenizer, eos_token_ids=eos_ids)
        output_ids = smol_hf.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            logits_processor=LogitsProcessorList([processor]),
            max_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            eos_token_id=eos_ids,
            pad_token_id=eos_ids[0],
        )
        theirs = output_ids[0, len(prompt_ids) :].tolist()
        if ours.finish_reason == "stop":
            theirs = theirs[: len(ours.token_ids)]  # generate's EOS is in our token ids too
        assert theirs == ours.token_ids, (prompt, smol_tokenizer.decode(theirs), ours.text)


def test_helper_returns_schema_valid_json_for_one_and_many_prompts(smol_hf, smol_tokenizer):
    text = generate(smol_hf, smol_tokenizer, "Describe a user as JSON.", PERSON)
    jsonschema.validate(json.loads(text), PERSON)
    prompts = ["A user.", "Ada Lovelace, 36, runs the system.", "A guest called Bo."]
    texts = generate(smol_hf, smol_tokenizer, prompts, PERSON)  # left-padded batch
    assert len(texts) == 3
    for text in texts:
        jsonschema.validate(json.loads(text), PERSON)
    dates = generate(smol_hf, smol_tokenizer, prompts[:2], grammar={"regex": r"\d{4}-\d{2}"})
    assert all(re.fullmatch(r"\d{4}-\d{2}", text) for text in dates), dates


@pytest.mark.parametrize("mode", ["beam", "sample"])
def test_beams_and_samples_stay_in_the_grammar(smol_hf, smol_tokenizer, mode):
    eos_ids = {smol_tokenizer.eos_token_id}
    vocab_size = smol_hf.config.vocab_size
    from formcast.grammar import Vocabulary

    vocab = Vocabulary.from_tokenizer(smol_tokenizer, vocab_size)
    grammars = [compile_json_schema(PERSON, vocab), compile_regex(r"[a-z]+( [a-z]+){0,3}", vocab)]
    prompt_ids = _chat_ids(smol_tokenizer, "Describe a user named Bo as JSON.")
    kwargs = (
        {"num_beams": 4, "num_return_sequences": 4, "do_sample": False}
        if mode == "beam"
        else {"do_sample": True, "temperature": 1.5, "top_k": 0, "num_return_sequences": 6}
    )
    num_finished = 0
    for seed, grammar in enumerate(grammars):
        torch.manual_seed(seed)
        processor = GrammarLogitsProcessor(grammar, smol_tokenizer)
        output_ids = smol_hf.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            logits_processor=LogitsProcessorList([processor]),
            max_new_tokens=MAX_NEW_TOKENS,
            pad_token_id=smol_tokenizer.eos_token_id,
            **kwargs,
        )
        for row in output_ids[:, len(prompt_ids) :].tolist():
            num_finished += _walk(grammar, row, eos_ids)
    assert num_finished >= 4  # not vacuous: some rows ended inside the grammar


def test_wrong_width_grammar_and_reuse_are_refused(smol_hf, smol_tokenizer):
    from formcast.grammar import Vocabulary

    narrow = compile_regex("a+", Vocabulary.from_tokenizer(smol_tokenizer))
    scores = torch.zeros(1, smol_hf.config.vocab_size + 64)
    with pytest.raises(RequestError, match="compiled for"):
        GrammarLogitsProcessor(narrow, smol_tokenizer)(torch.zeros(1, 3, dtype=torch.long), scores)
    processor = GrammarLogitsProcessor({"regex": "a+"}, smol_tokenizer)
    processor(torch.tensor([[1, 2, 3]]), torch.zeros(1, smol_hf.config.vocab_size))
    not_a = smol_tokenizer.encode("zzz", add_special_tokens=False)[0]
    with pytest.raises(RequestError, match="not allowed by the grammar"):
        processor(torch.tensor([[1, 2, 3, not_a]]), torch.zeros(1, smol_hf.config.vocab_size))
    with pytest.raises(RequestError, match="exactly one"):
        generate(smol_hf, smol_tokenizer, "x")
