"""``multipleOf`` for any positive rational with any bounds: exact against the oracle.

Texts are written in formcast's number layout (``-?I`` for integers, ``-?I(.F)?`` for numbers
with bounds or ``multipleOf``: no exponent, any trailing fraction zeros, ``-0`` forms), so
"regex fullmatch <=> valid" must hold for every such text. Decimal texts keep at most 15
significant digits where the oracle (jsonschema on floats) reads them, so that float
comparisons are exact; :func:`test_trees_against_exact_arithmetic` goes past that with exact
fractions.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
import warnings
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import GrammarError, SchemaError
from formcast.grammar.automata.byte_dfa import same_language
from formcast.grammar.index import grammar_file
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema import number_ranges
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.compiler import SchemaCompiler
from formcast.grammar.json_schema.multiples import MAX_MULTIPLE_CHARS, multiples_tree
from formcast.grammar.json_schema.values import serialize
from formcast.grammar.regex.combinators import literal, seq
from formcast.grammar.regex.syntax_tree import Automaton, shown_text, subtrees, to_python_regex
from tests.grammar.schema_oracle import validator

INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
NUMBER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
BOUND_KEYS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


def _decimal_text(value: Fraction, fraction_digits: int) -> str:
    """``value`` (a finite decimal) exactly, with at least ``fraction_digits`` fraction digits
    (none when 0 and the value is an integer)."""
    num_digits = next(k for k in range(80) if (value * 10**k).denominator == 1)
    num_digits = max(num_digits, fraction_digits)
    scaled = abs(value * 10**num_digits).numerator
    digits = str(scaled).rjust(num_digits + 1, "0")
    head, tail = digits[: len(digits) - num_digits], digits[len(digits) - num_digits :]
    return ("-" if value < 0 else "") + head + ("." + tail if tail else "")


def _texts_near(schema: dict, rng: random.Random, count: int) -> list[str]:
    """Texts around multiples of the schema's multipleOf and around its bounds."""
    step = Fraction(Decimal(repr(schema["multipleOf"])))
    anchors = [Fraction(0)] + [
        Fraction(Decimal(repr(schema[key]))) for key in BOUND_KEYS if key in schema
    ]
    anchors += [step * k for k in (1, 2, 3, 7, 10**6 + 1, -5, -(10**9) - 3)]
    is_integer = schema.get("type") == "integer"
    texts = {"0", "-0"} | ({"0.0", "-0.0", "0.000"} if not is_integer else set())
    for _ in range(count):
        base = rng.choice(anchors)
        value = base + step * rng.randint(-4, 4)
        if not is_integer:
            value += rng.choice([0, 0, 0, step / 2, Fraction(1, 1000), -Fraction(1, 100)])
        elif value.denominator != 1:
            value = Fraction(round(value))
        texts.add(_decimal_text(value, 0 if is_integer else rng.choice([0, 0, 1, 3])))
    return sorted(texts)


def check_texts(schema: dict, texts: list[str]) -> re.Pattern:
    """Every layout text: regex fullmatch <=> the oracle's validity of its value."""
    rx = re.compile(json_schema_to_regex(schema))
    oracle = validator(schema)
    layout = INTEGER_TEXT if schema.get("type") == "integer" else NUMBER_TEXT
    for text in texts:
        assert layout.fullmatch(text), text
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)
    return rx


SCHEMAS = [
    {"type": "integer", "multipleOf": 3},
    {"type": "integer", "multipleOf": 7},
    {"type": "integer", "multipleOf": 12, "minimum": -100},
    {"type": "integer", "multipleOf": 7, "exclusiveMinimum": 1000, "maximum": 10**12},
    {"type": "integer", "multipleOf": 1024, "minimum": -(10**6), "maximum": 10**6},
    {"type": "integer", "multipleOf": 2.5, "exclusiveMaximum": 80},
    {"type": "integer", "multipleOf": 0.5, "minimum": -3},
    {"type": "number", "multipleOf": 0.5},
    {"type": "number", "multipleOf": 0.25, "minimum": -1.1, "exclusiveMaximum": 9.75},
    {"type": "number", "multipleOf": 0.05, "exclusiveMinimum": 0},
    {"type": "number", "multipleOf": 2.5, "maximum": 1000},
    {"type": "number", "multipleOf": 1.5, "minimum": -4.5, "maximum": 4.5},
    {"type": "number", "multipleOf": 0.001, "exclusiveMinimum": -2.0005},
    {"type": "number", "multipleOf": 0.07},
    {"type": "number", "multipleOf": 12, "exclusiveMaximum": -24},
    {"type": "number", "multipleOf": 1024, "minimum": 0, "maximum": 10**7},
    {"type": "number", "multipleOf": 0.125, "minimum": 123456789},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s, separators=(",", ":")))
def test_multiples_against_oracle(schema):
    check_texts(schema, _texts_near(schema, random.Random(0), 300))


def test_python_values_in_the_layout():
    values = [-7.5, -2.5, -1, 0, 0.5, 1, 2.5, 3, 7.5, 10, 12.5, 1000, 10**18, 2.25]
    for schema in ({"type": "number", "multipleOf": 2.5}, {"type": "integer", "multipleOf": 5}):
        rx = re.compile(json_schema_to_regex(schema))
        oracle = validator(schema)
        for value in values:
            text = serialize(value, schema)
            assert bool(rx.fullmatch(text)) == oracle.is_valid(value), (schema, text)


def test_text_forms():
    """Trailing fraction zeros, ``-0`` forms and exponents, as the bounded range writes them."""
    rx = re.compile(json_schema_to_regex({"type": "number", "multipleOf": 0.25}))
    for text in ("1.25", "1.250", "1.2500", "-0.75", "3", "3.0", "-0", "-0.00", "0.0"):
        assert rx.fullmatch(text), text
    for text in ("1.2", "1.251", "1.", ".25", "01.25", "1e2", "1.25e0", "--1", "+1"):
        assert not rx.fullmatch(text), text
    rx = re.compile(json_schema_to_regex({"type": "number", "multipleOf": 3, "minimum": 1}))
    assert rx.fullmatch("3.000") and rx.fullmatch("300") and not rx.fullmatch("-0")
    rx = re.compile(json_schema_to_regex({"type": "integer", "multipleOf": 3}))
    assert rx.fullmatch("-0") and not rx.fullmatch("3.0")


@pytest.mark.parametrize(
    ("m", "lo", "hi", "is_number"),
    [
        ("7", None, None, False),
        ("0.07", "-1000.5", None, True),
        ("2.5", None, "-12345678901234567890", True),
        ("0.001", "0.0005", "0.0105", True),
        ("1.5", "99999999999999999999.5", "100000000000000000009", True),
        ("16", "-1000000000000000000000", None, False),
        ("0.3", None, None, True),
    ],
)
def test_trees_against_exact_arithmetic(m, lo, hi, is_number):
    """Past float precision (long integers and fractions): exact fractions decide."""
    step = Fraction(m)
    low = None if lo is None else Fraction(lo)
    high = None if hi is None else Fraction(hi)
    tree = multiples_tree(step, low, False, high, True, is_number=is_number)
    rx = re.compile(to_python_regex(tree))
    for text, is_valid in _exact_cases(step, low, high, is_number, seed=1, count=400):
        assert bool(rx.fullmatch(text)) == is_valid, text


def _exact_cases(
    step: Fraction,
    low: Fraction | None,
    high: Fraction | None,
    is_number: bool,
    *,
    seed: int,
    count: int,
    offsets: tuple[Fraction | int, ...] = (),
) -> list[tuple[str, bool]]:
    """Texts near multiples of ``step`` far past float precision and near the bounds, each
    with its validity by exact fractions (``low <= value < high``, ``step | value``)."""
    rng = random.Random(seed)
    anchors = [Fraction(0), step * 10**19, -step * (10**17 + 3)] + [b for b in (low, high) if b]
    cases = []
    for _ in range(count):
        value = rng.choice(anchors) + step * rng.randint(-3, 3)
        value += rng.choice([0, 0, step / 3, Fraction(1, 10**20), *offsets])
        if not is_number:
            value = Fraction(round(value))
        digits = rng.choice([0, 2, 25]) if is_number else 0
        if (value * 10**30).denominator != 1:  # not a finite decimal: its nearest 30-digit text
            value = Fraction(round(value * 10**30), 10**30)
        is_valid = (
            (value / step).denominator == 1
            and (low is None or value >= low)
            and (high is None or value < high)
        )
        cases.append((_decimal_text(value, digits), is_valid))
    return cases


def test_all_of_merges_to_the_common_multiple():
    values = [0, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 3, 7.5, 15, 22.5, -7.5, 12, 18, 24, 36, -12, 4.5]
    for schema in (
        {"type": "number", "allOf": [{"multipleOf": 0.25}, {"multipleOf": 0.1}]},
        {"type": "number", "allOf": [{"multipleOf": 1.5}, {"multipleOf": 2.5}]},
        {"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]},
        {"type": "number", "allOf": [{"multipleOf": 0.5}, {"multipleOf": 3}]},
    ):
        rx = re.compile(json_schema_to_regex(schema))
        oracle = validator(schema)
        for value in values:
            text = serialize(value, schema)
            assert bool(rx.fullmatch(text)) == oracle.is_valid(value), (schema, text)


def test_over_budget_is_refused_with_pointer():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 97}}}
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema)
    assert info.value.keyword == "multipleOf" and info.value.pointer == "/properties/n"
    assert "multipleOf 97" in str(info.value) and "budget" in str(info.value)
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex({"type": "number", "multipleOf": 0.11, "minimum": 0})
    assert info.value.keyword == "multipleOf"
    with warnings.catch_warnings(record=True) as caught:  # lenient: the range is kept
        warnings.simplefilter("always")
        rx = json_schema_to_regex(
            {"type": "number", "multipleOf": 0.11, "maximum": 1}, lenient=True
        )
    assert any("multipleOf" in str(w.message) for w in caught)
    assert re.fullmatch(rx, "0.5") and not re.fullmatch(rx, "1.5")


def test_small_divisors_stay_small():
    """Tree sizes (not times): the residue part stays small for c = 1, 3, 7."""
    sizes = {
        m: multiples_tree(Fraction(m), None, False, None, False, is_number=True).num_chars
        for m in ("0.5", "0.25", "2.5", "3", "1.5", "12", "7")
    }
    assert max(sizes[m] for m in ("0.5", "0.25", "2.5")) < 1_000
    assert max(sizes[m] for m in ("3", "1.5", "12")) < 5_000
    assert sizes["7"] < MAX_MULTIPLE_CHARS


DECIMAL_STEPS = ["3", "7", "12", "0.5", "0.25", "0.05", "2.5", "1.5", "0.001", "0.3", "16", "0.75"]
BOUNDS = [None, "-10", "-2.5", "0", "0.1", "3", "12.25", "1000"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    step=st.sampled_from(DECIMAL_STEPS),
    is_integer=st.booleans(),
    bounds=st.lists(st.sampled_from(BOUNDS), min_size=4, max_size=4),
    data=st.data(),
)
def test_hypothesis_schemas_and_values(step, is_integer, bounds, data):
    schema: dict = {"type": "integer" if is_integer else "number", "multipleOf": json.loads(step)}
    for key, bound in zip(BOUND_KEYS, bounds, strict=True):
        if bound is not None:
            schema[key] = json.loads(bound)
    try:
        rx: re.Pattern | None = re.compile(json_schema_to_regex(schema))
    except SchemaError as exc:  # no value in range: then none may be valid below
        assert "unsatisfiable" in str(exc)
        rx = None
    oracle = validator(schema)
    unit = Fraction(step)
    for _ in range(30):
        value = unit * data.draw(st.integers(-(10**6), 10**6))
        value += data.draw(st.sampled_from([0, 0, unit / 2, Fraction(1, 4), Fraction(-1, 100)]))
        if is_integer:
            value = Fraction(round(value))
        text = _decimal_text(value, 0 if is_integer else data.draw(st.sampled_from([0, 1, 4])))
        is_match = rx is not None and rx.fullmatch(text) is not None
        assert is_match == oracle.is_valid(json.loads(text)), (schema, text)


TOKEN_SCHEMA = {
    "type": "object",
    "properties": {
        "price": {"type": "number", "multipleOf": 0.05, "minimum": 0},
        "dozen": {"type": "integer", "multipleOf": 12},
        "angle": {"type": "number", "multipleOf": 2.5, "exclusiveMaximum": 360},
        "step": {"type": "number", "multipleOf": 0.07},
    },
    "required": ["price", "dozen"],
}
TOKEN_VALID = [
    {"price": 19.95, "dozen": 144},
    {"price": 0, "dozen": -36, "angle": 357.5, "step": 0.21},
    {"price": 1000000.05, "dozen": 0, "angle": -2.5, "step": -700},
]
TOKEN_INVALID = [
    {"price": 19.99, "dozen": 144},
    {"price": -0.05, "dozen": 12},
    {"price": 1, "dozen": 13},
    {"price": 1, "dozen": 12, "angle": 360},
    {"price": 1, "dozen": 12, "step": 0.2},
]


def _walk(grammar, token_ids) -> bool:
    matcher = grammar.matcher()
    return all(matcher.accept_token(t) for t in token_ids) and matcher.is_accepting()


@pytest.mark.parametrize("route", ["regex", "cfg"])
def test_token_by_token(smollm2_tokenizer, smollm2_vocab, route):
    """The real SmolLM2 tokenizer, on the regex route and on the structural (CFG) route."""
    grammar = compile_json_schema(TOKEN_SCHEMA, smollm2_vocab, route=route, cache=False)
    oracle = validator(TOKEN_SCHEMA)
    for value in TOKEN_VALID + TOKEN_INVALID:
        text = serialize(value, TOKEN_SCHEMA)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert _walk(grammar, ids) == oracle.is_valid(value), (route, text)
    # other spellings of the same values: trailing zeros are fine, exponents are not written
    for text, is_valid in (('{"price":19.950,"dozen":144}', True),
                           ('{"price":1.995e1,"dozen":144}', False),
                           ('{"price":0.10,"dozen":-0}', True)):  # fmt: skip
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert _walk(grammar, ids) == is_valid, (route, text)


# ---- the residue automaton (any modulus, any bounds; grammar/json_schema/residues.py) -------


def _node_and_tree(m: str, lo: str | None, hi: str | None, is_number: bool):
    """The same language built both ways: the automaton node and the regex tree."""
    step, low, high = Fraction(m), None if lo is None else Fraction(lo), None
    high = None if hi is None else Fraction(hi)
    if is_number:
        built = [number_ranges.decimal_multiple(step, low, False, high, True, as_automaton=a)
                 for a in (True, False)]  # fmt: skip
    else:
        int_lo = None if low is None else math.ceil(low)
        int_hi = None if high is None else math.ceil(high) - 1
        built = [number_ranges.int_multiple(step.numerator, int_lo, int_hi, as_automaton=a)
                 for a in (True, False)]  # fmt: skip
    return built[0], built[1]


def _has_automaton(node) -> bool:
    return any(isinstance(x, Automaton) for x in subtrees(node))


@pytest.mark.parametrize(
    ("m", "lo", "hi", "is_number"),
    [
        ("7", None, None, False),
        ("3", "-100", None, False),
        ("12", None, "-24", False),
        ("7", "1000", "1000000000000", False),
        ("1.5", "-4.5", "4.5", True),
        ("0.07", "-1000.5", None, True),
        ("0.3", None, None, True),
        ("2.5", None, "1000", True),
        ("12", "-7", None, True),
        ("0.75", "0.1", "12.25", True),
    ],
)
def test_automaton_equals_tree(m, lo, hi, is_number):
    """Where the regex tree exists, the residue automaton has exactly its language."""
    node, tree = _node_and_tree(m, lo, hi, is_number)
    assert _has_automaton(node) and not _has_automaton(tree)
    assert same_language(regex_to_dfa(node), regex_to_dfa(tree)), (m, lo, hi)


def _fullmatch(dfa, text: str) -> bool:
    state = dfa.walk(0, text.encode())
    return state >= 0 and bool(dfa.is_accepting[state])


@pytest.mark.parametrize(
    ("m", "lo", "hi", "is_number"),
    [
        ("97", None, None, False),
        ("1024", None, None, False),
        ("4096", "-5", None, False),
        ("999", "10", "100000000000000000000", False),
        ("0.11", "0", None, True),
        ("2.56", None, "1000", True),
        ("0.0097", "-3", "3", True),
        ("13.7", None, None, True),
    ],
)
def test_large_moduli_against_exact_arithmetic(m, lo, hi, is_number):
    """Moduli whose regex is over budget (c >= 9, 2^a with a >= 8): exact, by fractions."""
    step = Fraction(m)
    low, high = None if lo is None else Fraction(lo), None if hi is None else Fraction(hi)
    if is_number:
        node = number_ranges.decimal_multiple(step, low, False, high, True, as_automaton=True)
    else:
        int_hi = None if high is None else int(high) - 1
        node = number_ranges.int_multiple(
            step.numerator, None if low is None else int(low), int_hi, as_automaton=True
        )
    assert _has_automaton(node)
    dfa = regex_to_dfa(node)
    cases = _exact_cases(step, low, high, is_number, seed=2, count=600, offsets=(Fraction(1),))
    for text, is_valid in cases:
        assert _fullmatch(dfa, text) == is_valid, text
    assert not _fullmatch(dfa, "1e3") and not _fullmatch(dfa, "--0") and not _fullmatch(dfa, "01")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    numerator=st.integers(1, 3000),
    scale=st.integers(0, 3),
    is_integer=st.booleans(),
    bounds=st.lists(st.sampled_from(BOUNDS), min_size=4, max_size=4),
    data=st.data(),
)
def test_hypothesis_automata(numerator, scale, is_integer, bounds, data):
    """Any modulus p / 10^k with any bounds through the compiler: the schema's grammar
    against the oracle, on texts around multiples and bounds."""
    step = Fraction(numerator, 10**scale)
    schema: dict = {"type": "integer" if is_integer else "number", "multipleOf": float(step)}
    if step.denominator == 1:
        schema["multipleOf"] = step.numerator
    for key, bound in zip(BOUND_KEYS, bounds, strict=True):
        if bound is not None:
            schema[key] = json.loads(bound)
    compiler = SchemaCompiler(schema)
    try:
        node = compiler.compile(schema, "")
    except SchemaError as exc:
        assert "unsatisfiable" in str(exc)
        node = None
    dfa = None if node is None else regex_to_dfa(node)
    oracle = validator(schema)
    for _ in range(30):
        value = step * data.draw(st.integers(-(10**6), 10**6))
        value += data.draw(st.sampled_from([0, 0, step / 2, Fraction(1, 4), Fraction(-1, 100)]))
        if is_integer:
            value = Fraction(round(value))
        text = _decimal_text(value, 0 if is_integer else data.draw(st.sampled_from([0, 1, 4])))
        is_match = dfa is not None and _fullmatch(dfa, text)
        assert is_match == oracle.is_valid(json.loads(text)), (schema, text)


LARGE_SCHEMA = {
    "type": "object",
    "properties": {
        "batch": {"type": "integer", "multipleOf": 97},
        "page": {"type": "integer", "multipleOf": 1024, "minimum": 0},
        "rate": {"type": "number", "multipleOf": 0.11},
    },
    "required": ["batch"],
}
LARGE_VALID = [{"batch": 0}, {"batch": 9700, "page": 2048, "rate": 0.33},
               {"batch": -97, "page": 0, "rate": -1.1}, {"batch": 970000000194}]  # fmt: skip
LARGE_INVALID = [{"batch": 96}, {"batch": 97, "page": 1000}, {"batch": 97, "page": -1024},
                 {"batch": 97, "rate": 0.1}, {"batch": 9701}]  # fmt: skip


@pytest.mark.parametrize("route", ["regex", "cfg"])
def test_large_moduli_token_by_token(smollm2_tokenizer, smollm2_vocab, route):
    """Unbounded multipleOf 97 / 1024 / 0.11 compiled (refused before the automaton) and
    walked with the real tokenizer on both routes."""
    grammar = compile_json_schema(LARGE_SCHEMA, smollm2_vocab, route=route, cache=False)
    oracle = validator(LARGE_SCHEMA)
    for value in LARGE_VALID + LARGE_INVALID:
        text = serialize(value, LARGE_SCHEMA)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert _walk(grammar, ids) == oracle.is_valid(value), (route, text)


def test_automaton_node_has_no_regex_and_survives_a_grammar_file():
    node = number_ranges.int_multiple(97, None, None, as_automaton=True)
    with pytest.raises(GrammarError, match="multipleOf 97"):
        to_python_regex(node)
    assert shown_text(seq(literal("a"), node)) == "<automaton: multipleOf 97>"
    again = grammar_file.loads(grammar_file.dumps(node))
    assert again == node and hash(again) == hash(node) and again.label == node.label
    # the content digest is the same in another process (hashes of bytes are salted)
    code = (
        "from formcast.grammar.json_schema import number_ranges as n; "
        "print(hash(n.int_multiple(97, None, None, as_automaton=True)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == hash(node)


def test_moduli_over_the_product_budget_are_refused_with_pointer():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 1000003}}}
    with pytest.raises(SchemaError) as info:
        SchemaCompiler(schema).compile(schema, "")
    assert info.value.keyword == "multipleOf" and info.value.pointer == "/properties/n"
