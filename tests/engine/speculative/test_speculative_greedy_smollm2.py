"""Speculative decoding on the real SmolLM2: greedy output equals plain greedy, token for token.

16 prompts (copying tasks, where prompt lookup is accepted often, and open-ended ones), run
in one batch without and with grammars (JSON schemas with long forced keys, regexes, free
reasoning then JSON; jump-forward on), for each proposer: n-gram prompt lookup and the self-speculative draft (the
target's first layers). The oracle is the same engine without speculation; the reference
loop tests already tie that engine to transformers.
"""

from __future__ import annotations

import pytest

from formcast.engine.llm_engine import LLM
from formcast.grammar import GrammarSpec
from formcast.grammar.reasoning import ReasoningConfig
from formcast.samplers import SamplingParams

MAX_TOKENS = 16
GREEDY = SamplingParams(temperature=0, max_tokens=MAX_TOKENS)
ENGINE = dict(max_model_len=512, max_num_seqs=16, num_kv_blocks=400)

TEXT = (
    "Order 4471 was shipped on 12 March 2024 to Maria Lopez, 18 Rue des Lilas, Lyon. "
    "The parcel weighed 2.4 kg and contained two ceramic vases."
)
PROMPTS = [
    f"{TEXT}\nCopy the first sentence exactly:",
    f"{TEXT}\nWho received the order? Answer with the full name and address:",
    f"{TEXT}\nRepeat the text above word for word:",
    f"{TEXT}\nWhat was in the parcel?",
    "Count from one to twenty in words: one, two, three,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) +",
    "Repeat after me: the cat sat on the mat, the cat sat on the mat, the cat",
    "The alphabet is A B C D E F G H I J K L M N O P Q R S T U V W X Y Z. Again: A B C",
    "Write a haiku about autumn leaves.",
    "Explain why the sky is blue in one sentence.",
    "Give three tips for learning a new language.",
    "What is the capital of Japan?",
    "Translate to French: good morning, my friend.",
    "Name a famous painting and its painter.",
    "Describe a rainy day.",
    "List five fruits:",
]

SCHEMA = {
    "type": "object",
    "properties": {
        "customer_full_name": {"type": "string", "maxLength": 24},
        "shipping_destination_city": {"type": "string", "maxLength": 16},
        "is_parcel_fragile": {"type": "boolean"},
    },
    "required": ["customer_full_name", "shipping_destination_city", "is_parcel_fragile"],
}
GRAMMARS = [
    {"json_schema": SCHEMA},
    {"regex": r"[A-Z][a-z]+( [a-z]+){2,6}\."},
    {"json_schema": {"type": "array", "items": {"type": "integer"}, "maxItems": 6}},
    {"regex": r"(yes|no), because [a-z ,]{5,40}\."},
    # free thoughts, the end tag forced after 3 tokens (jump-forward), then JSON: drafts
    # cross the end tag
    GrammarSpec.reasoning(GrammarSpec.json_schema(SCHEMA), ReasoningConfig(max_tokens=3)),
]
GRAMMAR_LIST = [GRAMMARS[i % len(GRAMMARS)] for i in range(len(PROMPTS))]


@pytest.fixture(scope="module")
def plain_outputs():
    llm = LLM("smollm2-135m", **ENGINE)
    free = [o.token_ids for o in llm.generate(PROMPTS, GREEDY)]
    constrained = [o.token_ids for o in llm.generate(PROMPTS, GREEDY, grammar=GRAMMAR_LIST)]
    return free, constrained, llm.tokenizer


@pytest.mark.parametrize(
    "speculative",
    [
        dict(method="ngram", num_draft_tokens=5, max_batch_size=16),
        dict(
            method="self_draft",
            num_draft_tokens=2,
            max_batch_size=16,
            draft_num_layers=6,
            adaptive=False,  # keep drafting although this untrained draft is rarely right
        ),
    ],
    ids=["ngram", "self_draft"],
)
def test_greedy_equals_plain(plain_outputs, speculative):
    free, constrained, tokenizer = plain_outputs
    llm = LLM("smollm2-135m", tokenizer=tokenizer, speculative=speculative, **ENGINE)
    got_free = [o.token_ids for o in llm.generate(PROMPTS, GREEDY)]
    got_constrained = [o.token_ids for o in llm.generate(PROMPTS, GREEDY, grammar=GRAMMAR_LIST)]
    stats = llm.speculator.stats
    for i in range(len(PROMPTS)):
        assert got_free[i] == free[i], f"prompt {i} (unconstrained)"
        assert got_constrained[i] == constrained[i], f"prompt {i} ({GRAMMAR_LIST[i]})"
    # speculation really happened, with acceptances and rejections
    assert stats.num_verifications > 0
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    llm.block_manager.check_invariants([])
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
