"""One test per keyword: exact languages checked against jsonschema, refusals with pointer."""

from __future__ import annotations

import functools
import json
import re
import warnings

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema import compile as json_schema
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

# one plain regex per schema (re.fullmatch is the oracle's partner here): unconstrained values
# bounded to 2 nested containers (the test values nest at most 1 deep); the unbounded default
# is tested in test_any_value_frames.py
json_schema_to_regex = functools.partial(json_schema.json_schema_to_regex, max_any_depth=2)


def check(schema, values, *, strict=False, whitespace=None):
    """Every value: regex fullmatch of its formcast text <=> jsonschema validity."""
    rx = re.compile(json_schema_to_regex(schema, strict=strict, whitespace=whitespace))
    oracle = validator(schema)
    for v in values:
        text = serialize(v, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)
    return rx


def refused(schema, keyword, pointer=""):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema)
    assert info.value.keyword == keyword
    assert info.value.pointer == pointer
    return info.value


SCALARS = [None, True, False, 0, 1, -1, 2.5, "", "a", "ab", "abc", [], {}, [1], {"a": 1}]


def test_type_and_type_arrays():
    check({"type": "integer"}, SCALARS + [10**30, -7])
    check({"type": ["string", "null"]}, SCALARS)
    check({"type": "number"}, SCALARS + [1e300, -0.5])
    check({"type": "boolean"}, SCALARS)


def test_enum_and_const():
    check({"enum": ["a", 1, None, [1, 2], {"x": "y"}]}, SCALARS + [[1, 2], {"x": "y"}])
    check({"const": "abc"}, SCALARS)
    check({"type": "string", "enum": ["a", 1, "abc"], "maxLength": 2}, SCALARS)


def test_properties_required_additional():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
        "required": ["b"],
    }
    values = [{"b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": None}, {"a": 1}, {}]
    values += [{"b": "x", "z": 1}, {"b": 1}]
    check(schema, values)
    strict_rx = re.compile(json_schema_to_regex(schema))  # strict: absent == false
    assert not strict_rx.fullmatch('{"b":"x","z":1}') and strict_rx.fullmatch('{"b":"x"}')
    rx = check(
        {**schema, "additionalProperties": {"type": "boolean"}}, values + [{"b": "", "q": True}]
    )
    assert rx.fullmatch('{"b":"x","a":true}') is None  # extra key may not repeat a declared one
    check({**schema, "additionalProperties": True}, values, strict=False)


def test_pattern_properties_and_property_names():
    schema = {"type": "object", "patternProperties": {"^x_": {"type": "integer"}},
              "additionalProperties": False}  # fmt: skip
    check(schema, [{}, {"x_a": 1}, {"x_a": "s"}, {"y": 1}, {"x_a": 1, "x_b": 2}])
    names = {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": True}
    check(names, [{}, {"ab": 1}, {"abc": 1}])
    # an unsatisfiable propertyNames admits no key at all, declared or extra
    no_keys = {"type": "object", "properties": {"a": {"type": "integer"}},
               "propertyNames": False, "additionalProperties": True}  # fmt: skip
    check(no_keys, [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}])


def test_min_max_properties():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1}
    check(schema, [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}], strict=True)
    extra = {"type": "object", "additionalProperties": {"type": "integer"},
             "minProperties": 1, "maxProperties": 2}  # fmt: skip
    check(extra, [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}])
    # counts with optional members: exact (objects._counted_members; more in test_object_counts)
    two = {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 2,
           "additionalProperties": True}  # fmt: skip
    check(two, [{}, {"a": 1}, {"z": 1}, {"a": 1, "b": 2}, {"b": 2, "z": 3}, {"z": 1, "y": 2}])


def test_min_max_properties_zero_or_one_member():
    """minProperties <= 1 / maxProperties <= 1 with optional and extra members are exact."""
    props = {"a": {"type": "integer"}, "b": {"type": "string"}}
    values = [{}, {"a": 1}, {"b": "s"}, {"z": 2}, {"a": 1, "b": "s"}, {"a": 1, "z": 2},
              {"z": 1, "y": True}, {"a": "x"}]  # fmt: skip
    for counts in ({"minProperties": 1}, {"maxProperties": 1}, {"maxProperties": 0},
                   {"minProperties": 1, "maxProperties": 1}):  # fmt: skip
        for required in ([], ["a"]):
            for extra in ({}, {"additionalProperties": {"type": "integer"}}):
                schema = {"type": "object", "properties": props, "required": required,
                          **extra, **counts}  # fmt: skip
                if required and counts.get("maxProperties") == 0:
                    refused(schema, None)  # unsatisfiable
                    continue
                check(schema, values)


def test_items_prefix_items_counts():
    check({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
          [[], [1], [1, 2, 3], [1, 2, 3, 4], ["a"], [1, "a"]])  # fmt: skip
    prefix = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
              "items": False, "minItems": 1}  # fmt: skip
    check(prefix, [[], ["a"], ["a", 1], ["a", 1, 2], [1], ["a", "b"]])
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
              "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}}  # fmt: skip
    check(draft7, [[], ["a"], ["a", True, False], ["a", 1], [True]])


def test_unique_items():
    check({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
          [[], ["a"], ["a", "b"], ["a", "a"], ["c", "b", "a"], ["a", "b", "a"]])  # fmt: skip
    refused({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems")


def test_contains():
    schema = {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5},
              "minContains": 2}  # fmt: skip
    check(schema, [[], [5], [5, 6], [1, 5, 2, 9], [1, 2], [5, 1]])
    refused({"type": "array", "contains": {"type": "integer"}, "maxContains": 2}, "maxContains")


def test_string_lengths_count_characters():
    schema = {"type": "string", "minLength": 2, "maxLength": 3}
    check(schema, ["", "a", "ab", "abc", "abcd", "é€", "😀😀", 'a"', "\n\t", "a\\b\x01"])


def test_pattern_unanchored_means_contains():
    check({"type": "string", "pattern": "b+c"}, ["", "bc", "abbcd", "ac", "xbcx"])
    check({"type": "string", "pattern": "^a|z$"}, ["a", "ab", "xz", "za", "b"])
    check({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}, ["", "ab", "abcd", "A"])
    refused({"type": "string", "pattern": "(?=a)a"}, "pattern")
    refused({"type": "string", "pattern": "(a)\\1"}, "pattern")


@pytest.mark.parametrize(
    "fmt,values",
    [
        ("date", ["2024-02-29", "2023-02-29", "2023-13-01", "0000-01-01", "2023-1-01"]),
        ("time", ["12:00:00Z", "23:59:59+01:00", "24:00:00Z", "12:00:00", "12:00:00.5z"]),
        ("date-time", ["2024-01-01T00:00:00Z", "2024-01-01t00:00:00z", "2024-01-01 00:00:00Z"]),
        ("ipv4", ["1.2.3.4", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3"]),
        ("ipv6", ["::", "::1", "1:2:3:4:5:6:7:8", "1::2::3", "::ffff:1.2.3.4", "1:2:3:4:5:6:7::"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"]),
        ("email", ["a@b", "ab", "@"]),
        ("hostname", ["example.com", "-a.com", "a" * 64, "a.b.c.d.e", "a_b.com"]),
        ("duration", ["P1D", "PT1H", "P1W", "P", "PT", "P1Y2M3DT4H5M6S"]),
        ("uri", ["http://a.b/c?d#e", "a:b", "/relative", "http://[::1]:80/"]),
        ("uri-reference", ["/relative", "a:b", "#frag", "\\bad"]),
    ],
)
def test_formats_agree_with_checker(fmt, values):
    check({"type": "string", "format": fmt}, values + ["", 1])


def test_unknown_format_is_annotation():
    check({"type": "string", "format": "int32"}, ["x", "1"])
    refused({"type": "string", "format": "idn-hostname"}, "format")


def test_integer_ranges_and_multiple_of():
    values = list(range(-30, 31)) + [1000, -1000, 2.0]
    check({"type": "integer", "minimum": -7, "exclusiveMaximum": 12}, values)
    check({"type": "integer", "multipleOf": 4, "minimum": -10}, values)
    check({"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 100}, values)
    check({"type": "integer", "multipleOf": 7}, values + [7 * 10**12, -7 * 10**12 + 1])
    refused({"type": "integer", "multipleOf": 11}, "multipleOf")  # over the budget (multiples)


def test_number_ranges_and_decimal_multiple_of():
    values = [-1, -0.5, 0, 0.1, 0.25, 0.3, 1, 1.5, 2, 2.01, 2.5, 3, 10.125]
    check({"type": "number", "exclusiveMinimum": 0.25, "maximum": 2.5}, values)
    check({"type": "number", "multipleOf": 0.01, "minimum": 0}, values)
    check({"type": "number", "multipleOf": 0.5}, values)
    check({"type": "number", "multipleOf": 0.25, "exclusiveMaximum": 2.5}, values)


def test_draft4_boolean_exclusive_bounds():
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
              "minimum": 0, "exclusiveMinimum": True}  # fmt: skip
    check(schema, [-1, 0, 1, 2])


def test_all_of_is_intersection():
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                        {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}},
                         "required": ["a"]}]}  # fmt: skip
    check(schema, [{}, {"a": 1}, {"a": 3}, {"a": 3, "b": "x"}, {"b": "x"}])
    check({"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]}, ["a", "ab", "abcd"])


def test_any_of_and_one_of():
    check({"anyOf": [{"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 10}]},
          [0, 3, 5, 10, "a"])  # fmt: skip
    check({"oneOf": [{"type": "string"}, {"type": "null"}]}, SCALARS)
    tagged = {"oneOf": [
        {"type": "object", "properties": {"k": {"const": "a"}, "x": {"type": "integer"}},
         "required": ["k"]},
        {"type": "object", "properties": {"k": {"const": "b"}, "y": {"type": "string"}},
         "required": ["k"]}]}  # fmt: skip
    check(tagged, [{"k": "a", "x": 1}, {"k": "b", "y": "s"}, {"k": "c"}, {"k": "a", "y": "s"}])
    # overlapping branches are exact (complement.py): valid against exactly one branch
    check({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, SCALARS + [3, 3.5, 7, "x"])


def test_one_of_required_keys_is_exactly_one_of_them():
    """oneOf of bare ``required`` lists (overlapping branches) is made disjoint exactly."""
    import itertools

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
        "oneOf": [
            {"required": ["a"]},
            {"required": ["b"], "description": "b"},
            {"required": ["c"]},
        ],
    }
    full = {"a": 1, "b": "s", "c": None}
    subsets = itertools.chain.from_iterable(itertools.combinations("abc", k) for k in range(4))
    values = [{k: full[k] for k in keys} for keys in subsets]
    check(schema, values + [{"a": "x"}, {"b": 1, "z": 2}, {"z": 2}])
    check({**schema, "additionalProperties": False}, values + [{"a": 1, "z": 2}], strict=True)


def test_not():
    check({"not": {"type": "string"}}, SCALARS)
    check({"enum": [1, 2, 3], "not": {"const": 2}}, [1, 2, 3])
    check({"type": "string", "not": {"pattern": "a"}}, SCALARS + ["ba", "bb"])
    refused({"type": "array", "not": {"uniqueItems": True}}, "uniqueItems", "/not")


def test_refs_defs_definitions_and_pointer_escapes():
    schema = {"$defs": {"a/b": {"type": "integer"}, "t~x": {"type": "string"}},
              "type": "object", "properties": {"p": {"$ref": "#/$defs/a~1b"},
                                               "q": {"$ref": "#/$defs/t~0x"}}}  # fmt: skip
    check(schema, [{}, {"p": 1}, {"p": "x"}, {"q": "s"}, {"p": 1, "q": 2}])
    draft7 = {"definitions": {"n": {"type": "null"}}, "$ref": "#/definitions/n"}
    check(draft7, [None, 1])


def test_recursive_ref_needs_cfg_path():
    schema = {"$defs": {"node": {"type": "object",
                                 "properties": {"next": {"$ref": "#/$defs/node"}}}},
              "$ref": "#/$defs/node"}  # fmt: skip
    err = refused(schema, "$ref", "/$defs/node/properties/next")
    assert "recursive" in str(err) and "compile_json_schema" in str(err)
    assert "issue" not in str(err)  # messages name the user's input, not our tracker


def test_if_then_else():  # dependency keywords: test_dependencies.py
    check({"if": {"type": "string"}, "then": {"minLength": 1}}, SCALARS)


def test_nullable():
    rx = re.compile(json_schema_to_regex({"type": "string", "nullable": True}))
    assert rx.fullmatch("null") and rx.fullmatch('"x"') and not rx.fullmatch("1")


def test_annotations_ignored():
    check({"type": "integer", "title": "t", "description": "d", "default": 3,
           "examples": [1], "$comment": "c"}, [1, "a"])  # fmt: skip


def test_lenient_warns_and_relaxes():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rx = json_schema_to_regex({"type": "integer", "multipleOf": 11}, lenient=True)
    assert any("multipleOf" in str(w.message) for w in caught)
    assert re.fullmatch(rx, "3")


def test_whitespace_option_bounded():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
    }
    rx = re.compile(json_schema_to_regex(schema, whitespace=2))
    assert rx.fullmatch('{ "a" : [ 1 ,  2 ] }')
    assert rx.fullmatch('{"a":[1,2]}')
    assert not rx.fullmatch('{   "a":[1]}')
    assert not json_schema_to_regex(schema, whitespace="none").count(" ")
    compact = re.compile(json_schema_to_regex(schema))  # default: one optional space after , :
    assert compact.fullmatch('{"a": [1, 2]}') and compact.fullmatch('{"a":[1,2]}')
    assert not compact.fullmatch('{"a":  [1]}') and not compact.fullmatch('{ "a":[1]}')


def test_unsatisfiable_schema_errors():
    with pytest.raises(SchemaError):
        json_schema_to_regex({"type": "string", "minLength": 3, "maxLength": 2})


def test_property_names_without_a_type_admit_only_string_keys():
    """``propertyNames`` constrains keys, which are strings: a names schema without ``type``
    (any value of length <= 2) must not let numbers, null or arrays be written as keys."""
    schema = {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": True}
    rx = check(schema, [{"ab": 1}, {"abc": 1}, {}, {"a": [1]}])
    for text in ("{1:2}", "{null:1}", "{[]:1}", "{true:1}"):
        assert not rx.fullmatch(text), text
