"""Memoised pure tree builders: a repeat call shares the first result, the registered memo
forgets it, and a refusal is raised on every call (never remembered as a result)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from formcast.grammar import caches
from formcast.grammar.json_schema.ecma_pattern import (
    PatternRefused,
    padded,
    parse_ecma,
    with_length,
)
from formcast.grammar.json_schema.number_ranges import decimal_range
from formcast.grammar.json_schema.objects import _esc_json
from formcast.grammar.regex.combinators import literal

CASES = [
    ("json_schema.key_texts", lambda: _esc_json('na\u00efve "key"' + "x" * 300)),
    ("regex.built_characters", lambda: literal('"apiVersion"')),
    (
        "json_schema.decimal_ranges",
        lambda: decimal_range(Fraction(-90), False, Fraction(90), False),
    ),
    (
        "json_schema.pattern_branches",
        lambda: with_length(padded(parse_ecma("^[a-z]+$")[0]), 2, 8),
    ),
]


@pytest.mark.parametrize(("memo", "build"), CASES, ids=[memo for memo, _ in CASES])
def test_a_repeat_call_shares_the_result_until_the_memo_is_cleared(memo, build):
    caches.clear(memo)
    first = build()
    assert build() is first
    caches.clear(memo)
    again = build()
    assert again == first and again is not first


def test_with_length_refuses_on_every_call():
    # two variable-width parts: the bounds do not fold into one counter
    nodes = padded(parse_ecma("^a+b+$")[0])
    for _ in range(2):
        with pytest.raises(PatternRefused):
            with_length(nodes, 3, 5)
