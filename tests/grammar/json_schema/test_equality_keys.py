"""Equality keys of JSON values (`values.equality_key`, `values.text_equality_key`, and the
item automaton's `item_key`) against jsonschema's own equality (the one ``uniqueItems``,
``enum`` and ``const`` use, asked through ``const``): equal keys iff equal values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from formcast.grammar.json_schema.item_automaton import item_key
from formcast.grammar.json_schema.values import equality_key, text_equality_key

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.5, 1e16, 1e300])
    | st.text(max_size=4)
)


def jsonschema_equal(a, b) -> bool:
    """Does jsonschema find ``b`` equal to ``a`` (``{"const": a}`` validates ``b``)?"""
    return Draft202012Validator({"const": a}).is_valid(b)


VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.parametrize(
    ("a", "b", "is_equal"),
    [
        (1, 1.0, True),
        (0, -0.0, True),
        (True, 1, False),
        (False, 0, False),
        (None, False, False),
        ("1", 1, False),
        ({"a": 1, "b": [1.0, 2]}, {"b": [1, 2.0], "a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ([1, 2], [2, 1], False),
        ([[]], [{}], False),
        ("é", "\u00e9", True),
        ({"é": 1}, {"\u00e9": 1.0}, True),
        (0.1 + 0.2, 0.3, False),
        (10**20, 1e20, True),
    ],
)
def test_equality_keys_on_known_pairs(a, b, is_equal: bool) -> None:
    assert jsonschema_equal(a, b) == is_equal
    assert (equality_key(a) == equality_key(b)) == is_equal


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e2", 100), ("-0", 0), ("-0.0", 0), ("1.50", 1.5), ('{"b":1,"a":2.0}', {"a": 2, "b": 1})],
)
def test_text_keys_read_every_spelling_as_its_value(text: str, value) -> None:
    assert text_equality_key(text) == text_equality_key(text.encode()) == equality_key(value)
    assert item_key(text.encode()) == equality_key(value)


@settings(max_examples=300, deadline=None)
@given(VALUES, VALUES)
def test_equal_keys_iff_jsonschema_equal(a, b) -> None:
    assert (equality_key(a) == equality_key(b)) == jsonschema_equal(a, b)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_text_key_equals_value_key(value) -> None:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert text_equality_key(text) == equality_key(value)
    assert item_key(text.encode()) == equality_key(value)  # strings: their text is the key
