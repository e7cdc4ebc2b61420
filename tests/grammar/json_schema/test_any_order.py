"""``any_order=True``: object members in any order, each at most once, required ones present.

Oracles: ``jsonschema`` on every subset of the members in every order (texts written in the
value's own key order, so a fixed-order grammar would reject most of them); duplicate keys are
invalid JSON-Schema instances only as text, so they are checked apart. The structural route
(one nonterminal per set of members written) is compared mask by mask with the regex route's
DFA (exact by construction) along random walks over the real SmolLM2 vocabulary.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar import GrammarSpec
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.objects import MAX_ANY_ORDER_REFERENCES
from formcast.grammar.json_schema.structural import compile_json_schema_cfg, json_schema_to_cfg
from formcast.grammar.structural_tag import compile_structural_tag
from formcast.grammar.structural_tag.error import StructuralTagError
from tests.grammar.schema_oracle import validator

FILLS = {"a": 1, "b": "xy", "c": True, "d": [1, 2], "e": None}
TYPES = {
    "a": {"type": "integer"},
    "b": {"type": "string", "maxLength": 4},
    "c": {"type": "boolean"},
    "d": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    "e": {"type": "null"},
}


def _schema(names: str, required: str, **extra) -> dict:
    return {
        "type": "object",
        "properties": {n: TYPES[n] for n in names},
        "required": list(required),
        "additionalProperties": False,
        **extra,
    }


def _text(pairs) -> str:
    """Compact JSON of ``(key, value)`` pairs in the given order (duplicates kept)."""
    return "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}"


def _orders(names: str) -> list[list[tuple[str, object]]]:
    return [
        [(k, FILLS.get(k, 7)) for k in keys]
        for size in range(len(names) + 1)
        for keys in itertools.permutations(names, size)
    ]


@pytest.mark.parametrize(
    ("names", "required"), [("ab", ""), ("abc", "a"), ("abcd", "bd"), ("abcde", "abcde")]
)
def test_every_order_of_every_subset_against_the_oracle(names, required):
    schema = _schema(names, required)
    rx = re.compile(json_schema_to_regex(schema, any_order=True))
    fixed = re.compile(json_schema_to_regex(schema))
    oracle = validator(schema)
    seen = set()
    for pairs in _orders(names + "x"):  # "x": an undeclared key
        text = _text(pairs)
        is_valid = oracle.is_valid(json.loads(text))
        assert bool(rx.fullmatch(text)) == is_valid, text
        seen.add((is_valid, bool(fixed.fullmatch(text))))
    # valid texts the schema order rejects were accepted: the option changes the language
    assert (True, False) in seen and (False, False) in seen


def test_each_member_at_most_once():
    schema = _schema("abc", "a")
    rx = re.compile(json_schema_to_regex(schema, any_order=True))
    assert rx.fullmatch('{"a":1,"b":"xy"}')
    for text in ('{"a":1,"a":2}', '{"b":"x","a":1,"b":"y"}', '{"a":1,"c":true,"c":false}'):
        assert not rx.fullmatch(text), text


def test_extra_members_anywhere_between_declared_ones():
    schema = _schema("ab", "b", additionalProperties={"type": "integer"})
    rx = re.compile(json_schema_to_regex(schema, any_order=True))
    oracle = validator(schema)
    for text in (
        '{"x":1,"b":"s","y":2,"a":3,"z":4}',
        '{"x":1,"y":2,"b":"s"}',
        '{"b":"s","x":1}',
        '{"x":1}',
        '{"x":"no","b":"s"}',
        '{"b":"s","a":1,"a":2}',
    ):
        is_valid = oracle.is_valid(json.loads(text)) and '"a":1,"a"' not in text
        assert bool(rx.fullmatch(text)) == is_valid, text


def test_nested_objects_and_layouts():
    schema = {
        "type": "object",
        "properties": {"p": _schema("abc", "ac"), "q": {"type": "integer"}},
        "required": ["p"],
    }
    oracle = validator(schema)
    value = {"q": 3, "p": {"c": False, "a": 2, "b": "z"}}
    assert oracle.is_valid(value)
    for options, dumps in (
        ({}, json.dumps(value, separators=(",", ":"))),
        ({"whitespace": "spaced"}, json.dumps(value)),
        ({"indent": 2}, json.dumps(value, indent=2)),
    ):
        rx = json_schema_to_regex(schema, any_order=True, **options)
        assert re.fullmatch(rx, dumps), options
        assert not re.fullmatch(json_schema_to_regex(schema, **options), dumps), options


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict, list[list[tuple[str, object]]]]:
    names = draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=5, unique=True))
    required = [n for n in names if draw(st.booleans())]
    extra = draw(st.sampled_from([{}, {"additionalProperties": {"type": "integer"}}]))
    schema = _schema("".join(names), "".join(required), **extra)
    keys = st.sampled_from(["a", "b", "c", "d", "e", "x"])
    values = st.sampled_from([1, "xy", True, [1, 2], None, "toolong"])
    texts = draw(st.lists(st.lists(st.tuples(keys, values), max_size=6), min_size=1, max_size=8))
    return schema, texts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
@example(  # a repeated extra key: allowed, each value checked (found by this test in CI-like runs)
    (
        _schema("b", "", additionalProperties={"type": "integer"}),
        [[("a", 1), ("a", 1)], [("a", 1), ("a", "xy")], [("b", "s"), ("b", "t")]],
    )
)
def test_hypothesis_objects_in_any_order(case):
    schema, texts = case
    rx = re.compile(json_schema_to_regex(schema, any_order=True, strict=True))
    oracle = validator(schema)
    declared = set(schema["properties"])
    for pairs in texts:
        keys = [k for k, _ in pairs if k in declared]
        text = _text(pairs)
        # declared members at most once; a repeated extra key is allowed (the module docstring
        # of compile.py: duplicates among extra properties are not excluded), each of its
        # values checked in place of the one json.loads keeps
        is_valid = (
            len(set(keys)) == len(keys)
            and oracle.is_valid(dict(pairs))
            and all(oracle.is_valid({**dict(pairs), key: value}) for key, value in pairs)
        )
        assert bool(rx.fullmatch(text)) == is_valid, (schema, text)


@pytest.mark.parametrize(
    ("dependent", "extra"),
    [
        ({"a": ["b"]}, {}),
        ({"a": ["b", "c"], "b": ["d"]}, {}),  # a chain: a needs b, b needs d
        ({"a": ["b"], "b": ["a"]}, {"additionalProperties": {"type": "integer"}}),  # a cycle
        ({"a": ["y"]}, {}),  # an undeclared name, no extras: a can never be present
        ({"y": ["a"]}, {}),  # an undeclared trigger, no extras: never present
        ({"c": ["a"]}, {"required": ["c"]}),  # required trigger: a required too
        ({"a": ["b", "b"]}, {}),  # a name listed twice
    ],
)
def test_dependent_required_in_any_order(dependent, extra):
    schema = {**_schema("abcd", ""), "dependentRequired": dependent, **extra}
    rx = re.compile(json_schema_to_regex(schema, any_order=True))
    oracle = validator(schema)
    outcomes = set()
    for pairs in _orders("abcdx"):
        text = _text(pairs)
        is_valid = oracle.is_valid(json.loads(text))
        assert bool(rx.fullmatch(text)) == is_valid, (dependent, text)
        outcomes.add(is_valid)
    assert outcomes == {True, False}
    # legacy spelling (draft 7 dependencies with lists): the same language
    legacy = {k: v for k, v in schema.items() if k != "dependentRequired"}
    legacy |= {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": dependent}
    assert json_schema_to_regex(legacy, any_order=True) == rx.pattern


def test_refusals_name_keyword_and_pointer():
    nested = {"properties": {"o": {**_schema("ab", ""), "dependentSchemas": {"a": {}}}}}
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(nested, any_order=True)
    assert (info.value.keyword, info.value.pointer) == ("dependentSchemas", "/properties/o")
    undeclared = {
        **_schema("ab", ""),
        "additionalProperties": True,
        "dependentRequired": {"a": ["z"]},
    }
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(undeclared, any_order=True, max_any_depth=0)
    assert (info.value.keyword, info.value.pointer) == ("dependentRequired", "")
    for extra, keyword in (({"minProperties": 2}, "minProperties"),
                           ({"maxProperties": 1}, "maxProperties")):  # fmt: skip
        with pytest.raises(SchemaError) as info:
            json_schema_to_regex(_schema("abc", "", **extra), any_order=True)
        assert (info.value.keyword, info.value.pointer) == (keyword, "")
    # minProperties the required members already meet, or 1 without required ones, is fine
    rx = json_schema_to_regex(_schema("abc", "", minProperties=1), any_order=True)
    assert re.fullmatch(rx, '{"c":true}') and not re.fullmatch(rx, "{}")
    n = 20
    many = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)}}
    assert n * 2 ** (n - 1) > MAX_ANY_ORDER_REFERENCES
    with pytest.raises(SchemaError) as info:
        json_schema_to_cfg(many, any_order=True)
    assert info.value.keyword == "properties" and "20 declared properties" in str(info.value)
    with pytest.raises(SchemaError, match="any_order must be True or False"):
        json_schema_to_regex(_schema("ab", ""), any_order="yes")


def test_lenient_falls_back_to_schema_order():
    schema = _schema("abc", "", minProperties=2)
    with pytest.warns(UserWarning, match="minProperties"):
        rx = json_schema_to_regex(schema, any_order=True, lenient=True)
    assert re.fullmatch(rx, '{"a":1,"b":"xy"}') and not re.fullmatch(rx, '{"b":"xy","a":1}')


def test_structural_route_equals_the_regex_route_mask_by_mask(smollm2_tokenizer, smollm2_vocab):
    schema = _schema("abcd", "bd", additionalProperties={"type": "integer"})
    schema["dependentRequired"] = {"a": ["c"]}
    regex_grammar = compile_json_schema(
        schema, smollm2_vocab, any_order=True, route="regex", cache=False
    )
    cfg_grammar = compile_json_schema_cfg(schema, smollm2_vocab, any_order=True, cache=False)
    assert type(cfg_grammar).__name__ == "CompiledCFG"
    oracle = validator(schema)
    rng = random.Random(7)
    fills = {"a": 3, "b": "q", "c": False, "d": [4], "x": 1, "y": 22}
    for _ in range(10):
        # a valid instance in a random order: both routes' masks agree before every token of
        # it, and for a few random steps off it at random points
        keys = ["b", "d"] + [k for k in "acxy" if rng.random() < 0.5]
        rng.shuffle(keys)
        value = {k: fills[k] for k in keys}
        if not oracle.is_valid(value):  # (a without c)
            continue
        ids = smollm2_tokenizer.encode(json.dumps(value, separators=(",", ":")))
        a, b = regex_grammar.matcher(), cfg_grammar.matcher()
        for token in ids:
            assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids()), value
            if rng.random() < 0.2:
                off_a, off_b = a.fork(), b.fork()
                for _ in range(4):
                    allowed = off_a.allowed_token_ids()
                    assert np.array_equal(allowed, off_b.allowed_token_ids()), value
                    if not len(allowed) or off_a.is_accepting():
                        break
                    pick = int(rng.choice(allowed))
                    assert off_a.accept_token(pick) and off_b.accept_token(pick)
            assert a.accept_token(token) and b.accept_token(token), value
        assert a.is_accepting() and b.is_accepting()
    # valid instances in shuffled key orders walk token by token; repeats are rejected
    for value in ({"d": [], "b": "q"}, {"x": 5, "d": [1, 2], "a": 2, "b": "", "c": True}):
        keys = list(value)
        rng.shuffle(keys)
        text = json.dumps({k: value[k] for k in keys}, separators=(",", ":"))
        assert oracle.is_valid(value)
        for grammar in (regex_grammar, cfg_grammar):
            m = grammar.matcher()
            ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
            assert all(m.accept_token(t) for t in ids) and m.is_accepting(), text
    for text in ('{"b":"q","d":[1],"b":"r"}', '{"d":[1]}', '{"b":"q","d":[1],"c":1}',
                 '{"a":1,"b":"q","d":[1]}'):  # fmt: skip
        for grammar in (regex_grammar, cfg_grammar):
            m = grammar.matcher()
            ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
            assert not (all(m.accept_token(t) for t in ids) and m.is_accepting()), text


def test_structural_tag_json_schema_any_order(smollm2_vocab):
    tag = {
        "type": "structural_tag",
        "format": {"type": "json_schema", "json_schema": _schema("abc", "a"), "any_order": True},
    }
    grammar = compile_structural_tag(tag, smollm2_vocab, cache=False)
    for text, is_valid in (('{"c":true,"a":1}', True), ('{"c":true}', False),
                           ('{"a":1,"a":1}', False)):  # fmt: skip
        m = grammar.matcher()
        assert (m.accept_bytes(text.encode()) and m.is_accepting()) == is_valid, text
    tag["format"]["any_order"] = 1
    with pytest.raises(StructuralTagError, match="any_order must be true or false"):
        compile_structural_tag(tag, smollm2_vocab, cache=False)


def test_grammar_spec_keys_differ_by_the_option():
    schema = _schema("ab", "")
    assert (
        GrammarSpec.json_schema(schema).key != GrammarSpec.json_schema(schema, any_order=True).key
    )
