"""LengthGuard: ``pattern`` / ``format`` with ``minLength`` / ``maxLength`` past the product
budget, the length counted by the matcher (``length_guard``, ``unique_items.JsonCursor``).

Oracles: brute force over short completions for ``LengthGuard.fits``; the product automaton
(the same schema compiled within the budget: an independent construction) for masks over
the whole SmolLM2 vocabulary at every position of walks; ``jsonschema`` for instances.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema import compiler, complement, ecma_pattern
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.length_guard import INFINITE, LengthGuard
from formcast.grammar.json_schema.pattern_intersection import parse_pattern
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.values import serialize
from formcast.grammar.regex.combinators import seq
from tests.grammar.schema_oracle import validator


def _guard(pattern: str, min_len: int, max_len: int | None) -> LengthGuard:
    body = ecma_pattern.pattern_tree(parse_pattern(pattern))
    dfa = complement.byte_dfa(seq(compiler.QUOTE, body, compiler.QUOTE))
    return LengthGuard(dfa, min_len, max_len)


def _brute_fits(guard: LengthGuard, state: int, num_chars: int, alphabet: str, depth: int):
    """Some completion of at most ``depth`` characters (then the closing quote) lands
    inside the bounds?"""
    for size in range(depth + 1):
        for chars in itertools.product(alphabet, repeat=size):
            total = num_chars + size
            if total < guard.min_len or (guard.max_len is not None and total > guard.max_len):
                continue
            here = state
            for byte in ("".join(chars) + '"').encode():
                here, _ = guard.step(here, byte)
                if here < 0:
                    break
            if here >= 0 and guard.is_accepting[here]:
                return True
    return False


@pytest.mark.parametrize(
    ("pattern", "min_len", "max_len"),
    [
        ("^(ab|c)+$", 3, 5),
        ("^a*b?$", 2, 3),
        ("^(ab)*$", 3, 3),  # even lengths only: 3 never fits
        ("^x(ab)*y$", 4, 7),
        ("^(aa|b)+$", 5, None),
        ("^c?ab?$", 0, 1),
    ],
)
def test_fits_agrees_with_brute_force(pattern, min_len, max_len):
    guard = _guard(pattern, min_len, max_len)
    # every state reachable by a short content prefix, with every character count near it
    reached = {}
    for size in range(5):
        for chars in itertools.product("abcxy", repeat=size):
            here, count = guard.start, 0
            for byte in ('"' + "".join(chars)).encode():
                here, weight = guard.step(here, byte)
                count += weight
                if here < 0:
                    break
            if here >= 0:
                reached.setdefault(here, set()).add(count)
    assert reached
    for state, counts in reached.items():
        for num_chars in sorted(counts | {c + 2 for c in counts}):
            expected = _brute_fits(guard, state, num_chars, "abcxy", 8)
            assert guard.fits(state, num_chars) == expected, (pattern, state, num_chars)


def test_shortest_and_longest():
    guard = _guard("^x(ab)?y$", 0, None)
    assert guard.shortest[guard.start] == 2 and guard.longest[guard.start] == 4
    looping = _guard("^x+$", 0, None)
    assert looping.longest[looping.start] == INFINITE


def _forced(monkeypatch):
    """Every product automaton over budget: the matcher counts."""
    monkeypatch.setattr(compiler, "GUARD_MAX_STATES", 1)


def _product_and_counted(schema, vocab, monkeypatch):
    """``schema`` compiled with every product automaton built (the bounds inside one
    automaton: the oracle), then with the matcher counting (`_forced`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiler, "COUNTED_ABOVE_STATES", compiler.GUARD_MAX_STATES)
        product = compile_json_schema(schema, vocab, strict=False, cache=False)
    assert not isinstance(product, UniqueItemsGrammar)
    _forced(monkeypatch)
    counted = compile_json_schema(schema, vocab, strict=False, cache=False)
    assert isinstance(counted, UniqueItemsGrammar)
    return product, counted


SCHEMAS = [
    {"type": "string", "pattern": "^[a-z]+(\\.[a-z]+)*$", "minLength": 3, "maxLength": 9},
    {"type": "string", "format": "uri", "maxLength": 24},
    {"type": "string", "pattern": "^(é|x)+-?$", "minLength": 2, "maxLength": 5},
    {
        "type": "object",
        "properties": {
            "home": {"type": "string", "format": "uri", "minLength": 12, "maxLength": 30},
            "name": {"type": "string"},
        },
        "required": ["home"],
    },
]
VALUES = [
    "abc",
    "ab",
    "a.b.c",
    "abcdefghij",
    "a.bcdefgh",
    "http://a.io",
    "http://example.com/x",
    "https://example.com/very/long/path",
    "éx",
    "ééééé-",
    "éééé-",
    "x",
]


@pytest.mark.parametrize("route", ["auto", "cfg"])
@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_walks_agree_with_jsonschema(index, route, monkeypatch, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[index]
    _forced(monkeypatch)
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    assert isinstance(grammar, UniqueItemsGrammar) and grammar.text_patterns
    oracle = validator(schema)
    values = VALUES if schema["type"] == "string" else [
        {"home": v, "name": "n"} for v in VALUES
    ]  # fmt: skip
    num_valid = 0
    for value in values:
        text = serialize(value, schema, schema)
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value), text
        num_valid += is_walked
    assert 0 < num_valid < len(values)


@pytest.mark.parametrize("route", ["auto", "cfg"])
@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_masks_equal_the_product_automaton(
    index, route, monkeypatch, smollm2_vocab, smollm2_tokenizer
):
    schema = SCHEMAS[index]
    with pytest.MonkeyPatch.context() as patch:  # every product built: one automaton
        patch.setattr(compiler, "COUNTED_ABOVE_STATES", compiler.GUARD_MAX_STATES)
        product = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    assert not isinstance(product, UniqueItemsGrammar)
    _forced(monkeypatch)
    counted = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    assert isinstance(counted, UniqueItemsGrammar)
    oracle = validator(schema)
    for value in VALUES:
        value = value if schema["type"] == "string" else {"home": value, "name": "n"}
        if not oracle.is_valid(value):
            continue
        text = serialize(value, schema, schema)
        expected, found = product.matcher(), counted.matcher()
        for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
            assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids()), (
                text,
                found.num_accepted,
            )
            assert expected.accept_token(token_id) and found.accept_token(token_id)
        assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids())
        assert found.is_accepting()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.text(alphabet="ab.é-x", max_size=11))
def test_generated_strings(smollm2_vocab, smollm2_tokenizer, value):
    schema = SCHEMAS[0]
    with pytest.MonkeyPatch.context() as patch:
        _forced(patch)
        grammar = _generated_grammar(smollm2_vocab)
    text = json.dumps(value, ensure_ascii=False)
    matcher = grammar.matcher()
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
    assert is_walked == validator(schema).is_valid(value), text


_GENERATED: dict = {}


def _generated_grammar(vocab):
    if "grammar" not in _GENERATED:
        _GENERATED["grammar"] = compile_json_schema(SCHEMAS[0], vocab, strict=False, cache=False)
    return _GENERATED["grammar"]


def test_counted_string_beside_another_string_schema_is_refused(monkeypatch, smollm2_vocab):
    """The matcher tells counted strings apart by their place; another string schema that
    can be written at the same place (a union branch) is refused with its pointer."""
    _forced(monkeypatch)
    schema = {
        "type": "object",
        "properties": {
            "home": {
                "anyOf": [
                    {"type": "string", "format": "uri", "maxLength": 30},
                    {"type": "string", "minLength": 40},
                ]
            },  # fmt: skip
        },
    }
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert info.value.keyword == "maxLength"
    assert info.value.pointer == "/properties/home/anyOf/0"


@pytest.mark.parametrize("route", ["auto", "cfg"])
def test_counted_for_cost_beside_another_string_schema_is_a_product(
    route, monkeypatch, smollm2_vocab, smollm2_tokenizer
):
    """A count the matcher was given to save compile time alone (the product within its
    budget) gives way where another string schema writes at its place: the compile runs
    again with that product in the automaton (Github_medium o9802's ``oneOf`` of a plain
    pattern and a pattern with ``minLength`` / ``maxLength`` was refused)."""
    monkeypatch.setattr(compiler, "COUNTED_ABOVE_STATES", 1)  # every product: count it
    schema = {
        "type": "object",
        "properties": {
            "key": {
                "oneOf": [
                    {"type": "string", "pattern": "^[a-z]{1,6}$"},
                    {"type": "string", "minLength": 4, "maxLength": 9, "pattern": "{{.+}}"},
                ]
            },
            "home": {"type": "string", "format": "uri", "maxLength": 20},
        },
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route=route)
    # (home's count has no other string schema at its place: still the matcher's)
    assert isinstance(grammar, UniqueItemsGrammar) and grammar.text_patterns
    oracle = validator(schema)
    values = [{"key": k} for k in ("abc", "abcdefg", "{{x}}", "a{{xy}}", "{{x}}abcd", "{{}}",
                                   "{{a}}b", "ab{{c}}de")]  # fmt: skip
    values += [{"home": "http://a.io"}, {"home": "http://example.com/xyz"}]
    verdicts = []
    for value in values:
        text = serialize(value, schema, schema)
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value), (route, text)
        verdicts.append(is_walked)
    assert any(verdicts) and not all(verdicts)


def test_same_schema_along_two_paths_is_one_guard(monkeypatch, smollm2_vocab, smollm2_tokenizer):
    """package.json: an ``anyOf`` of two required sets expands the object twice; its
    ``homepage`` (``format: uri`` + ``maxLength``) is one guard, not a clash."""
    _forced(monkeypatch)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "homepage": {"type": "string", "format": "uri", "maxLength": 20},
        },
        "anyOf": [{"required": ["name"]}, {"required": ["homepage"]}],
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    oracle = validator(schema)
    for value in [{"homepage": "http://a.io"}, {"name": "x", "homepage": "http://a.io/" + "b" * 9},
                  {"name": "x", "homepage": "http://a.io/" + "b" * 8}]:  # fmt: skip
        text = serialize(value, schema, schema)
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value), text


def test_real_uri_bound_compiles_unforced(smollm2_vocab, smollm2_tokenizer):
    """``format: uri`` with ``maxLength: 2048`` (OpenAPI ``info``): over the real budget,
    counted; the longest valid URI is accepted and one character more is not."""
    schema = {"type": "string", "format": "uri", "maxLength": 2048}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    base = "https://example.com/"
    for size, expected in [(2048, True), (2049, False)]:
        value = base + "a" * (size - len(base))
        matcher = grammar.matcher()
        ids = smollm2_tokenizer.encode(json.dumps(value), add_special_tokens=False)
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked is expected
        assert validator(schema).is_valid(value) is expected


def test_disk_cache_hit_keeps_the_count(smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    schema = {"type": "string", "format": "uri", "maxLength": 2048}
    first = compile_json_schema(schema, smollm2_vocab)
    second = compile_json_schema(schema, smollm2_vocab)  # from disk: the plan is rebuilt
    assert isinstance(second, UniqueItemsGrammar) and len(second.text_patterns) == 1
    for size, expected in [(2048, True), (2049, False)]:
        value = "https://example.com/" + "a" * (size - 20)
        ids = smollm2_tokenizer.encode(json.dumps(value), add_special_tokens=False)
        for grammar in (first, second):
            matcher = grammar.matcher()
            is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
            assert is_walked is expected


# bounds wide enough that a token always fits under maxLength (the matcher's fast path,
# unique_items._forbidden_free): only closing the string under minLength can break them;
# the second pattern has content states with boundedly many characters ahead (after "-")
WIDE_SCHEMAS = [
    {"type": "string", "pattern": "^[a-z ]+(,[a-z ]+)*$", "minLength": 40, "maxLength": 300},
    {"type": "string", "pattern": "^[a-z ]+(-[0-9]{2})?$", "minLength": 50, "maxLength": 260},
    # the pattern allows "": the token '""' opens and closes the string under minLength
    {"type": "string", "pattern": "^([a-z]+ ?)*$", "minLength": 3, "maxLength": 300},
]
WIDE_VALUES = [
    "the cat",
    "the quick brown fox jumps over the lazy dog, and then some",
    "the quick brown fox jumps over the lazy dog-12",
    "the quick brown fox jumps over the lazy dog and the cat-12",
    "a b" * 30,
    "word, " * 20 + "end",
    "x" * 261,
]


@pytest.mark.parametrize("index", range(len(WIDE_SCHEMAS)))
def test_wide_bounds_masks_equal_the_product_automaton(
    index, monkeypatch, smollm2_vocab, smollm2_tokenizer
):
    schema = WIDE_SCHEMAS[index]
    product, counted = _product_and_counted(schema, smollm2_vocab, monkeypatch)
    oracle = validator(schema)
    num_valid = 0
    for value in WIDE_VALUES:
        text = json.dumps(value)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        expected, found = product.matcher(), counted.matcher()
        for token_id in ids:
            assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids()), (
                text,
                found.num_accepted,
            )
            if not expected.accept_token(token_id):
                assert not found.accept_token(token_id)
                break
            assert found.accept_token(token_id)
        else:
            assert found.is_accepting() == expected.is_accepting() == oracle.is_valid(value)
            num_valid += found.is_accepting()
    assert num_valid >= 2


def _with_tokens(vocab, extra: list[bytes]):
    """``vocab`` with the tokens ``extra`` appended (ids ``vocab.vocab_size`` on)."""
    import dataclasses

    return dataclasses.replace(
        vocab,
        token_bytes=vocab.token_bytes + tuple(extra),
        vocab_size=vocab.vocab_size + len(extra),
        num_tokenizer_tokens=vocab.num_tokenizer_tokens + len(extra),
        _hash="",  # (a new vocabulary: its tables are its own)
    )


def test_fast_path_walks_tokens_that_open_another_counted_string(
    monkeypatch, smollm2_vocab, smollm2_tokenizer
):
    """A token that closes one counted string and opens (and closes) the next one: the fast
    path must walk it (SmolLM2 has no such token: two are added to its vocabulary)."""
    vocab = _with_tokens(smollm2_vocab, [b'","b":""', b'","b":"xxx"'])
    empty_b, full_b = smollm2_vocab.vocab_size, smollm2_vocab.vocab_size + 1
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^([a-z]+ ?)*$", "maxLength": 500},
            "b": {"type": "string", "pattern": "^(x|yz)*$", "minLength": 3, "maxLength": 400},
        },
        "required": ["a", "b"],
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiler, "COUNTED_ABOVE_STATES", compiler.GUARD_MAX_STATES)
        product = compile_json_schema(schema, vocab, strict=False, cache=False)
    _forced(monkeypatch)
    counted = compile_json_schema(schema, vocab, strict=False, cache=False)
    assert isinstance(counted, UniqueItemsGrammar) and len(counted.text_patterns) == 2
    ids = smollm2_tokenizer.encode('{"a":"hello world', add_special_tokens=False)
    expected, found = product.matcher(), counted.matcher()
    assert expected.accept_tokens(ids) == found.accept_tokens(ids) == len(ids)
    allowed = found.allowed_token_ids()
    assert np.array_equal(expected.allowed_token_ids(), allowed)
    assert full_b in allowed and empty_b not in allowed


def test_token_that_opens_and_closes_a_counted_value(monkeypatch, smollm2_vocab, smollm2_tokenizer):
    """``""`` opens a counted string and closes it under ``minLength`` within one token:
    refused wherever such a value may start (in an object too), as the product automaton
    refuses it."""
    inner = {"type": "string", "pattern": "^([a-z]+ ?)*$", "minLength": 3, "maxLength": 300}
    schema = {"type": "object", "properties": {"a": inner, "b": {"type": "string"}}}
    product, counted = _product_and_counted(schema, smollm2_vocab, monkeypatch)
    empty = smollm2_tokenizer.convert_tokens_to_ids('""')
    for value in [{"a": "abc", "b": ""}, {"b": "x"}]:
        text = serialize(value, schema, schema)
        expected, found = product.matcher(), counted.matcher()
        for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
            allowed = found.allowed_token_ids()
            assert np.array_equal(expected.allowed_token_ids(), allowed), (text, found.num_accepted)
            assert expected.accept_token(token_id) and found.accept_token(token_id)
        assert found.is_accepting()
    assert (
        empty
        not in compile_json_schema(inner, smollm2_vocab, strict=False, cache=False)
        .matcher()
        .allowed_token_ids()
    )


def test_token_that_opens_and_overfills_a_counted_value(monkeypatch, smollm2_vocab):
    """A token that opens a counted string and passes ``maxLength`` within itself (a
    synthetic one: SmolLM2 has none long enough for these bounds) is refused at the start."""
    vocab = _with_tokens(smollm2_vocab, [b'"abcdefghij', b'"abc'])
    too_long, short = smollm2_vocab.vocab_size, smollm2_vocab.vocab_size + 1
    schema = {"type": "string", "pattern": "^([a-z]+ ?)*$", "maxLength": 5}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiler, "COUNTED_ABOVE_STATES", compiler.GUARD_MAX_STATES)
        product = compile_json_schema(schema, vocab, strict=False, cache=False)
    _forced(monkeypatch)
    counted = compile_json_schema(schema, vocab, strict=False, cache=False)
    assert isinstance(counted, UniqueItemsGrammar)
    allowed = counted.matcher().allowed_token_ids()
    assert np.array_equal(product.matcher().allowed_token_ids(), allowed)
    assert short in allowed and too_long not in allowed


def test_token_after_a_backslash_counts_the_escape_once(
    monkeypatch, smollm2_vocab, smollm2_tokenizer
):
    """A token that ends on a backslash leaves the guard inside an escape: the next token's
    first byte finishes it (``\\n``: one character, counted at the backslash), so near
    ``maxLength`` a token like ``nab`` adds two characters, not three (with more than
    ``_FEW_WALKED`` such tokens checked by table, not walked). Masks at every position, the
    escape split across tokens, equal the product automaton's."""
    schema = {"type": "string", "pattern": "^[a-z]+(\\n[a-z]+)*$", "minLength": 3, "maxLength": 7}
    product, counted = _product_and_counted(schema, smollm2_vocab, monkeypatch)
    assert not counted.text_patterns[0][1].is_plain_count  # (its own minLength)
    backslash = smollm2_tokenizer.convert_tokens_to_ids("\\")
    oracle = validator(schema)
    num_checked = 0
    for value in ["ab\ncd", "abcd\nab", "abcd\nabc", "abcd\nnab", "abcde\nab"]:
        head, tail = json.dumps(value).split("\\", 1)
        ids = [
            *smollm2_tokenizer.encode(head, add_special_tokens=False),
            backslash,
            *smollm2_tokenizer.encode(tail, add_special_tokens=False),
        ]
        assert smollm2_tokenizer.decode(ids) == json.dumps(value)
        expected, found = product.matcher(), counted.matcher()
        is_walked = True
        for token_id in ids:
            assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids())
            num_checked += 1
            is_walked = found.accept_token(token_id)
            assert is_walked == expected.accept_token(token_id)
            if not is_walked:
                break
        assert (is_walked and found.is_accepting()) == oracle.is_valid(value)
    assert num_checked >= 6


def test_max_len_variants_share_the_analysis():
    """`LengthGuard.with_max_len`: the same automaton under another bound decides `fits`
    like a guard built for that bound."""
    base = _guard("^(ab|c)+$", 2, None)
    for max_len in (2, 3, 5, None):
        built, shared = _guard("^(ab|c)+$", 2, max_len), base.with_max_len(max_len)
        assert shared.max_len == max_len and base.max_len is None
        for state in range(built.dfa.num_states):
            for num_chars in range(8):
                assert shared.fits(state, num_chars) == built.fits(state, num_chars)


def test_plain_count_only_for_plain_strings():
    """`LengthGuard.is_plain_count`: true for ``"CHAR{m,}"`` with no minLength of the
    guard's own (a character always takes the shortest completion down by one), false for
    a pattern (``a`` after ``a`` in ``(ab|c)+`` keeps the text from closing) or with
    ``min_len``."""
    from formcast.grammar.json_schema.charset import JSON_CHAR
    from formcast.grammar.regex.combinators import repeat

    for min_count in (0, 3):
        text = seq(compiler.QUOTE, repeat(JSON_CHAR, min_count, None), compiler.QUOTE)
        dfa = complement.byte_dfa(text)
        assert LengthGuard(dfa, 0, 10).is_plain_count
        assert not LengthGuard(dfa, 1, 10).is_plain_count
    assert not _guard("^(ab|c)+$", 0, 9).is_plain_count


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(max_size=12).filter(lambda s: not any(0xD800 <= ord(c) < 0xE000 for c in s)))
def test_string_effect_counts_json_characters(value):
    """`unique_items._string_effect` from a string's content: the characters of the JSON
    text ``json.dumps(value)`` (escapes once), and where its closing quote is."""
    from formcast.grammar.json_schema.unique_items import _string_effect

    # formcast's spelling (raw characters), and with every non-ASCII BMP one as \\uXXXX
    spellings = [json.dumps(value, ensure_ascii=False)]
    if all(ord(c) < 0x10000 for c in value):
        spellings.append(json.dumps(value))
    for spelling in spellings:
        body = spelling[1:].encode()  # content + '"'
        assert _string_effect(body + b",1") == (len(value), len(body) - 1)
        assert _string_effect(body[:-1]) == (len(value), -1)


def test_max_chars_after_quote_is_the_vocabulary_maximum(smollm2_vocab):
    from formcast.grammar.index.token_index import vocab_table

    most = 0
    for data in smollm2_vocab.token_bytes:
        for part in (data or b"").split(b'"')[1:]:
            most = max(most, sum(1 for b in part if not 0x80 <= b < 0xC0))
    assert vocab_table(smollm2_vocab).max_chars_after_quote() == most > 0


def test_fill_bitmask_many_refusals_and_strided_rows(monkeypatch, smollm2_vocab, smollm2_tokenizer):
    """Near a pattern guard's maxLength most plain tokens are refused by id (cleared in one
    vectorised pass) and a row that is a strided view takes the torch path: both rows equal
    ``allowed_token_ids`` at every position."""
    import torch

    from formcast.grammar import allocate_token_bitmask

    _forced(monkeypatch)
    grammar = compile_json_schema(SCHEMAS[0], smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    num_words = allocate_token_bitmask(1, smollm2_vocab.vocab_size).shape[1]
    bitmask = allocate_token_bitmask(1, smollm2_vocab.vocab_size)
    strided = torch.zeros(2 * num_words, dtype=torch.int32)[::2]  # (W,), not contiguous
    matcher = grammar.matcher()
    num_many = 0
    for token_id in smollm2_tokenizer.encode('"a.bcdefgh"', add_special_tokens=False):
        allowed = matcher.allowed_token_ids()
        num_many += smollm2_vocab.vocab_size - len(allowed) > 40_000
        for row in (bitmask[0], strided):
            matcher.fill_bitmask(row)
            words = row.contiguous().numpy().view(np.uint32)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")
            assert np.array_equal(np.flatnonzero(bits[: smollm2_vocab.vocab_size]), allowed)
        assert matcher.accept_token(token_id)
    assert num_many > 0
