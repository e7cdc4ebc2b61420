"""Token by token with the real SmolLM2 tokenizer: valid instances walk to acceptance,
invalid ones are rejected; random walks through the masks produce valid JSON."""

from __future__ import annotations

import json
import random

import pytest

from formcast.grammar import Vocabulary
from formcast.grammar.json_schema.compile import (
    compile_json_schema,
    json_schema_to_regex,  # noqa: E402
)
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

SCHEMAS = [
    {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
     "required": ["name"]},
    {"anyOf": [{"type": "number", "minimum": 1.5}, {"type": "string", "pattern": "^\\d{2}-x$"}]},
    {"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 1},
]  # fmt: skip
VALID = [
    [{"name": "Bob"}, {"name": "Ann", "age": 30, "tags": ["a", "b"]},
     {"name": "é€😀", "email": "a@b"}],
    [1.5, 2, 1e3 if False else 100.25, "12-x"],
    [["2024-02-29"], ["1999-12-31", "2000-01-01"]],
]  # fmt: skip
INVALID = [
    [{"age": 3}, {"name": "toolongname"}, {"name": "x", "age": 131}, {"name": "x", "tags": ["c"]}],
    [1.25, "1-x", -2],
    [[], ["2023-02-29"]],
]


@pytest.fixture(scope="module")
def vocab():
    from formcast.engine.models.loader import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    return tok, Vocabulary.from_tokenizer(tok)


def _walk(grammar, token_ids):
    m = grammar.matcher()
    for t in token_ids:
        if not m.accept_token(t):
            return False
    return m.is_accepting()


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_instances_token_by_token(vocab, i):
    tok, v = vocab
    schema = SCHEMAS[i]
    grammar = compile_json_schema(schema, v, strict=True)
    oracle = validator(schema)
    for value in VALID[i]:
        text = serialize(value, schema)
        assert oracle.is_valid(json.loads(text))
        assert _walk(grammar, tok.encode(text, add_special_tokens=False)), text
    for value in INVALID[i]:
        text = serialize(value, schema)
        assert not oracle.is_valid(json.loads(text))
        assert not _walk(grammar, tok.encode(text, add_special_tokens=False)), text


def test_random_walks_validate(vocab):
    tok, v = vocab
    rng = random.Random(0)
    schema = SCHEMAS[0]
    grammar = compile_json_schema(schema, v, strict=True)
    oracle = validator(schema)
    for _ in range(5):
        m = grammar.matcher()
        ids = []
        for _ in range(60):
            allowed = [t for t in m.allowed_token_ids() if t not in v.eos_token_ids]
            if m.is_accepting() and (not allowed or rng.random() < 0.3):
                break
            if not allowed:
                break
            t = rng.choice(allowed)
            assert m.accept_token(t)
            ids.append(t)
        if m.is_accepting():
            text = b"".join(v.token_bytes[t] for t in ids).decode("utf-8")
            assert oracle.is_valid(json.loads(text)), text


def test_regex_is_the_grammar_source(vocab):
    _, v = vocab
    rx = json_schema_to_regex(SCHEMAS[1])
    assert compile_json_schema(SCHEMAS[1], v).matcher() is not None and rx


def test_bench_sample_token_by_token(vocab):
    from pathlib import Path

    path = Path("/work/shared/data/jsonschemabench/Glaiveai2K.jsonl")
    if not path.exists():
        pytest.skip("JSONSchemaBench data not present")
    tok, v = vocab
    rows = [json.loads(line) for line in path.open(encoding="utf-8")][::200][:6]
    walked = 0
    for row in rows:
        schema = row["schema"]
        try:
            grammar = compile_json_schema(schema, v, strict=True)
        except ValueError:
            continue
        oracle = validator(schema)
        for test in row["tests"]:
            text = serialize(test["data"], schema)
            ids = tok.encode(text, add_special_tokens=False)
            ok = _walk(grammar, ids)
            if oracle.is_valid(json.loads(text)):
                if "additionalProperties" not in json.dumps(schema) and not ok:
                    continue  # strict mode rejects undeclared keys on purpose
                assert ok, (row["id"], text)
                walked += 1
            else:
                assert not ok, (row["id"], text)
    assert walked > 0
