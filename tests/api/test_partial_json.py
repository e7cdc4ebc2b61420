"""parse_partial_json against json.loads: every prefix of a JSON text gives a structural prefix
of the final value, and the whole text gives exactly the value; and against the maintained
``partial-json-parser``: the same snapshot for every prefix, but for one documented rule."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from partial_json_parser import Allow
from partial_json_parser import loads as reference_loads

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


# a number cut where it cannot be read yet: a dangling '.', exponent mark or exponent sign
_UNREADABLE_NUMBER_END = re.compile(r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?)?$")
# a high surrogate escape still waiting for its low half
_HALF_SURROGATE_END = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\(?:u[0-9a-fA-F]{0,3})?)?$")
_REFERENCE_ALLOW = Allow.STR | Allow.NUM | Allow.ARR | Allow.OBJ  # what we allow partially


def _ends_in_string(prefix: str) -> bool:
    is_inside = is_escaped = False
    for char in prefix:
        if is_escaped:
            is_escaped = False
        elif char == "\\" and is_inside:
            is_escaped = True
        elif char == '"':
            is_inside = not is_inside
    return is_inside


def reference_prefix(prefix: str) -> str:
    """``prefix`` with our two differences from partial-json-parser applied: it reads ``1.`` /
    ``1e`` / ``1e+`` as ``1``, we leave a number out until it can be read; it keeps a lone
    high surrogate (``"\\ud800``, not encodable as UTF-8), we wait for the pair."""
    cut = _UNREADABLE_NUMBER_END.search(prefix)
    if cut is not None and prefix[-1] in ".eE+-" and not _ends_in_string(prefix):
        prefix = prefix[: cut.start()]
    half = _HALF_SURROGATE_END.search(prefix)
    if half is not None and _ends_in_string(prefix):
        prefix = prefix[: half.start()]
    return prefix


def reference_snapshot(prefix: str):
    """partial-json-parser's snapshot of `reference_prefix` (``prefix``)."""
    prefix = reference_prefix(prefix)
    if not prefix.strip() or prefix.strip() == "-":
        return NOTHING
    try:
        return reference_loads(prefix, _REFERENCE_ALLOW)
    except Exception:  # noqa: BLE001 - the reference's "nothing readable yet" (tr, nu, -)
        return NOTHING


@settings(max_examples=200, deadline=None)
@given(values, st.sampled_from([None, 2]), st.booleans())
@example([" \U00010000"], None, True)  # a half surrogate pair right after a space
def test_every_prefix_agrees_with_partial_json_parser(value, indent, ensure_ascii):
    text = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)
    for cut in range(1, len(text) + 1):
        prefix = text[:cut]
        compared = reference_prefix(prefix)
        if compared and compared[-1].isspace() and _ends_in_string(compared):
            continue  # the reference str.strip()s the text, so cuts a string's last spaces
        assert parse_partial_json(prefix) == reference_snapshot(prefix), prefix
