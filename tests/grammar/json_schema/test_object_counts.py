"""``minProperties`` / ``maxProperties`` over objects with optional members, exact.

Oracle: ``jsonschema``. Every subset of the declared members (in schema order) with zero to
three extra members is written in formcast's layout; the regex must fullmatch exactly the
valid ones, and the structural path must accept exactly the same texts token by token.
"""

from __future__ import annotations

import functools
import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import CompileBudgetError, SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

_EXTRA_VALUES = ["s", 7]


def _instances(names: list[str]) -> list[dict]:
    """Every subset of ``names`` (in order) with 0..3 extra members of string or int values."""
    out = []
    for size in range(len(names) + 1):
        for chosen in itertools.combinations(names, size):
            for num_extra in range(4):
                for value in _EXTRA_VALUES:
                    obj = {name: 1 for name in chosen}
                    obj.update({f"x{k}": value for k in range(num_extra)})
                    out.append(obj)
    return out


@functools.cache
def _texts(schema_text: str) -> list[tuple[str, bool]]:
    schema = json.loads(schema_text)
    oracle = validator(schema)
    names = list(schema["properties"])
    out = []
    for obj in _instances(names):
        text = serialize(obj, schema, schema)
        out.append((text, oracle.is_valid(json.loads(text))))
    return out


@st.composite
def counted_objects(draw):
    num = draw(st.integers(1, 5))
    names = [f"p{k}" for k in range(num)]
    required = [n for n in names if draw(st.integers(0, 3)) == 0]
    additional = draw(st.sampled_from([False, True, {"type": "string"}]))
    lo = draw(st.integers(0, num + 2))
    hi = draw(st.one_of(st.none(), st.integers(lo, num + 3)))
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "required": required,
        "additionalProperties": additional,
        "minProperties": lo,
    }
    if hi is not None:
        schema["maxProperties"] = hi
    return schema


@given(schema=counted_objects())
@settings(max_examples=120, deadline=None)
def test_member_counts_with_optional_members_match_jsonschema(schema):
    texts = _texts(json.dumps(schema))
    try:
        rx = re.compile(json_schema_to_regex(schema, strict=False, max_any_depth=1))
    except SchemaError as exc:  # no object has that many members: none of ours is valid
        assert "unsatisfiable" in str(exc) and not any(v for _, v in texts), schema
        return
    for text, is_valid in texts:
        assert bool(rx.fullmatch(text)) == is_valid, (schema, text, is_valid)


def _accepts(grammar, text: str, tokenizer) -> bool:
    matcher = grammar.matcher()
    ids = tokenizer.encode(text, add_special_tokens=False)
    return all(matcher.accept_token(t) for t in ids) and matcher.is_accepting()


def test_counted_objects_on_both_routes(smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in ("a", "b", "c", "d", "e", "f")},
        "required": ["c"],
        "additionalProperties": {"type": "string"},
        "minProperties": 3,
        "maxProperties": 4,
    }
    texts = _texts(json.dumps(schema))
    assert any(v for _, v in texts) and not all(v for _, v in texts)
    for route in ("regex", "cfg"):
        grammar = compile_json_schema(schema, smollm2_vocab, strict=False, route=route, cache=False)
        for text, is_valid in texts[::7]:
            assert _accepts(grammar, text, smollm2_tokenizer) == is_valid, (route, text)


def test_the_refused_schema_of_wave_one_compiles():
    # the shape of JSONSchemaBench Github_medium o41810 (at least two of six optional
    # members), with three
    schema = {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 2,
        "properties": {n: {"type": "string"} for n in ("fileEnding", "namespace", "path")},
    }
    rx = re.compile(json_schema_to_regex(schema, strict=False))
    assert rx.fullmatch('{"fileEnding":"x","path":"y"}')
    assert not rx.fullmatch('{"path":"y"}')
    assert not rx.fullmatch("{}")


def test_large_counts_share_their_continuations(smollm2_vocab, smollm2_tokenizer):
    # written out, "at least 5 of 30" repeats members C(30, 5) ways (~37M regex characters):
    # the structural path makes each count's continuation one nonterminal instead
    names = [f"p{k}" for k in range(30)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "additionalProperties": False,
        "minProperties": 5,
        "maxProperties": 7,
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert type(grammar).__name__ == "CompiledCFG"
    oracle = validator(schema)
    for chosen in (names[:4], names[:5], names[-7:], names[::4], names[1::5], names[:8]):
        obj = {n: 1 for n in chosen}
        text = serialize(obj, schema, schema)
        is_valid = oracle.is_valid(obj)
        assert _accepts(grammar, text, smollm2_tokenizer) == is_valid, text
    with pytest.raises(CompileBudgetError):
        json_schema_to_regex(schema, strict=False)
