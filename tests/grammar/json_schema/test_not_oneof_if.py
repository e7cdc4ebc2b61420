"""``not``, overlapping ``oneOf`` and ``if``/``then``/``else``: exact languages (complement.py).

Every check compares the regex's fullmatch of each value's formcast text with jsonschema;
values are chosen on both sides of every boundary. Number complements are written without
exponent (documented in ``complement``), so the values here have exponent-free texts.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar import Vocabulary
from formcast.grammar.json_schema import complement
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from formcast.grammar.regex.combinators import literal, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import to_python_regex
from tests.grammar.schema_oracle import validator

to_regex = functools.partial(json_schema_to_regex, max_any_depth=2)

SCALARS = [None, True, False, 0, 1, -1, 2.5, "", "a", "ab", "b", "ba", "abc", [], {}, [1],
           {"a": 1}]  # fmt: skip
NUMBERS = [0, -0.0, 0.0, 1, 1.0, -1, 2, 2.5, 2.50001, 3, 3.0, 3.5, -1.5, 7, 10, 11, 100, 0.001]
STRINGS = ["", "a", "b", "ab", "ba", "abc", "xa", 'a"b', "é", "\n", "a\\", "2024-02-29", "aaaaa"]


def check(schema, values, *, strict=False, **options):
    """Every value: regex fullmatch of its formcast text <=> jsonschema validity; returns
    the number of valid and invalid values seen (both must occur: a check that can fail)."""
    rx = re.compile(to_regex(schema, strict=strict, **options))
    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for v in values:
        text = serialize(v, schema, schema)
        is_valid = oracle.is_valid(json.loads(text))
        assert bool(rx.fullmatch(text)) == is_valid, (schema, text, is_valid)
        seen[is_valid] += 1
    assert seen[True] and seen[False], (schema, seen)
    return rx


def refused(schema, keyword, pointer=""):
    with pytest.raises(SchemaError) as info:
        to_regex(schema)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer), info.value
    return info.value


# ---- not ---------------------------------------------------------------------------------------


def test_not_of_patterns_lengths_and_formats():
    check({"type": "string", "not": {"pattern": "^a"}}, STRINGS + SCALARS)
    check({"not": {"pattern": "a|b"}}, STRINGS + SCALARS)
    check({"type": "string", "maxLength": 3, "not": {"pattern": "^x"}}, STRINGS)
    check({"type": "string", "minLength": 2, "not": {"pattern": "b"}}, STRINGS)
    check({"type": "string", "not": {"format": "date"}}, STRINGS + ["2023-02-29", "2024-13-01"])
    check({"type": "string", "not": {"minLength": 2}}, STRINGS)
    check({"type": "string", "not": {"maxLength": 2, "pattern": "a"}}, STRINGS)
    check({"type": "string", "pattern": "^[ab]+$", "not": {"pattern": "aa"}},
          STRINGS + ["abab", "baab"])  # fmt: skip
    # escapes and non-ASCII: one spelling per string, so the text difference is exact
    check({"type": "string", "not": {"pattern": '["\\\\é]'}}, STRINGS)


def test_not_of_number_ranges_and_integers():
    check({"type": "number", "not": {"minimum": 3}}, NUMBERS + ["x"])
    check({"type": "integer", "not": {"minimum": 0, "maximum": 10}}, NUMBERS)
    check({"type": "number", "not": {"type": "integer"}}, NUMBERS)
    check({"type": "number", "not": {"exclusiveMaximum": 2.5, "minimum": -1}}, NUMBERS)
    check({"type": "integer", "not": {"multipleOf": 2}}, NUMBERS + [-3, -4, 9, 12])
    check({"type": "integer", "not": {"multipleOf": 3, "minimum": -50, "maximum": 50}},
          NUMBERS + [-3, -4, 9, 12, 51, 60])  # fmt: skip
    check({"type": "number", "multipleOf": 0.1, "not": {"minimum": 1}}, NUMBERS + [-0.5, 0.25])
    check({"not": {"const": 0}}, NUMBERS + SCALARS)
    check({"type": "number", "not": {"enum": [2.5, 3]}}, NUMBERS)
    check({"type": "number", "minimum": 0, "not": {"type": "integer", "maximum": 10}}, NUMBERS)


def test_number_complement_spellings_are_values():
    """Every exponent-free spelling of a kept value is kept, none of a removed one."""
    rx = re.compile(to_regex({"type": "number", "not": {"const": 3}}))
    for text in ("3", "3.0", "3.000"):
        assert rx.fullmatch(text) is None
    for text in ("3.5", "3.50", "-3", "-3.0", "0", "-0", "-0.0", "30", "0.3"):
        assert rx.fullmatch(text), text
    # exponent spellings are not written by a nontrivial number complement (module docstring)
    assert rx.fullmatch("1e2") is None and rx.fullmatch("100")
    rx = re.compile(to_regex({"type": "integer", "not": {"const": 0}}))
    for text in ("0", "-0", "0.0", "-0.00"):
        assert rx.fullmatch(text) is None
    assert rx.fullmatch("5") and rx.fullmatch("5.0") and rx.fullmatch("-10")


def test_not_of_enums_mixed_with_types():
    check({"not": {"enum": ["a", 1, None, True]}}, SCALARS + NUMBERS[:6])
    check({"type": ["string", "integer"], "not": {"enum": ["a", 2]}}, SCALARS + [2, 2.0, 3])
    check({"not": {"anyOf": [{"type": "string"}, {"const": 1}]}}, SCALARS + [1.0, 2])
    check({"not": {"const": 2.0}}, [2, 2.0, 2.5, "2", None])
    check({"enum": [1, 2, "x", None], "not": {"type": "integer", "minimum": 2}},
          [1, 2, "x", None, 3])  # fmt: skip
    check({"not": {"type": ["object", "array", "string"]}}, SCALARS)


def test_not_of_objects():
    values = [{}, {"a": 1}, {"a": 5}, {"a": "s"}, {"b": "x"}, {"a": 6, "b": "x"}, {"c": None}, 1]
    check({"type": "object", "not": {"required": ["a"]}}, values)
    check({"type": "object", "not": {"required": ["a", "b"]}}, values)
    props = {"a": {"type": "integer"}, "b": {"type": "string"}}
    check({"type": "object", "properties": props,
           "not": {"properties": {"a": {"minimum": 5}}, "required": ["a"]}}, values)  # fmt: skip
    check({"type": "object", "not": {"minProperties": 2}}, values)
    check({"type": "object", "not": {"maxProperties": 0}}, values)
    check({"not": {"type": "object", "properties": {"a": {"type": "string"}}}}, values + SCALARS)
    # a negated additionalProperties: false where no key is allowed at all
    check({"type": "object", "not": {"additionalProperties": False}}, values)


def test_not_of_enums_of_objects_and_arrays():
    values = [{}, {"a": 1}, {"a": 1.0}, {"a": 2}, {"a": 1, "b": 2}, {"b": 1}, [], [1], [1.0], [2],
              [1, 2], [2, 1], [[1]], 1, "a", None]  # fmt: skip
    check({"not": {"enum": [{"a": 1}, [1, 2], 1]}}, values, max_any_depth=1)
    check({"not": {"const": {"a": 1}}}, values, max_any_depth=1)
    check({"type": "array", "not": {"enum": [[1], [2, 1], []]}}, values, max_any_depth=1)
    # where the object may have no other key, a key outside the value is one of rest's
    closed = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "additionalProperties": False, "not": {"const": {"a": 1}}}  # fmt: skip
    check(closed, values)
    patterned = {"type": "object", "properties": {"ab": {}, "c": {}},
                 "additionalProperties": False,
                 "not": {"patternProperties": {"^a": {"type": "integer"}}}}  # fmt: skip
    check(patterned, [{}, {"ab": 1}, {"ab": "x"}, {"c": "x"}, {"ab": 2.5, "c": 1}])


def test_not_of_objects_with_bounded_nesting():
    inner = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {}}}
    schema = {"type": "object", "properties": {"p": inner},
              "not": {"properties": {"p": {"properties": {"x": {"const": 1}},
                                           "required": ["x"]}}}}  # fmt: skip
    values = [{}, {"p": {}}, {"p": {"x": 1}}, {"p": {"x": 2}}, {"p": {"x": 1, "y": [1, {"z": 2}]}},
              {"p": {"x": 3, "y": {"k": [None]}}}, {"p": {"y": []}}]  # fmt: skip
    check(schema, values)
    shallow = [v for v in values if "y" not in v.get("p", {}) or v["p"]["y"] == []]
    check(schema, shallow, max_any_depth=0)  # unconstrained values: scalars and [] / {} only


def test_not_under_strict_means_the_specification():
    """An absent additionalProperties under ``not`` is ``true`` whatever ``strict`` says: the
    complement of the strict reading would accept objects the specification rejects."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
              "not": {"properties": {"a": {"const": 1}}}}  # fmt: skip
    rx = re.compile(to_regex(schema, strict=True))
    assert rx.fullmatch('{"a":2}') and rx.fullmatch('{"a":2,"b":1}')
    assert not rx.fullmatch('{"a":1}') and not rx.fullmatch('{"a":1,"b":1}')
    assert not rx.fullmatch("{}")  # {} is valid against the negated schema
    # N = only "a" allowed, value 1: the complement has "b" (the one other declared key)
    closed = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
              "not": {"properties": {"a": {}}, "additionalProperties": False}}  # fmt: skip
    rx = re.compile(to_regex(closed, strict=True))
    assert rx.fullmatch('{"b":1}') and rx.fullmatch('{"a":1,"b":2}')
    assert not rx.fullmatch('{"a":1}') and not rx.fullmatch("{}")


def test_names_only_the_negation_declares():
    """Keys the positive schema does not declare but the negated one does are laid out after
    the declared ones, in the negated schema's order (complement module docstring); objects
    where no such key can appear (strict: no other keys) need no disjunct for it."""
    schema = {"type": "object", "properties": {"z": {"type": "string"}},
              "not": {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}  # fmt: skip
    values = [{"z": "s", "a": 3, "b": "x"}, {"a": "x"}, {"a": 1, "b": 2}, {"z": "s", "b": 2}, {}]
    rx = check(schema, values)
    assert rx.fullmatch('{"a":3,"b":"x","c":null}') and not rx.fullmatch('{"b":"x","a":3}')
    # strict: no key but "z", so every object is valid against the negated schema
    with pytest.raises(SchemaError, match="unsatisfiable"):
        to_regex(schema, strict=True)


def test_not_of_arrays():
    values = [[], [1], [-1], [1, 2], [1, -2, 3], ["a"], [1, 1], [0, 0, 0], "x"]
    check({"type": "array", "items": {"type": "integer"}, "not": {"items": {"minimum": 0}}},
          values)  # fmt: skip
    check({"type": "array", "not": {"minItems": 2}}, values)
    check({"type": "array", "not": {"maxItems": 1}}, values)
    check({"type": "array", "not": {"contains": {"const": 1}}}, values)
    check({"type": "array", "items": {"type": "integer"}, "not": {"prefixItems": [{"const": 1}]}},
          values)  # fmt: skip
    check({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "integer"},
           "not": {"prefixItems": [True, {"minimum": 0}]}}, values)  # fmt: skip


def test_nested_not_not():
    check({"not": {"not": {"type": "string", "pattern": "^a"}}}, STRINGS + SCALARS)
    check({"not": {"not": {"not": {"minimum": 2}}}}, NUMBERS + SCALARS)
    check({"type": "object", "not": {"not": {"required": ["a"]}}}, [{}, {"a": 1}, {"b": 2}])
    check({"type": "string", "not": {"not": {"not": {"pattern": "b"}}, "minLength": 2}}, STRINGS)


def test_not_with_ref_and_nested_property_not():
    schema = {"$defs": {"short": {"type": "string", "maxLength": 2}},
              "type": "object",
              "properties": {"name": {"type": "string", "not": {"$ref": "#/$defs/short"}},
                             "tag": {"not": {"enum": ["x", "y"]}}}}  # fmt: skip
    check(schema, [{"name": "ab"}, {"name": "abc"}, {"tag": "x"}, {"tag": "z"}, {"tag": 1},
                   {"name": "long", "tag": "y"}, {"name": "long", "tag": None}])  # fmt: skip


# ---- oneOf --------------------------------------------------------------------------------------


def test_overlapping_one_of_strings_numbers_objects():
    check({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]},
          STRINGS + SCALARS)  # fmt: skip
    check({"type": "number", "oneOf": [{"minimum": 0, "maximum": 10}, {"minimum": 5}]}, NUMBERS)
    check({"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.1}]},
          NUMBERS + ["x"])  # fmt: skip
    objects = {"oneOf": [{"type": "object", "required": ["a"]},
                         {"type": "object", "properties": {"b": {"type": "integer"}},
                          "required": ["b"]}]}  # fmt: skip
    check(objects, [{}, {"a": 1}, {"b": 1}, {"b": "s"}, {"a": 1, "b": 1}, {"a": 1, "b": "s"}])
    three = {"oneOf": [{"type": "integer"}, {"minimum": 2}, {"type": "string"}]}
    check(three, NUMBERS + STRINGS[:4] + [None])


def test_one_of_disjoint_branches_stay_plain():
    """Provably disjoint branches are compiled as they are (no complement in the tree)."""
    tagged = {"oneOf": [{"type": "string"}, {"type": "null"}]}
    assert to_regex(tagged) == to_regex({"anyOf": tagged["oneOf"]})


# ---- if / then / else ---------------------------------------------------------------------------


def test_if_then_else_on_a_discriminator():
    schema = {"type": "object",
              "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "string"},
                             "y": {"type": "integer"}},
              "if": {"properties": {"kind": {"const": "a"}}},
              "then": {"required": ["x"]},
              "else": {"properties": {"x": False}}}  # fmt: skip
    values = [{"kind": "a"}, {"kind": "a", "x": "s"}, {"kind": "b"}, {"kind": "b", "x": "s"},
              {"x": "s"}, {}, {"kind": "a", "x": "s", "y": 2}, {"kind": "b", "y": 1}]  # fmt: skip
    check(schema, values)
    check(schema, values, strict=True)


def test_if_then_else_with_required_and_type_conditions():
    postal = {"type": "object",
              "properties": {"country": {"type": "string"}, "postal": {"type": "string"}},
              "required": ["postal"],
              "if": {"properties": {"country": {"const": "US"}}, "required": ["country"]},
              "then": {"properties": {"postal": {"pattern": "^[0-9]{5}$"}}},
              "else": {"properties": {"postal": {"pattern": "^[A-Z]"}}}}  # fmt: skip
    check(postal, [{"country": "US", "postal": "12345"}, {"country": "US", "postal": "A1"},
                   {"country": "CA", "postal": "A1"}, {"country": "CA", "postal": "12345"},
                   {"postal": "K1"}, {"postal": "123"}])  # fmt: skip
    typed = {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}
    check(typed, SCALARS + STRINGS)
    ranged = {"type": "number", "if": {"minimum": 10}, "then": {"multipleOf": 5},
              "else": {"maximum": 2}}  # fmt: skip
    check(ranged, NUMBERS + [15, 12, 20.0])


def test_if_with_only_then_or_only_else():
    # written as "then or not if" / "if or else": the same languages as the full expansion
    ranged = {"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 5}}
    check(ranged, [0, 3, 9, 10, 12, 15, 20, 21, "x"])
    low = {"type": "integer", "if": {"maximum": 2}, "else": {"multipleOf": 3}}
    check(low, [-3, 0, 2, 3, 4, 6, 7, 9, 1.5])
    keyed = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
             "if": {"required": ["a"]}, "then": {"required": ["b"]}}  # fmt: skip
    check(keyed, [{}, {"a": 1}, {"a": 1, "b": "x"}, {"b": "x"}, {"a": "s"}])


def test_if_alone_then_without_if_and_old_drafts():
    assert to_regex({"type": "integer", "if": {"minimum": 3}}) == to_regex({"type": "integer"})
    assert to_regex({"type": "integer", "then": {"minimum": 3}}) == to_regex({"type": "integer"})
    # draft-06 has no if/then/else: unknown keywords, ignored (as jsonschema does)
    old = {"$schema": "http://json-schema.org/draft-06/schema#", "type": "integer",
           "if": {"minimum": 3}, "then": {"maximum": 1}}  # fmt: skip
    check(old, [0, 1, 3, 5, "x"])


# ---- refusals and budgets -----------------------------------------------------------------------


def test_refusals_name_keyword_and_pointer():
    refused({"type": "array", "not": {"uniqueItems": True}}, "uniqueItems", "/not")
    refused({"type": "object", "additionalProperties": True,
             "not": {"patternProperties": {"^a": {"type": "integer"}}}},
            "patternProperties", "/not")  # fmt: skip
    refused({"type": "object", "properties": {"p": {"not": {"uniqueItems": True}}}},
            "uniqueItems", "/properties/p/not")  # fmt: skip
    # a counted run of 300 characters under a complement: over the tree's nesting budget
    err = refused({"type": "string", "not": {"pattern": "^[a-z]{300}$"}}, "not")
    assert "budget" in str(err)


def test_recursive_ref_under_not_is_refused_not_looping():
    schema = {"$defs": {"t": {"type": "object", "properties": {"c": {"not": {"$ref": "#/$defs/t"}}}}},
              "$ref": "#/$defs/t"}  # fmt: skip
    with pytest.raises(SchemaError):
        to_regex(schema)


def test_lenient_drops_a_refused_complement():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rx = to_regex({"type": "array", "not": {"uniqueItems": True}}, lenient=True)
    assert any("uniqueItems" in str(w.message) for w in caught)
    assert re.fullmatch(rx, "[1,1]") and re.fullmatch(rx, "[]")


def test_text_and_number_differences_directly():
    ab = parse_regex("[ab]*")
    rx = re.compile(to_python_regex(complement.text_difference(ab, parse_regex("a*"))))
    assert rx.fullmatch("b") and rx.fullmatch("aab") and not rx.fullmatch("aa")
    assert not rx.fullmatch("")
    rx = re.compile(to_python_regex(complement.text_difference(ab, parse_regex(".*a.*"))))
    assert rx.fullmatch("bbb") and rx.fullmatch("") and not rx.fullmatch("ba")
    assert not complement.texts_meet(ab, parse_regex("c"))
    assert complement.texts_meet(ab, parse_regex("c|ba"))
    assert complement.text_difference(parse_regex("a"), parse_regex("[ab]")) is None
    quoted = seq(literal('"'), ab, literal('"'))
    tail = to_python_regex(complement.text_difference(quoted, parse_regex('"a*"'), prefix='"'))
    assert re.fullmatch(tail, 'ab"') and not re.fullmatch(tail, 'aa"')
    assert not re.fullmatch(tail, '"ab"')
    decimals = parse_regex("-?[0-9]+(?:\\.[0-9]+)?")
    rx = re.compile(to_python_regex(complement.number_difference(decimals, parse_regex("5"))))
    assert rx.fullmatch("6") and rx.fullmatch("5.5") and not rx.fullmatch("5.00")
    # an exponent literal on the removed side removes its value's plain spellings
    big = to_python_regex(complement.number_difference(parse_regex("[0-9]+"), parse_regex("1e3")))
    assert not re.fullmatch(big, "1000") and re.fullmatch(big, "1001")


# ---- Hypothesis: generated rest / negated / branch schemas ---------------------------------------

_string_leaf = st.fixed_dictionaries(
    {"type": st.just("string")},
    optional={
        "minLength": st.integers(0, 2),
        "maxLength": st.integers(1, 3),
        "pattern": st.sampled_from(["^a", "b$", "^[ab]*$", "a|c"]),
    },
)
_number_leaf = st.fixed_dictionaries(
    {"type": st.sampled_from(["integer", "number"])},
    optional={
        "minimum": st.sampled_from([-1, 0, 2, 2.5]),
        "maximum": st.sampled_from([1, 3, 10]),
        "multipleOf": st.sampled_from([2, 0.1]),
    },
)
_object_leaf = st.builds(
    lambda props, req: {
        "type": "object",
        "properties": props,
        "required": sorted(req & set(props)),
    },
    st.dictionaries(
        st.sampled_from(["a", "b"]),
        st.sampled_from([{"type": "integer"}, {"const": "x"}, {"minimum": 2}]),
        max_size=2,
    ),
    st.sets(st.sampled_from(["a", "b"])),
)
_leaf = st.one_of(
    _string_leaf,
    _number_leaf,
    _object_leaf,
    st.sampled_from(
        [
            {"type": "null"},
            {"enum": ["a", 1, None]},
            {"const": 2},
            {"type": "boolean"},
            {"enum": [{"a": 1}, [1], "x"]},
            {"type": "array", "items": {"type": "integer"}},
        ]  # fmt: skip
    ),
)
# (no integral floats: integer-typed trees write integers as integer literals, compile.py)
_POOL = [None, True, False, 0, 1, 2, 2.5, 3, 4, 10, -1, 0.3, "", "a", "b", "ab", "ba", "aa",
         "abc", "c", "x", [], [1], {}, {"a": 1}, {"a": "x"}, {"b": 2}, {"a": 3, "b": "x"},
         {"a": 2.5}, [1], ["a"], [1, 2]]  # fmt: skip


@st.composite
def _combined(draw):
    kind = draw(st.sampled_from(["not", "oneOf", "if"]))
    a, b = draw(_leaf), draw(_leaf)
    if kind == "not":
        return {**a, "not": b} if draw(st.booleans()) else {"not": b}
    if kind == "oneOf":
        return {"oneOf": [a, b]}
    return {"if": a, "then": b, "else": draw(_leaf)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_combined())
def test_generated_schemas_match_the_oracle(schema):
    try:
        rx = re.compile(to_regex(schema, strict=False))
    except SchemaError as exc:
        oracle = validator(schema)
        if "unsatisfiable" in str(exc):  # compile_json_schema's check: nothing is valid
            assert not any(oracle.is_valid(v) for v in _POOL), schema
        else:  # a documented refusal names its keyword
            assert exc.keyword is not None, exc
        return
    oracle = validator(schema)
    for v in _POOL:
        # exactness up to key order: some order of a valid object's members is accepted (a
        # name only a negated or conditional subschema constrains is laid out after the
        # declared names, not where ``serialize`` puts it), no order of an invalid one
        orders = itertools.permutations(v.items()) if isinstance(v, dict) else [None]
        texts = [serialize(v, schema, schema) if o is None else _dumps(dict(o)) for o in orders]
        is_accepted = any(rx.fullmatch(text) for text in texts)
        assert is_accepted == oracle.is_valid(v), (schema, texts)


def _dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---- token by token with the real tokenizer ------------------------------------------------------


@pytest.fixture(scope="module")
def vocab():
    from formcast.engine.models.loader import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    return tok, Vocabulary.from_tokenizer(tok)


def _walk(grammar, token_ids):
    m = grammar.matcher()
    return all(m.accept_token(t) for t in token_ids) and m.is_accepting()


WALKED = [
    ({"type": "object",
      "properties": {"kind": {"enum": ["a", "b"]}, "name": {"type": "string", "not": {"pattern": "^_"}},
                     "n": {"type": "number", "not": {"minimum": 0, "maximum": 1}}},
      "required": ["kind"],
      "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["name"]}},
     {},
     [{"kind": "a", "name": "bob"}, {"kind": "b"}, {"kind": "b", "n": 2.5}, {"kind": "a", "name": "é x"}],
     [{"kind": "a"}, {"kind": "a", "name": "_x"}, {"kind": "b", "n": 0.5}, {"kind": "c"}]),
    ({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 3}]},
     {}, ["abcd", "xyz", ""], ["abc", "a", "wxyz"]),
    # unconstrained extra members nest without bound (markers on the regex route) next to
    # the negated property
    ({"type": "object", "properties": {"a": {"type": "integer"}},
      "not": {"properties": {"a": {"const": 1}}, "required": ["a"]}},
     {"strict": False},
     [{"a": 2, "x": [[{"y": [1]}]]}, {"x": {}}],
     [{"a": 1}, {"a": 1, "x": [[[]]]}]),
    # the structural (context-free) route: the same complements inside rules
    ({"type": "object", "properties": {"v": {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
                                       "w": {"type": "string", "maxLength": 4, "not": {"pattern": "z"}}}},
     {"route": "cfg"},
     [{"v": 1}, {"v": 2.5}, {"w": "abcd"}, {"v": "s", "w": ""}],
     [{"v": 2}, {"w": "az"}, {"w": "abcde"}]),
    # recursive: the structural route by itself, a complement inside a rule
    ({"$defs": {"node": {"type": "object",
                         "properties": {"id": {"type": "integer", "not": {"const": 0}},
                                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["id"]}},
      "$ref": "#/$defs/node"},
     {},
     [{"id": 1}, {"id": 2, "kids": [{"id": -3, "kids": []}]}],
     [{"id": 0}, {"id": 1, "kids": [{"id": 0}]}]),
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(WALKED)))
def test_instances_token_by_token(vocab, i):
    tok, v = vocab
    schema, options, valid, invalid = WALKED[i]
    grammar = compile_json_schema(schema, v, **{"strict": True, **options})
    oracle = validator(schema)
    for value, expected in [(x, True) for x in valid] + [(x, False) for x in invalid]:
        text = serialize(value, schema)
        assert oracle.is_valid(json.loads(text)) == expected, text
        assert _walk(grammar, tok.encode(text, add_special_tokens=False)) == expected, text
