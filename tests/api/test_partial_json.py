"""parse_partial_json against json.loads: every prefix of a JSON text gives a structural prefix
of the final value, and the whole text gives exactly the value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import OutputError
from formcast.partial_json import NOTHING, parse_partial_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def is_structural_prefix(partial, final) -> bool:
    """``partial`` can grow into ``final``: containers gain entries, only the last may change."""
    if isinstance(final, dict):
        if not isinstance(partial, dict) or list(partial) != list(final)[: len(partial)]:
            return False
        keys = list(partial)
        return all(partial[k] == final[k] for k in keys[:-1]) and (
            not keys or is_structural_prefix(partial[keys[-1]], final[keys[-1]])
        )
    if isinstance(final, list):
        if not isinstance(partial, list) or len(partial) > len(final):
            return False
        if not partial:
            return True
        last = len(partial) - 1
        return partial[:last] == final[:last] and is_structural_prefix(partial[last], final[last])
    if isinstance(final, str):
        return isinstance(partial, str) and final.startswith(partial)
    if isinstance(final, bool) or final is None:
        return partial == final
    return isinstance(partial, (int, float)) and not isinstance(partial, bool)


@settings(max_examples=150, deadline=None)
@given(values, st.sampled_from([None, 2]), st.booleans())
def test_every_prefix_is_a_structural_prefix(value, indent, ensure_ascii):
    text = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)
    assert parse_partial_json(text) == json.loads(text)
    for cut in range(len(text)):
        partial = parse_partial_json(text[:cut])
        if partial is not NOTHING:
            assert is_structural_prefix(partial, value), (text[:cut], partial)


def test_unfinished_pieces_are_left_out():
    assert parse_partial_json('{"name": "Jo') == {"name": "Jo"}
    assert parse_partial_json('{"name": "Jo", "ag') == {"name": "Jo"}
    assert parse_partial_json('{"name": "Jo", "age":') == {"name": "Jo"}
    assert parse_partial_json('{"a": [1, 2, tr') == {"a": [1, 2]}
    assert parse_partial_json('{"a": -') == {}
    assert parse_partial_json('"caf\\u00') == "caf"
    assert parse_partial_json('"tab\\') == "tab"
    assert parse_partial_json("  ") is NOTHING


@pytest.mark.parametrize("text", ["{1: 2}", '{"a" 1}', "[1, 2]]", "nul!", '"\\x"', "01x"])
def test_not_a_json_prefix_raises(text):
    with pytest.raises(OutputError, match="not a JSON prefix"):
        parse_partial_json(text)
