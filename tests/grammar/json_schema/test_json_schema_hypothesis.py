"""Hypothesis: generated schemas and instances, regex match <=> jsonschema validity."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import json_schema_to_regex
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import validator

small_int = st.integers(-50, 50)
string_schema = st.fixed_dictionaries(
    {"type": st.just("string")},
    optional={
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 4),
        "pattern": st.sampled_from(["^a", "b$", "^[a-c]*$", "a|b", "^x+y?$"]),
    },
)
int_schema = st.fixed_dictionaries(
    {"type": st.just("integer")},
    optional={
        "minimum": small_int,
        "maximum": small_int,
        "exclusiveMinimum": small_int,
        "multipleOf": st.sampled_from([1, 2, 5, 10]),
    },
)
num_schema = st.fixed_dictionaries(
    {"type": st.just("number")},
    optional={
        "minimum": st.sampled_from([-1.5, 0, 0.25, 2]),
        "exclusiveMaximum": st.sampled_from([-1, 0.5, 3.75, 10]),
    },
)
leaf = st.one_of(
    string_schema, int_schema, num_schema, st.just({"type": "boolean"}),
    st.just({"enum": ["a", 1, None]}), st.just({"type": "null"}),
)  # fmt: skip


def objects(children):
    return st.builds(
        lambda props, req, add, patterns, counts: {
            "type": "object",
            "properties": props,
            "required": [k for k in props if k in req],
            "additionalProperties": add,
            **({"patternProperties": patterns} if patterns else {}),
            **counts,
        },
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, max_size=3),
        st.sets(st.sampled_from(["a", "b", "c", "d"])),
        st.sampled_from([False, {"type": "integer"}]),
        st.dictionaries(st.sampled_from(["^a", "b|c", "^[a-c]$", "e$"]), children, max_size=2),
        st.fixed_dictionaries(
            {}, optional={"minProperties": st.integers(0, 2), "maxProperties": st.integers(0, 2)}
        ),
    )


def arrays(children):
    return st.builds(
        lambda items, lo, extra: {"type": "array", "items": items, "minItems": lo,
                                  "maxItems": lo + extra},  # fmt: skip
        children, st.integers(0, 2), st.integers(0, 2),
    )  # fmt: skip


schemas = st.recursive(leaf, lambda ch: st.one_of(objects(ch), arrays(ch)), max_leaves=6)
values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        small_int,
        st.sampled_from([0.5, -1.25, 2.0, 3.75]),
        st.text("abcxy", max_size=5),
    ),  # fmt: skip
    lambda ch: st.one_of(
        st.lists(ch, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), ch, max_size=4),
    ),  # fmt: skip
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, instances=st.lists(values, min_size=1, max_size=6))
def test_regex_matches_iff_valid(schema, instances):
    try:
        rx = re.compile(json_schema_to_regex(schema, strict=False))
    except SchemaError as exc:
        if exc.keyword is not None:
            return  # a refusal (counted by the keyword tests), not a wrong language
        rx = re.compile("(?!)")  # unsatisfiable schema: nothing may match
    oracle = validator(schema)
    for value in instances:
        text = serialize(value, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)


def _satisfiable(schema):
    try:
        json_schema_to_regex(schema, strict=False)
        return True
    except ValueError:
        return False


@settings(max_examples=60, deadline=None)
@given(schema=int_schema, value=st.integers(-200, 200))
def test_integer_mutations(schema, value):
    if not _satisfiable(schema):
        return
    rx = re.compile(json_schema_to_regex(schema))
    for v in (value, value + 1, -value, value * 10):
        assert bool(rx.fullmatch(str(v))) == validator(schema).is_valid(v)
