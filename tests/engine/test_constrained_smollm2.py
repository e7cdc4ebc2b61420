"""Grammar-constrained generation on the real SmolLM2, end to end, against oracles.

One engine runs one mixed batch (JSONSchemaBench schemas, regexes, jump-forward on and off,
unconstrained requests); the tests then check it against ``jsonschema``, ``re.fullmatch``,
the reference decoding loop over transformers' logits, and the same requests run alone.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from formcast.decoding.reference import generate_reference
from formcast.engine.llm_engine import LLM
from formcast.errors import CompileBudgetError, SchemaError
from formcast.grammar import compile_regex
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.samplers import SamplingParams

try:  # the grammar tests' oracle: exact multipleOf, OpenAPI nullable
    from tests.grammar.schema_oracle import validator
except ImportError:  # pragma: no cover - plain jsonschema with format checking

    def validator(schema):
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        return cls(schema, format_checker=cls.FORMAT_CHECKER)


DATA = Path("/work/shared/data/jsonschemabench")
if not DATA.exists():
    DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow"]
NUM_SCHEMAS = 100
MAX_SCHEMA_CHARS = 1500  # drawn from schemas whose JSON text is at most this long
MAX_PROMPT_SCHEMA_CHARS = 160  # the prompt shows the schema's start (prefill cost)
MAX_TOKENS = 48
GREEDY = SamplingParams(temperature=0, max_tokens=MAX_TOKENS)

LONG_KEY_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "customer_identification_number": {"type": "integer", "minimum": 0},
            "is_subscription_currently_active": {"type": "boolean"},
        },
        "required": ["customer_identification_number", "is_subscription_currently_active"],
    },
    {
        "type": "object",
        "properties": {
            "primary_shipping_destination_country": {"enum": ["France", "Spain", "Italy"]},
            "requires_signature_on_delivery": {"type": "boolean"},
            "number_of_packages_in_shipment": {"type": "integer", "minimum": 1, "maximum": 9},
        },
        "required": [
            "primary_shipping_destination_country",
            "requires_signature_on_delivery",
            "number_of_packages_in_shipment",
        ],
    },
]

REGEXES = [
    (r"(yes|no|maybe)", "Is the sky blue? Answer yes, no or maybe."),
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "When did the Berlin wall fall? Give the date."),
    (r"The answer is (Paris|London|Berlin)\.", "What is the capital of France?"),
    (r"[A-Z][a-z]+ [A-Z][a-z]+", "Name a famous scientist."),
    (r"\(\d{3}\) \d{3}-\d{4}", "Give me a US phone number."),
    (r"[a-z0-9._]+@[a-z]+\.(com|org|net)", "Write an email address."),
    (r"(0|[1-9][0-9]*)(\.[0-9]+)?", "What is pi?"),
    (r"#[0-9a-fA-F]{6}", "Give me a color as hex."),
    (r"\w+( \w+){2,5}\.", "Describe a cat in one short sentence."),
    (r"https?://[a-z]+\.[a-z]{2,3}(/[a-z]+)*", "Give me a website URL."),
    (r'\{"city": "[A-Z][a-z]+", "population": [1-9][0-9]{0,7}\}', "Describe a city as JSON."),
    (r"(true|false)", "Is water wet?"),
]

UNCONSTRAINED = ["Tell me a joke.", "Write a haiku about the sea."]


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _schema_prompt(schema) -> list[dict[str, str]]:
    text = json.dumps(schema)[:MAX_PROMPT_SCHEMA_CHARS]
    return _chat(f"Reply with a JSON object that matches this JSON schema: {text}")


def _bench_sample() -> list[dict]:
    pool = []
    for split in SPLITS:
        with open(DATA / f"{split}.jsonl", encoding="utf-8") as handle:
            for line in handle:
                if len(line) > 20 * MAX_SCHEMA_CHARS:
                    continue  # large rows cannot hold a small schema: skip the JSON parse
                row = json.loads(line)
                if len(json.dumps(row["schema"])) <= MAX_SCHEMA_CHARS:
                    pool.append(row)
    return random.Random(8).sample(pool, NUM_SCHEMAS)


@pytest.fixture(scope="module")
def llm(smol_folder):
    return LLM(smol_folder, max_num_seqs=128, max_model_len=512, num_kv_blocks=1400)


@pytest.fixture(scope="module")
def run(llm):
    """Everything generated in one batch: ``{name: (output, grammar, extra)}``."""
    vocab = llm.structured_output.vocab
    jobs = []  # (name, prompt, grammar, jump_forward, extra)
    refused = []
    for row in _bench_sample():
        try:
            grammar = compile_json_schema(row["schema"], vocab)
        except (SchemaError, CompileBudgetError) as exc:
            refused.append((row["id"], type(exc).__name__))
            continue
        jobs.append((f"bench:{row['id']}", _schema_prompt(row["schema"]), grammar, True, row))
    for k, schema in enumerate(LONG_KEY_SCHEMAS):
        grammar = compile_json_schema(schema, vocab)
        for jump_forward in (False, True):
            name = f"long:{k}:jf={jump_forward}"
            jobs.append((name, _schema_prompt(schema), grammar, jump_forward, schema))
    for k, (pattern, question) in enumerate(REGEXES):
        grammar = compile_regex(pattern, vocab)
        jobs.append((f"regex:{k}:jf=True", _chat(question), grammar, True, pattern))
    for k in (10,):  # forced text inside: also without jump-forward
        pattern, question = REGEXES[k]
        grammar = compile_regex(pattern, vocab)
        jobs.append((f"regex:{k}:jf=False", _chat(question), grammar, False, pattern))
    for k, text in enumerate(UNCONSTRAINED):
        jobs.append((f"free:{k}", _chat(text), None, True, None))
    request_ids = [
        llm.add_request(prompt, GREEDY, grammar=grammar, jump_forward=jump_forward)
        for _, prompt, grammar, jump_forward, _ in jobs
    ]
    while llm.has_unfinished_requests():
        llm.step()
    results = {}
    for (name, prompt, grammar, jump_forward, extra), request_id in zip(
        jobs, request_ids, strict=True
    ):
        results[name] = (llm.take_output(request_id), grammar, (prompt, jump_forward, extra))
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
    return results, refused


def test_jsonschemabench_outputs_validate_or_are_flagged(run):
    results, refused = run
    assert len(refused) <= 10, refused  # skipped and counted: recursive / ambiguous oneOf ...
    bench = {k: v for k, v in results.items() if k.startswith("bench:")}
    assert len(bench) + len(refused) == NUM_SCHEMAS
    num_complete = 0
    for name, (out, _, (_, _, row)) in bench.items():
        assert out.finish_reason in ("stop", "length"), name
        if out.finish_reason == "stop":
            assert out.is_grammar_complete, name
        if out.is_grammar_complete:
            num_complete += 1
            value = json.loads(out.text)
            errors = list(validator(row["schema"]).iter_errors(value))
            assert not errors, (name, out.text, errors[:1])
        else:
            assert out.finish_reason == "length" and len(out.token_ids) == MAX_TOKENS, name
    assert num_complete >= len(bench) // 4, num_complete  # not vacuous


def test_regex_outputs_fullmatch_or_are_flagged(run):
    results, _ = run
    regex = {k: v for k, v in results.items() if k.startswith("regex:")}
    num_complete = 0
    for name, (out, _, (_, _, pattern)) in regex.items():
        is_match = re.fullmatch(pattern, out.text) is not None
        assert out.is_grammar_complete == is_match, (name, out.text)
        if out.finish_reason == "stop":
            assert is_match, (name, out.text)
        num_complete += is_match
    assert num_complete >= len(regex) - 2


def test_jump_forward_saves_forward_passes_on_long_keys(run):
    results, _ = run
    for k, schema in enumerate(LONG_KEY_SCHEMAS):
        off, _, _ = results[f"long:{k}:jf=False"]
        on, _, _ = results[f"long:{k}:jf=True"]
        for out in (off, on):
            if out.is_grammar_complete:
                assert not list(validator(schema).iter_errors(json.loads(out.text)))
        assert off.outputs[0].num_forced_tokens == 0
        assert on.outputs[0].num_forced_tokens >= 10
        # sampled tokens = forward passes after the prompt's (jump-forward spans ride along)
        sampled_off = len(off.token_ids)
        sampled_on = len(on.token_ids) - on.outputs[0].num_forced_tokens
        assert sampled_on < sampled_off
        assert on.metrics["num_forward_passes"] < off.metrics["num_forward_passes"]


@pytest.mark.parametrize("name", ["long:0:jf=False", "long:0:jf=True", "regex:10:jf=True"])
def test_engine_equals_reference_loop(run, llm, hf_logits_fn, name):
    """Greedy engine output == decoding.reference over transformers' logits, same grammar."""
    results, _ = run
    out, grammar, (_, jump_forward, _) = results[name]
    reference = generate_reference(
        hf_logits_fn,
        out.prompt_token_ids,
        GREEDY,
        vocab_size=llm.vocab_size,
        eos_token_ids=set(llm.eos_token_ids),
        grammar=grammar,
        jump_forward=jump_forward,
        encode=llm.structured_output.encode,
    )
    assert out.token_ids == reference.token_ids
    assert out.finish_reason == reference.finish_reason
    assert out.outputs[0].num_forced_tokens == len(reference.forced_positions)


def test_mixed_batch_equals_each_request_alone(run, llm):
    results, _ = run
    for name in ["free:0", "regex:3:jf=True", "long:1:jf=True"]:
        out, grammar, (prompt, jump_forward, _) = results[name]
        alone = llm.generate([prompt], GREEDY, grammar=grammar, jump_forward=jump_forward)[0]
        assert alone.token_ids == out.token_ids, name
        assert alone.finish_reason == out.finish_reason


@pytest.fixture(scope="module")
def hf_logits_fn(smol_hf):
    """``token_ids -> (V,)`` next-token logits of transformers, with its KV cache reused."""
    import torch

    state = {"ids": [], "past": None}

    @torch.no_grad()
    def logits_fn(token_ids):
        token_ids = list(token_ids)
        cached = state["ids"]
        if state["past"] is None or token_ids[: len(cached)] != cached or token_ids == cached:
            state["ids"], state["past"], new_ids = [], None, token_ids
        else:
            new_ids = token_ids[len(cached) :]
        out = smol_hf(torch.tensor([new_ids]), past_key_values=state["past"], use_cache=True)
        state["ids"], state["past"] = token_ids, out.past_key_values
        return out.logits[0, -1]

    return logits_fn
