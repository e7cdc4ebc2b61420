"""A recursive "any JSON value" definition (pydantic / TypeScript ``JsonValue``) compiles as
``true``: the regex route instead of the structural one, with the same masks as the
structural route of an equivalent schema the recogniser does not take (a vacuous bound
added), over the whole vocabulary at every position; near misses compile as written."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.json_schema.any_value_schema import is_any_value_target
from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.schema_oracle import valid_masks_equal, validator


def _value_def(self_ref: str) -> dict:
    return {
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "number"},
            {"type": "string", "title": "text"},
            {"type": "array", "items": {"$ref": self_ref}},
            {"type": "object", "additionalProperties": {"$ref": self_ref}},
        ]
    }


def _document(value_def: dict) -> dict:
    return {
        "$defs": {"value": value_def},
        "type": "object",
        "properties": {"key": {"type": "string"}, "payload": {"$ref": "#/$defs/value"}},
        "required": ["key", "payload"],
        "additionalProperties": False,
    }


DOCUMENT = _document(_value_def("#/$defs/value"))

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text('ab"\\é ', max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("ab_", max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def test_forms_that_accept_every_value_are_recognised():
    root = DOCUMENT
    assert is_any_value_target(root, root["$defs"]["value"], "/$defs/value", strict=False)
    # one branch with a type list; true and {} children; oneOf over disjoint types
    listed = {"type": ["null", "boolean", "number", "string", "array", "object"], "items": True}
    assert is_any_value_target({}, listed, "", strict=False)
    disjoint = {"oneOf": [*_value_def("#")["anyOf"][:4], {"type": ["array", "object"]}]}
    assert is_any_value_target(disjoint, disjoint, "", strict=False)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["anyOf"].pop(0),  # no null
        lambda d: d["anyOf"][2].update(type="integer"),  # integers only
        lambda d: d["anyOf"][3].update(format="email"),  # an assertion
        lambda d: d["anyOf"][4].update(items=[{"$ref": "#/$defs/value"}]),  # tuple items
        lambda d: d["anyOf"][5].update(additionalProperties={"type": "string"}),
        lambda d: d["anyOf"][5].update(minProperties=0),  # not recognised (vacuous, though)
        lambda d: d.update(oneOf=d.pop("anyOf") + [{"type": "integer"}]),  # overlapping oneOf
    ],
)
def test_near_misses_are_not_recognised(change):
    value_def = _value_def("#/$defs/value")
    change(value_def)
    root = _document(value_def)
    assert not is_any_value_target(root, value_def, "/$defs/value", strict=False)


def test_strict_objects_without_additional_properties_are_closed():
    value_def = _value_def("#/$defs/value")
    del value_def["anyOf"][5]["additionalProperties"]
    root = _document(value_def)
    assert is_any_value_target(root, value_def, "/$defs/value", strict=False)
    assert not is_any_value_target(root, value_def, "/$defs/value", strict=True)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(JSON_VALUES, min_size=1, max_size=4))
def test_masks_equal_the_structural_route_of_an_equivalent_schema(
    grammars, smollm2_tokenizer, payloads
):
    recognised, written_out = grammars
    values = [{"key": "k", "payload": payload} for payload in payloads]
    assert valid_masks_equal(written_out, recognised, DOCUMENT, values, smollm2_tokenizer)


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    recognised = compile_json_schema(DOCUMENT, smollm2_vocab, strict=False, cache=False)
    assert not isinstance(recognised, CompiledCFG)  # the regex route: no recursion left
    # minProperties 0 asserts nothing but keeps the recogniser off: the recursive schema
    # compiled as written (structural route) is the oracle
    vacuous = copy.deepcopy(DOCUMENT)
    vacuous["$defs"]["value"]["anyOf"][5]["minProperties"] = 0
    written_out = compile_json_schema(vacuous, smollm2_vocab, strict=False, cache=False)
    assert isinstance(written_out, CompiledCFG)
    return recognised, written_out


def test_every_value_is_accepted_and_the_rest_of_the_document_still_checked(smollm2_vocab):
    grammar = compile_json_schema(DOCUMENT, smollm2_vocab, strict=False, cache=False)
    oracle = validator(DOCUMENT)
    for text in (
        '{"key":"k","payload":{"a":[1,{"b":null}],"c":"x"}}',
        '{"key":"k","payload":[[[]],{}]}',
        '{"key":"k","payload":-0.5e3}',
        '{"key":"k"}',
        '{"key":1,"payload":1}',
        '{"key":"k","payload":1,"x":2}',
    ):
        matcher = grammar.matcher()
        accepted = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        assert accepted == oracle.is_valid(json.loads(text)), text


def test_a_bound_on_any_values_keeps_the_definition_as_written(smollm2_vocab):
    # max_any_depth bounds `true`, not a recursive definition: the two differ, so no swap
    grammar = compile_json_schema(
        DOCUMENT, smollm2_vocab, strict=False, cache=False, max_any_depth=2
    )
    matcher = grammar.matcher()
    deep = '{"key":"k","payload":[[[[[1]]]]]}'
    assert matcher.accept_bytes(deep.encode()) and matcher.is_accepting()


def test_indented_layout_works_where_the_recursive_form_is_refused(smollm2_vocab):
    # the structural route refuses indentation under a recursive $ref (it would grow without
    # bound); recognised as `true`, the any-value's own indentation applies
    grammar = compile_json_schema(DOCUMENT, smollm2_vocab, strict=False, cache=False, indent=2)
    value = {"key": "k", "payload": {"a": [1, {"b": None}, []], "c": {}}}
    matcher = grammar.matcher()
    assert matcher.accept_bytes(json.dumps(value, indent=2).encode()) and matcher.is_accepting()
    vacuous = copy.deepcopy(DOCUMENT)
    vacuous["$defs"]["value"]["anyOf"][5]["minProperties"] = 0
    with pytest.raises(SchemaError, match="indent"):
        compile_json_schema(vacuous, smollm2_vocab, strict=False, cache=False, indent=2)
