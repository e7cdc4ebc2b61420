"""patternProperties in general: key classes (char DFAs, state elimination trees) and objects.

Oracles: ``re.search`` (ASCII flag, ``$`` as end of input) for key classes, ``jsonschema`` for
objects (regex fullmatch on both settings of ``strict``), and token-by-token walks on the real
SmolLM2 vocabulary through both routes.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar import Vocabulary
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.key_classes import KeySpace
from formcast.grammar.json_schema.values import serialize
from formcast.grammar.regex.syntax_tree import to_python_regex
from tests.grammar.schema_oracle import validator

# ECMA patterns whose meaning equals Python's with re.ASCII and `$` -> `\Z`
PATTERNS = ["^x_", "_y$", "^\\w+$", "a.*b", "^(ab|c)*$", "[0-9]{2,3}", "^$", "é"]
NAMES = ["x_a", "a_y", "x__y", "ab", "", "q"]
KEY_CHARS = 'xyab_c0é\n"\\ -'
keys = st.text(alphabet=KEY_CHARS, max_size=7)


def _search(pattern: str, key: str) -> bool:
    python = pattern[:-1] + "\\Z" if pattern.endswith("$") else pattern
    return re.search(python, key, re.ASCII) is not None


@settings(max_examples=60, deadline=None)
@given(
    chosen=st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True),
    names=st.lists(st.sampled_from(NAMES), max_size=3),
    samples=st.lists(keys, min_size=1, max_size=12),
)
def test_key_classes_partition_keys_like_re_search(chosen, names, samples):
    space = KeySpace(chosen, names, None)
    classes = space.classes()
    trees = {m: space.class_tree(m) for m in classes}
    regexes = {m: None if t is None else to_python_regex(t) for m, t in trees.items()}
    for key in samples + names:
        members = tuple(_search(p, key) for p in chosen)
        assert space.members_of(key) == members, (chosen, key)
        text = json.dumps(key, ensure_ascii=False)
        hits = [m for m, rx in regexes.items() if rx is not None and re.fullmatch(rx, text)]
        assert hits == ([] if key in names else [members]), (chosen, names, key, hits)


def test_property_names_pattern_restricts_every_class():
    space = KeySpace(["^a"], [], "b$")
    trees = {m: space.class_tree(m) for m in space.classes()}
    regexes = {m: to_python_regex(t) for m, t in trees.items() if t is not None}
    for key in ["ab", "a", "cb", "c", ""]:
        text = json.dumps(key)
        hits = [m for m, rx in regexes.items() if re.fullmatch(rx, text)]
        assert hits == ([(key.startswith("a"),)] if key.endswith("b") else []), key


SCHEMAS = [
    {"type": "object", "patternProperties": {"^x_": {"type": "integer"}, "_y$": {"type": "string"}},
     "properties": {"x_a_y": {"type": "string"}, "b": {"type": "boolean"}}},
    {"type": "object", "patternProperties": {"^x_": {"type": "integer", "minimum": 0},
     "^x_\\w": {"type": "integer", "maximum": 5}}, "additionalProperties": {"type": "null"}},
    {"type": "object", "patternProperties": {".*": {"type": "string"}},
     "properties": {"a": {"maxLength": 0}}, "required": ["a"]},
    {"type": "object", "patternProperties": {"^\\w+$": {"type": "object"}}, "minProperties": 1,
     "maxProperties": 2},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}},
     "propertyNames": {"pattern": "^[a-z_]+$"}, "additionalProperties": False},
    {"type": "object", "patternProperties": {"a": False, "b": {"const": 1}},
     "properties": {"ab": {"type": "integer"}}},
]  # fmt: skip
VALUE = st.one_of(st.none(), st.booleans(), st.integers(-2, 7), st.sampled_from(["", "s"]),
                  st.just({}), st.just({"k": [1]}))  # fmt: skip
# (no non-ASCII keys: jsonschema's Python ``\\w`` is Unicode, ECMA's is ASCII)
OBJECTS = st.dictionaries(st.sampled_from(["x_a", "x_", "a_y", "x_a_y", "b", "a", "ab", "q", "",
                                           "x b", "-", "ba", "X"]), VALUE, max_size=4)  # fmt: skip


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("i", range(len(SCHEMAS)))
@settings(max_examples=40, deadline=None)
@given(values=st.lists(OBJECTS, min_size=1, max_size=5))
def test_objects_match_jsonschema(i, strict, values):
    schema = SCHEMAS[i]
    oracle_schema = _strictified(schema) if strict else schema
    rx = _regex(i, strict)
    oracle = validator(oracle_schema)
    for v in values:
        text = serialize(v, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)


def _strictified(schema):
    """``schema`` with ``additionalProperties: false`` where strict mode assumes it."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in ("properties", "patternProperties"):
        if key in out:
            out[key] = {k: _strictified(v) for k, v in out[key].items()}
    if out.get("type") == "object" and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


_REGEX_CACHE: dict = {}


def _regex(i: int, strict: bool) -> re.Pattern:
    key = (i, strict)
    if key not in _REGEX_CACHE:
        _REGEX_CACHE[key] = re.compile(
            json_schema_to_regex(SCHEMAS[i], strict=strict, max_any_depth=2)
        )
    return _REGEX_CACHE[key]


@pytest.fixture(scope="module")
def vocab():
    from formcast.engine.models.loader import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    return tok, Vocabulary.from_tokenizer(tok)


WALKED = {"type": "object", "properties": {"id": {"type": "integer"}},
          "patternProperties": {"^x_": {"type": "string", "maxLength": 3},
                                "^\\w+$": {"type": "object", "properties": {"n": {"$ref": "#"}}}},
          "additionalProperties": {"type": "boolean"}}  # fmt: skip
WALK_VALUES = [{}, {"id": 1, "b c": True}, {"x-": False, "w": {"n": {"q": {}}}}, {"x_-": "é"},
               {"-": False, "w1": {}}, {"id": 2, "x_-": "abc", "k": {"n": {}}},
               {"x_": "a"}, {"w": 1}, {"id": "1"}, {"": 1}, {"x_-": "abcd"}, {"b c": "s"}]  # fmt: skip


@pytest.mark.parametrize("route", ["regex", "cfg"])
def test_token_walks_match_jsonschema(vocab, route):
    tok, v = vocab
    schema = WALKED if route == "cfg" else {**WALKED, "patternProperties": {
        **WALKED["patternProperties"], "^\\w+$": {"type": "object"}}}  # fmt: skip
    grammar = compile_json_schema(schema, v, strict=False, route=route, cache=False)
    oracle = validator(schema)
    for value in WALK_VALUES:
        text = serialize(value, schema, schema)
        m = grammar.matcher()
        accepted = all(m.accept_token(t) for t in tok.encode(text, add_special_tokens=False))
        assert (accepted and m.is_accepting()) == oracle.is_valid(value), (route, text)


def _refused(schema, keyword, pointer="", match=""):
    with pytest.raises(SchemaError, match=match) as info:
        json_schema_to_regex(schema, strict=False, max_any_depth=2)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer)


def test_refusals():
    obj = {"type": "object", "properties": {"o": {}}}
    _refused({**obj, "patternProperties": {"(?=a)b": {}}}, "patternProperties", "", "lookaround")
    # (a|b)*a(a|b){12}: the classic 2^13-state determinisation, over the 5000-state budget
    _refused({**obj, "patternProperties": {"[ab]*a[ab]{12}$": {}}}, "patternProperties", "",
             "over 5000")  # fmt: skip
    # a counted pattern's complement (keys for additionalProperties) nests 255 groups deep
    counted = {"type": "object", "patternProperties": {"^[a-z_]{1,255}$": {"type": "integer"}}}
    _refused({**counted, "additionalProperties": {"type": "null"}}, "patternProperties", "",
             "nested")  # fmt: skip
    nested = {"type": "object", "properties": {"o": {"patternProperties": {"^a": {}},
              "propertyNames": {"maxLength": 3}}}}  # fmt: skip
    _refused(nested, "propertyNames", "/properties/o", "bare pattern")
    with pytest.warns(UserWarning, match="propertyNames"):
        rx = json_schema_to_regex(nested, strict=False, lenient=True, max_any_depth=2)
    assert re.fullmatch(rx, '{"o":{"abcd":1}}')  # lenient: propertyNames dropped


FORMAT_PATTERNS = [
    {"type": "string", "format": "uri", "pattern": "^(https|file)://"},
    {"type": "string", "format": "date", "pattern": "-02-", "maxLength": 10},
    {"type": "string", "format": "ipv4", "pattern": "^1"},
]
URI_PARTS = st.sampled_from(["https", "http", "file", "://", ":/", "a", ".b", "/", "?q", "#f",
                             "%2", "0", "[::1]", " ", "é", "@", ":80", "-", "1", "2", "."])  # fmt: skip
DATE_PARTS = st.sampled_from(["2024", "2023", "-", "02", "29", "30", "01", "x"])


@pytest.mark.parametrize("i", range(len(FORMAT_PATTERNS)))
@settings(max_examples=40, deadline=None)
@given(pieces=st.lists(st.lists(st.one_of(URI_PARTS, DATE_PARTS), max_size=7), max_size=8))
def test_pattern_with_format_is_the_intersection(i, pieces):
    schema = FORMAT_PATTERNS[i]
    rx = _format_regex(i)
    oracle = validator(schema)
    samples = ["".join(p) for p in pieces] + ["https://a.b/c?d#e", "2024-02-29", "1.2.3.4"]
    for value in samples:
        text = json.dumps(value, ensure_ascii=False)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(value), (schema, value)


def _format_regex(i: int) -> re.Pattern:
    key = ("format", i)
    if key not in _REGEX_CACHE:
        _REGEX_CACHE[key] = re.compile(
            json_schema_to_regex(FORMAT_PATTERNS[i], strict=False, max_any_depth=2)
        )
    return _REGEX_CACHE[key]


def test_pattern_with_format_over_budget_is_refused():
    schema = {"type": "object", "properties": {
        "u": {"type": "string", "format": "uri", "pattern": "[ab]*a[ab]{12}$"}}}  # fmt: skip
    _refused(schema, "pattern", "/properties/u", "too large")


def test_counted_pattern_class_keeps_its_repetition():
    """A class equal to one pattern's language uses that pattern's regex (no 255-deep groups)."""
    schema = {"type": "object", "additionalProperties": False,
              "patternProperties": {"^[a-z_]{1,255}$": {"type": "integer"}}}  # fmt: skip
    rx = re.compile(json_schema_to_regex(schema, strict=False, max_any_depth=2))
    oracle = validator(schema)
    for value in [{"a" * 255: 1}, {"a" * 256: 1}, {"": 1}, {"ab": 1, "c_": 2}, {"ab": "1"}]:
        text = serialize(value, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(value), text


ALL_OF_PATTERNS = [
    {"allOf": [{"patternProperties": {"^x_": {"type": "integer"}}},
               {"patternProperties": {"^x_": {"minimum": 1}, "_y$": {"type": "string"}}}]},
    {"allOf": [{"patternProperties": {"^x": {"type": ["integer", "string"]}},
                "properties": {"x_a_y": {"const": 1}}},
               {"patternProperties": {"a": {"type": "integer"}}, "required": ["b"]}]},
    {"type": "object", "patternProperties": {"^\\w+$": {"type": ["null", "boolean", "integer"]}},
     "allOf": [{"patternProperties": {"^[a-z]+$": {"type": "boolean"}}}]},
    # a closed additionalProperties of a schema without patterns holds for every key it does
    # not declare, whatever pattern of another schema the key matches (the wild corpus's
    # allOf of three patternProperties beside properties + additionalProperties)
    {"type": "object", "properties": {"q": {"type": "string"}},
     "additionalProperties": {"type": ["integer", "null"]},
     "allOf": [{"patternProperties": {"^x_": {"type": ["string", "null"]}}},
               {"patternProperties": {"_y$": {"type": "integer", "minimum": 1}}}]},
    {"allOf": [{"patternProperties": {"^a": {"type": ["integer", "boolean"]}},
                "additionalProperties": {"type": "string"}},
               {"properties": {"b": {}}, "additionalProperties": {"type": ["integer", "null"]}}]},
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(ALL_OF_PATTERNS)))
@settings(max_examples=40, deadline=None)
@given(values=st.lists(OBJECTS, min_size=1, max_size=5))
def test_allof_of_several_pattern_properties(i, values):
    # every additionalProperties open: one patternProperties with all the patterns is exact
    schema = ALL_OF_PATTERNS[i]
    rx = re.compile(json_schema_to_regex(schema, strict=False, max_any_depth=2))
    oracle = validator(schema)
    for v in values:
        text = serialize(v, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)


def test_allof_of_several_pattern_properties_beside_a_closed_one_is_refused():
    schema = {"allOf": [{"patternProperties": {"^a": {}}, "additionalProperties": False},
                        {"patternProperties": {"^b": {}}}]}  # fmt: skip
    _refused(schema, "patternProperties", "", "closed additionalProperties")


def test_pattern_over_a_closed_schemas_declared_name_is_refused():
    """The merged pattern would cover ``b_`` too, which the closed schema declares (so its
    additionalProperties does not hold there)."""
    schema = {"allOf": [{"patternProperties": {"^b": {"type": "integer"}}},
                        {"properties": {"b_": {}}, "additionalProperties": False}]}  # fmt: skip
    _refused(schema, "patternProperties", "", "declared property 'b_'")
