"""``pattern`` + ``minLength``/``maxLength`` that do not fold into one repetition: the length
guard ``(?=(?:JSON_CHAR){m,n}")`` (regex_ast.Lookahead), built as the product of the pattern
automaton with a character counter. Oracles: ``jsonschema`` for schemas, ``re`` (whose
lookahead the guard is) for regexes; walks byte by byte and token by token."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import GrammarError, SchemaError
from formcast.grammar import Vocabulary
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from tests.grammar.schema_oracle import validator

# JSONSchemaBench Github_easy o63934's string: two variable-width runs under one bound
FILE_PATTERN = "^[\\w /-]+\\.[0-9a-zA-Z]+$"
# characters: ASCII, ones JSON escapes (quote, backslash, control), 2/3/4-byte UTF-8
ALPHABET = 'ab.x_ /"\\\n\x01\x7fé€😀'


def _accepts(dfa, text: str) -> bool:
    state = dfa.walk(dfa.start_state, text.encode("utf-8"))
    return state >= 0 and bool(dfa.is_accepting[state])


def _dfa(schema):
    return regex_to_dfa(json_schema_to_regex(schema, strict=False))


def _check(schema, values):
    # ECMA-262 ``$`` (what formcast implements) is the end of input; jsonschema runs ``pattern``
    # with Python's ``re``, whose ``$`` also matches before a final newline: ``\Z`` is ECMA's
    pattern = schema.get("pattern")
    oracle_schema = schema
    if pattern is not None and pattern.endswith("$") and not pattern.endswith("\\$"):
        oracle_schema = {**schema, "pattern": pattern[:-1] + "\\Z"}
    oracle = validator(oracle_schema)
    try:
        dfa = _dfa(schema)
    except SchemaError as exc:  # e.g. maxLength below the pattern's shortest match
        assert "unsatisfiable" in str(exc)
        assert not any(oracle.is_valid(v) for v in values)
        return
    for value in values:
        text = json.dumps(value, ensure_ascii=False)
        assert _accepts(dfa, text) == oracle.is_valid(value), (schema, value)


def test_file_pattern_lengths_at_the_bound():
    schema = {"type": "string", "pattern": FILE_PATTERN, "minLength": 4, "maxLength": 7}
    values = ["a.b", "ab.c", "a.bcd", "abc.def", "abcd.ef", "abc.defg", "a b.c", "/-.x", "a.b.c"]
    values += ["a.é", "ab.", ".ab", "abcdefg", "a_/.x9"]  # (re's \w has é, ECMA's not)
    _check(schema, values)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "a.*b", "maxLength": 4},  # unanchored: Σ* on both ends
        {"type": "string", "pattern": "^.+x.+$", "minLength": 3, "maxLength": 5},
        {"type": "string", "pattern": "^(ab|é+)\\.x*$", "minLength": 2},
        {"type": "string", "pattern": "^[^.]*\\.[^.]*$", "maxLength": 3},
    ],
)
@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.text(alphabet=ALPHABET, max_size=7), min_size=20, max_size=20))
def test_guarded_strings_agree_with_jsonschema(schema, values):
    _check(schema, values)


@settings(max_examples=25, deadline=None)
@given(
    lo=st.integers(0, 4),
    span=st.integers(0, 4),
    values=st.lists(st.text(alphabet=ALPHABET, max_size=9), min_size=15, max_size=15),
)
def test_random_bounds_agree_with_jsonschema(lo, span, values):
    schema = {"type": "string", "pattern": "^[^.]+\\.[^.]+$", "minLength": lo}
    schema["maxLength"] = lo + span
    _check(schema, values)


def test_regex_guard_is_re_lookahead():
    rx = '"(?:(?=(?:[^"\\\\]|\\\\.){2,4}")(?:a+\\.b*)")(?:,x)?'
    dfa = regex_to_dfa(rx)
    for body in ["a.", "a.b", "aa.bb", "a.bbb", "aaa.bb", "", ".", "a.\\\\"]:
        for tail in ["", ",x", ",y"]:
            text = f'"{body}"{tail}'
            assert _accepts(dfa, text) == bool(re.fullmatch(rx, text)), text


@pytest.mark.parametrize(
    "rx",
    [
        "(?=a{1,3})a*",  # the guard ends inside the rest: it would look past the group
        "(?:(?=a{1,2})a)b*",
        "a(?=b)",  # not a length guard at all
        "(?!a{1,2})b",
    ],
)
def test_lookaheads_that_are_no_intersection_are_refused(rx):
    with pytest.raises(GrammarError, match="lookahead"):
        regex_to_dfa(rx)


def test_too_large_product_is_a_schema_error():
    schema = {"type": "string", "pattern": "^(a|b)+c(d|e)+$", "maxLength": 50_000}
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, strict=False)
    assert info.value.keyword == "maxLength"


@pytest.fixture(scope="module")
def vocab():
    from formcast.engine.models.loader import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    return tok, Vocabulary.from_tokenizer(tok)


def _walk(grammar, token_ids):
    m = grammar.matcher()
    return all(m.accept_token(t) for t in token_ids) and m.is_accepting()


@pytest.mark.parametrize("route", ["auto", "regex"])
def test_bench_schema_token_by_token(vocab, route):
    tok, v = vocab
    bound = 1024 if route == "auto" else 40  # "regex" keeps counts <= 256 on that route
    schema = {
        "type": "object",
        "properties": {
            "output_file": {"type": "string", "pattern": FILE_PATTERN, "maxLength": bound,
                            "minLength": 1},
            "s3_rrs": {"type": "boolean"},
        },
        "required": ["output_file"],
    }  # fmt: skip
    grammar = compile_json_schema(schema, v, strict=False, route=route, cache=False)
    oracle = validator(schema)
    stem = "my video/clip-1_" * 80
    for name in ["a.mp4", "x y/z-1.TXT", stem[: bound - 4] + ".mp4", stem[: bound - 3] + ".mp4",
                 "a.b.c", "a.mé", "noext", stem[: bound - 5] + ".mp4"]:  # fmt: skip
        value = {"output_file": name, "s3_rrs": True}
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        ids = tok.encode(text, add_special_tokens=False)
        assert _walk(grammar, ids) == oracle.is_valid(value), (route, len(name), name[-8:])


def test_refusal_names_the_format_when_the_format_is_guarded():
    """JSONSchemaBench Github_easy o9780: ``format: email`` with ``maxLength: 1024`` is over the
    product budget; the refusal names the format (it said ``pattern None``)."""
    schema = {"type": "string", "format": "email", "maxLength": 1024}
    with pytest.raises(SchemaError, match="format 'email' with length bounds 0..1024") as info:
        json_schema_to_regex(schema, strict=False)
    assert info.value.keyword == "maxLength"


@pytest.mark.parametrize("route", ["regex", "cfg"])
@pytest.mark.parametrize(
    ("pattern", "min_len", "max_len"), [("a|b", 1, 1), ("^a?$", 0, 0), ("a|b", 2, 2)]
)
def test_pattern_with_bounds_a_counter_would_simplify_away(
    route, pattern, min_len, max_len, smollm2_vocab
):
    """``{1,1}`` and ``{0,0}`` length guards stay counters (the parser takes a lookahead only
    as a length guard); found by Hypothesis: a pattern with ``minLength = maxLength = 1`` was
    refused on the structural route as an unsupported lookahead."""
    schema = {"type": "string", "pattern": pattern, "minLength": min_len, "maxLength": max_len}
    grammar = compile_json_schema(schema, smollm2_vocab, route=route, strict=False)
    oracle = validator(schema)
    for value in ["", "a", "b", "c", "ab", "ba", "xa", "aa", "abc"]:
        text = json.dumps(value)
        matcher = grammar.matcher()
        is_accepted = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        assert is_accepted == oracle.is_valid(value), (schema, value)
