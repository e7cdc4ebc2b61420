"""Output layouts (compact / none / flexible / indent) on both routes, token by token.

Oracles: ``json.dumps`` with the matching separators / indent writes the texts a layout must
accept (and, for the other layouts, texts it must reject); ``jsonschema`` validates what
random walks through the masks produce.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
        "pos": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x"],
        },
        "kind": {"enum": [{"a": [1, 2]}, "k"]},
        "extra": True,
    },
    "required": ["name"],
}
VALID = [
    {"name": "a b"},
    {"name": "x", "tags": [], "pos": {"x": 1, "y": -2.5}},
    {"name": "", "tags": [1, 2, 3], "kind": {"a": [1, 2]}, "extra": {"q": [1]}},
    {"name": "n", "pos": {"x": 0}, "kind": "k", "extra": []},
]
INVALID = [{"tags": []}, {"name": "x", "tags": [1, 2, 3, 4]}, {"name": "x", "kind": {"a": [2]}}]

# layout options -> json.dumps keyword sets whose texts the layout accepts / rejects
LAYOUTS = {
    "compact": (
        {},
        [{"separators": (",", ":")}, {"separators": (", ", ": ")}],
        [{"indent": 2}, {"separators": (" ,", ":")}],
    ),
    "spaced": (
        {"whitespace": "spaced"},
        [{"separators": (", ", ": ")}],
        [{"separators": (",", ":")}, {"separators": (",", ": ")}],
    ),
    "none": ({"whitespace": "none"}, [{"separators": (",", ":")}], [{"separators": (", ", ": ")}]),
    "flexible": (
        {"whitespace": "flexible", "max_whitespace": 8},
        [{"separators": (",", ":")}, {"separators": (" , ", " : ")}, {"indent": 2}],
        [{"indent": 8}],  # a newline + 8 spaces > 8
    ),
    "indent2": ({"indent": 2}, [{"indent": 2}], [{"separators": (",", ":")}, {"indent": 4}]),
    "indent0": ({"indent": 0}, [{"indent": 0}], [{"indent": 1}]),
}


_SCALARS = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _skeleton(text: str) -> str:
    """``text`` with every string replaced by a distinct plain one and every number by 0."""
    count = iter(range(10**6))
    return _SCALARS.sub(lambda m: f'"s{next(count)}"' if m.group()[0] == '"' else "0", text)


def texts(value, dumps_options):
    """``value`` in schema property order, written by ``json.dumps(**dumps_options)``."""
    ordered = json.loads(serialize(value, SCHEMA))
    return json.dumps(ordered, ensure_ascii=False, **dumps_options)


def walk(grammar, token_ids) -> bool:
    m = grammar.matcher()
    return all(m.accept_token(t) for t in token_ids) and m.is_accepting()


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    """(layout name, route) -> grammar, compiled on first use."""
    found: dict = {}

    def get(name: str, route: str):
        if (name, route) not in found:
            options = LAYOUTS[name][0]
            if route == "cfg" and "indent" in options:
                # the structural route nests unconstrained values under indent only boundedly
                options = {**options, "max_any_depth": 2}
            found[name, route] = compile_json_schema(SCHEMA, smollm2_vocab, route=route, **options)
        return found[name, route]

    return get


@pytest.mark.parametrize("route", ["regex", "cfg"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layout_token_by_token(name, route, grammars, smollm2_tokenizer):
    _, accepted, rejected = LAYOUTS[name]
    grammar = grammars(name, route)
    oracle = validator(SCHEMA)
    for value in VALID:
        assert oracle.is_valid(value)
        for options in accepted:
            text = texts(value, options)
            assert walk(grammar, smollm2_tokenizer.encode(text, add_special_tokens=False)), text
        for options in rejected:
            text = texts(value, options)
            if any(text == texts(value, ok) for ok in accepted):
                continue  # e.g. a flat value whose texts coincide
            assert not walk(grammar, smollm2_tokenizer.encode(text, add_special_tokens=False))
    for value in INVALID:
        assert not oracle.is_valid(value)
        for options in accepted:
            text = texts(value, options)
            assert not walk(grammar, smollm2_tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("route", ["regex", "cfg"])
@pytest.mark.parametrize("name", ["compact", "spaced", "flexible", "indent2"])
def test_random_walks_parse_and_validate(name, route, grammars, smollm2_vocab):
    grammar = grammars(name, route)
    oracle = validator(SCHEMA)
    eos = np.asarray(sorted(smollm2_vocab.eos_token_ids))
    # tokens that can close a string or a container: drawn often, so walks finish
    is_closer = np.array([any(c in b for c in b'"]},') for b in smollm2_vocab.token_bytes])
    rng = np.random.default_rng(7)
    num_finished = 0
    for _ in range(5):
        m = grammar.matcher()
        ids: list[int] = []
        for _ in range(120):
            allowed = m.allowed_token_ids()
            allowed = allowed[~np.isin(allowed, eos)]
            if m.is_accepting() and (not len(allowed) or rng.random() < 0.3):
                break
            assert len(allowed), "a dead end before acceptance"
            closers = allowed[is_closer[allowed]]
            pool = closers if len(closers) and rng.random() < 0.7 else allowed
            t = int(rng.choice(pool))
            assert m.accept_token(t)
            ids.append(t)
        if not m.is_accepting():
            continue
        text = b"".join(smollm2_vocab.token_bytes[t] for t in ids).decode("utf-8")
        value = json.loads(text)
        assert oracle.is_valid(value), text
        if name == "indent2":  # the text is exactly json.dumps(indent=2) of what it parses to
            skeleton = _skeleton(text)
            assert skeleton == json.dumps(json.loads(skeleton), indent=2), text
        num_finished += 1
    assert num_finished > 0


def test_whitespace_is_bounded():
    rx = re.compile(
        json_schema_to_regex(SCHEMA, whitespace="flexible", max_whitespace=2, max_any_depth=2)
    )
    assert rx.fullmatch('{ "name" :  "a" }')
    assert not rx.fullmatch('{   "name":"a"}')
    compact = re.compile(json_schema_to_regex(SCHEMA, max_any_depth=2))
    assert compact.fullmatch('{"name": "a", "tags": [1, 2]}')
    assert not compact.fullmatch('{"name":  "a"}')
    assert not compact.fullmatch('{"name":"a" ,"tags":[]}')


@pytest.mark.parametrize(
    "options",
    [
        {"whitespace": "pretty"},
        {"whitespace": True},
        {"whitespace": -1},
        {"whitespace": "flexible", "max_whitespace": 0},
        {"whitespace": "flexible", "max_whitespace": "3"},
        {"max_whitespace": 3},
        {"whitespace": "none", "max_whitespace": 3},
        {"indent": -1},
        {"indent": "2"},
        {"indent": True},
        {"indent": 17},
        {"indent": 2, "whitespace": "flexible"},
        {"whitespace": 2, "max_whitespace": 2},
    ],
)
def test_bad_layout_options_are_refused(options, smollm2_vocab):
    with pytest.raises(SchemaError):
        json_schema_to_regex({"type": "integer"}, **options)
    with pytest.raises(SchemaError):
        compile_json_schema({"type": "integer"}, smollm2_vocab, **options)


def test_indent_with_recursion_is_refused(smollm2_vocab):
    tree = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    compile_json_schema(tree, smollm2_vocab)  # recursive: the CFG route, compact layout
    with pytest.raises(SchemaError) as info:
        compile_json_schema(tree, smollm2_vocab, indent=2)
    assert info.value.keyword == "$ref"


def test_required_names_without_a_declaration_come_after_the_declared_ones(smollm2_vocab):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["token", "name"],
    }
    # "extra" is an additional property: formcast writes those after every declared one
    value = {"extra": 1, "token": [1, {"x": None}], "age": 3, "name": "Ada"}
    text = serialize(value, schema)
    assert list(json.loads(text)) == ["name", "age", "token", "extra"]
    assert validator(schema).is_valid(value)
    for route in ("regex", "cfg"):
        grammar = compile_json_schema(schema, smollm2_vocab, strict=False, route=route)
        matcher = grammar.matcher()
        assert matcher.accept_bytes(text.encode()) and matcher.is_accepting(), route


def test_serialize_orders_pattern_property_values_and_union_branches(
    smollm2_vocab, smollm2_tokenizer
):
    """``serialize`` writes what the grammar accepts: the values of ``patternProperties``
    keys in their schema's order, and an object under a union in the order of the branch
    its keys fit (each branch is laid out in its own order)."""

    schema = {
        "$defs": {
            "job": {"type": "object", "properties": {"x": {"type": "string"},
                    "needs": {"type": "array"}}, "required": ["x"],
                    "additionalProperties": False},
            "call": {"type": "object", "properties": {"uses": {"type": "string"},
                     "needs": {"type": "array"}}, "required": ["uses"],
                     "additionalProperties": False},
        },
        "type": "object",
        "patternProperties": {"^[a-z]+$": {"oneOf": [{"$ref": "#/$defs/job"},
                                                     {"$ref": "#/$defs/call"}]}},
        "additionalProperties": False,
    }  # fmt: skip
    value = {"a": {"needs": [], "x": "1"}, "b": {"needs": ["a"], "uses": "./r.yml"}}
    text = serialize(value, schema)
    assert text == '{"a":{"x":"1","needs":[]},"b":{"uses":"./r.yml","needs":["a"]}}'
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert walk(grammar, smollm2_tokenizer.encode(text, add_special_tokens=False))
