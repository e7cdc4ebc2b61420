"""Routes of compile_json_schema: one DFA (regex path) or the structural CFG path.

The structural path must describe exactly the same language (modulo the documented unbounded
nesting of unconstrained values), whatever is cut into nonterminals: checked with
``jsonschema`` as the oracle on generated schemas and on large JSONSchemaBench schemas that
the one-DFA path cannot compile.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.values import serialize
from tests.grammar.json_schema.test_json_schema_hypothesis import schemas, values
from tests.grammar.schema_oracle import validator

DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "jsonschemabench"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}
TREE = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}


def accepts(grammar, text: str) -> bool:
    m = grammar.matcher()
    return m.accept_bytes(text.encode()) and m.is_accepting()


def test_auto_route_picks_the_path(smollm2_vocab):
    assert isinstance(compile_json_schema(PERSON, smollm2_vocab), CompiledGrammar)
    assert isinstance(compile_json_schema(TREE, smollm2_vocab), CompiledCFG)
    small_budget = compile_json_schema(PERSON, smollm2_vocab, regex_route_chars=50)
    assert isinstance(small_budget, CompiledCFG)
    assert isinstance(compile_json_schema(PERSON, smollm2_vocab, route="cfg"), CompiledCFG)
    with pytest.raises(SchemaError) as info:
        compile_json_schema(TREE, smollm2_vocab, route="regex")
    assert info.value.keyword == "$ref"
    with pytest.raises(SchemaError):
        compile_json_schema(PERSON, smollm2_vocab, route="dfa")


def test_auto_route_stops_building_a_regex_of_many_repeated_references(smollm2_vocab):
    from formcast.errors import CompileBudgetError
    from formcast.grammar.json_schema.compile import REGEX_ROUTE_BUILT_FACTOR, marked_schema_tree

    # one definition used from 12 places: every use counts the definition's sub-results again
    # (compiled once, shared), so they add up to ~12x its regex size while each stays under
    # the size bound
    item = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(8)}}
    schema = {
        "$defs": {"item": item},
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/$defs/item"} for i in range(12)},
    }
    size = marked_schema_tree(schema).num_chars
    one_item = marked_schema_tree(item).num_chars
    limit = 2 * one_item  # the whole tree is ~12 items: over a built bound of 3 x 2 items
    assert size > REGEX_ROUTE_BUILT_FACTOR * limit
    with pytest.raises(CompileBudgetError, match="characters of sub-results"):
        marked_schema_tree(schema, max_regex_chars=size, max_built_chars=3 * limit)
    grammar = compile_json_schema(schema, smollm2_vocab, regex_route_chars=limit)
    assert isinstance(grammar, CompiledCFG)
    instance = {"p0": {"k0": 1, "k7": -2}, "p11": {}}
    assert accepts(grammar, serialize(instance, schema))
    assert not accepts(grammar, serialize({"p0": {"k0": "x"}}, schema))


def test_auto_route_stops_at_the_first_part_with_a_large_count(smollm2_vocab):
    from formcast.errors import CompileBudgetError
    from formcast.grammar.json_schema.compile import REGEX_ROUTE_MAX_COUNT, marked_schema_tree

    long_text = {"type": "string", "maxLength": REGEX_ROUTE_MAX_COUNT + 1}
    schema = {
        "type": "object",
        "properties": {"note": long_text, "tags": {"type": "array", "items": PERSON}},
        "required": ["note"],
    }
    # raised at the part that holds the count, before its siblings and parents are built
    with pytest.raises(CompileBudgetError, match="over 256 .at '/properties/note'."):
        marked_schema_tree(schema, max_count=REGEX_ROUTE_MAX_COUNT)
    at_bound = {**schema, "properties": {"note": {**long_text, "maxLength": 256}}}
    assert marked_schema_tree(at_bound, max_count=REGEX_ROUTE_MAX_COUNT) is not None
    assert isinstance(compile_json_schema(at_bound, smollm2_vocab), CompiledGrammar)
    # a count the automaton would have to hold (minLength) takes the structural path; a
    # plain maxLength alone stays on the regex route, counted by the matcher
    # (test_plain_string_guard)
    at_least = {
        **schema,
        "properties": {**schema["properties"], "note": {"type": "string", "minLength": 257}},
    }
    grammar = compile_json_schema(at_least, smollm2_vocab)
    assert isinstance(grammar, CompiledCFG)
    assert accepts(grammar, serialize({"note": "x" * 257, "tags": []}, at_least))
    assert not accepts(grammar, serialize({"note": "x" * 256}, at_least))
    counted = compile_json_schema(schema, smollm2_vocab)
    assert isinstance(counted, UniqueItemsGrammar)
    assert accepts(counted, serialize({"note": "x" * 257, "tags": []}, schema))
    assert not accepts(counted, serialize({"note": "x" * 258}, schema))
    regex_route = compile_json_schema(schema, smollm2_vocab, route="regex")  # no count bound
    assert accepts(regex_route, serialize({"note": "x" * 257}, schema))


def test_auto_route_gives_up_a_large_automaton(smollm2_vocab, monkeypatch):
    """Past ``AUTO_ROUTE_MAX_STATES`` DFA states the subset construction stops and the auto
    route compiles the structural path (bound lowered here: the real one takes a 0.2 s
    schema); ``route="regex"`` keeps the default bound. Both against jsonschema."""
    import formcast.grammar.json_schema.compile as schema_compile

    schema = {
        "type": "array",
        "maxItems": 3,
        "items": {"anyOf": [PERSON, {"type": "integer", "minimum": -5, "maximum": 99}]},
    }
    assert isinstance(compile_json_schema(schema, smollm2_vocab, cache=False), CompiledGrammar)
    monkeypatch.setattr(schema_compile, "AUTO_ROUTE_MAX_STATES", 20)
    auto = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(auto, CompiledCFG)
    regex = compile_json_schema(schema, smollm2_vocab, cache=False, route="regex")
    assert isinstance(regex, CompiledGrammar) and regex.dfa.num_states > 20
    oracle = validator(schema)
    values = [[], [{"name": "a"}, 7], [{"name": "b", "age": 3}, -5, 99], [1, 2, 3, 4], [100]]
    values += [[{"age": 1}], [{"name": "c", "age": -1}], ["x"], [{"name": "d"}] * 3]
    for value in values:
        text = json.dumps(value, separators=(",", ":"))
        assert accepts(auto, text) == accepts(regex, text) == oracle.is_valid(value), value


def test_unconstrained_values_nest_without_bound_on_the_structural_path(smollm2_vocab):
    schema = {"type": "object", "properties": {"meta": {}}}
    deep = {"meta": {"a": [{"b": [[{"c": None}]]}]}}
    text = serialize(deep, schema)
    assert validator(schema).is_valid(deep)
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg", strict=False)
    assert accepts(grammar, text)
    regex = json_schema_to_regex(schema, strict=False, max_any_depth=2)
    assert not re.fullmatch(regex, text)  # the regex path's documented bound


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schema=schemas,
    instances=st.lists(values, min_size=1, max_size=5),
    cut_chars=st.sampled_from([1, 40, 2000]),
)
def test_structural_path_matches_iff_valid(smollm2_vocab, schema, instances, cut_chars):
    try:
        grammar = compile_json_schema_cfg(
            schema, smollm2_vocab, strict=False, cut_chars=cut_chars, cache=False
        )
    except SchemaError as exc:
        if exc.keyword is not None:
            return  # a refusal (counted by the keyword tests), not a wrong language
        grammar = None  # unsatisfiable: nothing may be accepted
    oracle = validator(schema)
    for value in instances:
        text = serialize(value, schema, schema)
        is_valid = oracle.is_valid(json.loads(text))
        assert (grammar is not None and accepts(grammar, text)) == is_valid, (schema, text)


@pytest.mark.parametrize("row_id", ["Kubernetes---kb_0_Normalized", "Snowplow---sp_386_Normalized"])
def test_large_bench_schemas_token_by_token(row_id, smollm2_vocab, smollm2_tokenizer):
    """Large schemas (kb_0's single regex is 1.6 MB) on the structural path, walked."""
    split = row_id.split("---")[0]
    path = DATA / f"{split}.jsonl"
    if not path.exists():
        pytest.skip("JSONSchemaBench data not present")
    row = next(r for r in map(json.loads, path.open(encoding="utf-8")) if r["id"] == row_id)
    schema = row["schema"]
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, route="cfg", cache=False)
    oracle = validator(schema)
    num_valid = 0
    for test in row["tests"]:
        text = serialize(test["data"], schema, schema)
        m = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        accepted = m.accept_tokens(ids) == len(ids) and m.is_accepting()
        is_valid = oracle.is_valid(json.loads(text))
        assert accepted == is_valid, (row_id, text)
        num_valid += is_valid
    assert num_valid > 0


def test_long_strings_are_chunked_exactly(smollm2_vocab):
    """maxLength over the chunk size: full chunks + one shorter chunk, counted in characters."""
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 70, "maxLength": 200}},
        "required": ["s"],
    }
    grammar = compile_json_schema(schema, smollm2_vocab, route="cfg")
    oracle = validator(schema)
    for n in (0, 1, 63, 64, 69, 70, 127, 128, 129, 192, 199, 200, 201, 256):
        for unit in ("a", "é", "\n", "\u0001", '"'):
            value = {"s": (unit * n)[:n]}
            text = serialize(value, schema)
            assert accepts(grammar, text) == oracle.is_valid(value), (n, unit)
    mixed = {"s": "x\u00e9\n\\" * 50}  # 200 characters of four kinds
    assert accepts(grammar, serialize(mixed, schema)) and oracle.is_valid(mixed)
    huge = {"type": "string", "maxLength": 4096}
    assert isinstance(compile_json_schema(huge, smollm2_vocab, route="cfg"), CompiledCFG)
    # (the auto route keeps the regex automaton and counts the bound: test_plain_string_guard)
    assert isinstance(compile_json_schema(huge, smollm2_vocab), UniqueItemsGrammar)
