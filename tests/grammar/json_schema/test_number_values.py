"""Numbers in ``enum`` / ``const`` compare by value: ``2`` matches ``enum: [2.0]``.

Every text without exponent whose value is a listed number is accepted (``2``, ``2.0``,
``2.00``; ``-0`` and ``0.0`` for zero), besides the value's ``json.dumps`` text; other exponent
spellings (``2e0``) are outside formcast's layout. Checked against jsonschema (which compares
numbers by value) on the regex route's text, with Hypothesis over values and spellings, and
by SmolLM2 token walks on both routes.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.number_ranges import MAX_SPELLING_CHARS, value_spellings
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from formcast.grammar.regex.syntax_tree import to_python_regex
from tests.grammar.schema_oracle import validator


def plain(value: int | float) -> str:
    """The shortest text without exponent of ``value``."""
    text = format(Decimal(repr(value) if isinstance(value, float) else value), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def spellings(value: int | float) -> list[str]:
    """Texts of ``value`` and of values next to it, with and without exponents."""
    base = plain(value)
    out = [json.dumps(value), base, base + ("0" if "." in base else ".0"), base + ".00"]
    out += [f"{base}e0", f"{base}E+0", "-" + base.lstrip("-"), base.lstrip("-")]
    out += [base + "1" if "." in base else base + ".1", base + "5", "1" + base.lstrip("-")]
    return out


def in_layout(text: str, values: list) -> bool:
    """Written by formcast for a listed number equal to ``text``'s value: ``json.dumps``'s text
    of it, or any text without exponent (up to ``MAX_SPELLING_CHARS`` of its shortest one)."""
    number = json.loads(text)
    if any(text == json.dumps(v) for v in values if v == number):
        return True
    return "e" not in text.lower() and len(plain(number)) <= MAX_SPELLING_CHARS


numbers = st.one_of(
    st.integers(-(10**9), 10**9),
    st.decimals(min_value=-(10**6), max_value=10**6, places=4, allow_nan=False).map(float),
    st.sampled_from([0, 0.0, -0.0, 1e20, 1.5e-7, 2.0, -3.25, 10**15, 1e300]),
)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(numbers, min_size=1, max_size=4), shape=st.sampled_from("ecno"))
def test_enum_and_const_numbers_by_value(values, shape):
    value = values[0]
    schema = {
        "e": {"enum": [*values, "x", None]},
        "c": {"const": value},
        "n": {"enum": [{"a": [value, True]}]},
        "o": {"type": "object", "properties": {"k": {"enum": values}}, "required": ["k"]},
    }[shape]
    wrap = {
        "e": lambda t: t,
        "c": lambda t: t,
        "n": lambda t: '{"a":[' + t + ",true]}",
        "o": lambda t: '{"k":' + t + "}",
    }[shape]
    pattern = re.compile(json_schema_to_regex(schema, max_any_depth=0))
    oracle = validator(schema)
    seen = set()
    for candidate in values:
        for text in spellings(candidate):
            full = wrap(text)
            try:
                parsed = json.loads(full)
            except ValueError:
                continue
            number = json.loads(text)
            if Decimal(text) != Decimal(repr(number) if isinstance(number, float) else number):
                continue  # the float read of the text is not its value: no oracle for it
            expected = oracle.is_valid(parsed) and in_layout(text, values)
            assert bool(pattern.fullmatch(full)) == expected, (schema, full)
            seen.add(expected)
    assert True in seen


def test_spellings_of_a_few_values():
    tree = value_spellings([2.0, 0, -3.25, 1e20])
    pattern = re.compile(to_python_regex(tree))
    accepted = ["2", "2.0", "2.000", "0", "-0", "0.0", "-0.00", "-3.25", "-3.250", "1e+20"]
    accepted.append("1" + "0" * 20)
    rejected = ["2e0", "02", "2.", "3.25", "-3.2", "-3.251", "0e1", "1e20", "+2", "2.01"]
    assert all(pattern.fullmatch(t) for t in accepted)
    assert not any(pattern.fullmatch(t) for t in rejected)
    # integer-only (type: integer): integer literals, and json.dumps's text of the value
    integers = re.compile(to_python_regex(value_spellings([2.0, 0], is_integer_only=True)))
    assert [bool(integers.fullmatch(t)) for t in ("2", "2.0", "2.00", "0", "-0", "0.0")] == [
        True, True, False, True, True, False,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "texts"),
    [
        ({"enum": [2.0, "a"]}, {"2": True, "2.0": True, "2.50": False, '"a"': True}),
        ({"const": 0}, {"0": True, "-0.0": True, "0.5": False}),
        ({"enum": [{"since": 2.0}]}, {'{"since":2}': True, '{"since":3}': False}),
        (
            {"type": "object", "properties": {"v": {"enum": [1, 2.5]}}, "required": ["v"]},
            {'{"v":1.0}': True, '{"v":2.50}': True, '{"v":2}': False},
        ),
    ],
)
def test_token_walks_on_both_routes(smollm2_vocab, smollm2_tokenizer, schema, texts):
    oracle = validator(schema)
    grammars = [
        compile_json_schema(schema, smollm2_vocab, cache=False),
        compile_json_schema_cfg(schema, smollm2_vocab),
    ]
    for text, is_valid in texts.items():
        assert oracle.is_valid(json.loads(text)) == is_valid
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        for grammar in grammars:
            matcher = grammar.matcher()
            complete = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
            assert complete == is_valid, (schema, text, type(grammar).__name__)
