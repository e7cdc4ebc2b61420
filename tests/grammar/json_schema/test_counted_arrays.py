"""Arrays whose ``maxItems`` the matcher counts (``arrays._counts_items``): on the auto
route, where writing out ``(, item){min-1, max-1}`` would pass the chain budget, the
automaton keeps ``minItems`` and an unbounded tail and the matcher refuses the separator
that would start item ``maxItems + 1`` (``JsonCursor.feed``; near the bound the mask walks
the allowed tokens holding a comma). A clash with another array schema at the same place
takes the structural path, which holds the bound in its grammar.

Oracles: the structural route's grammar (``route="cfg"``: the bound inside the grammar, an
independent construction) for masks over the whole SmolLM2 vocabulary at every position of
every walk; ``jsonschema`` for instances (Hypothesis over item lists around the bound).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.json_schema import compile as schema_compile
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.unique_plan import has_items_above
from formcast.grammar.json_schema.values import serialize
from tests.grammar._byte_vocab import byte_vocab
from tests.grammar.schema_oracle import assert_masks_equal, valid_masks_equal, validator

# objects large enough that 40 written-out copies pass the chain budget (counted as is)
ROWS = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "minItems": 2,
            "maxItems": 40,
            "items": {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "maxLength": 6},
                    "b": {"type": "integer"},
                    "c": {"enum": ["x", "y,z"]},
                },
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["rows"],
}
# small items, counted once the budget is 0 (monkeypatched): strings holding commas, and
# arrays of counted arrays (a token like "],[" closes one and opens the next)
WORDS = {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 3}}
GRID = {
    "type": "array",
    "maxItems": 19,
    "items": {"type": "array", "maxItems": 18, "items": {"type": "integer"}},
}


def _row(k: int) -> dict:
    return {"a": "r," * (k % 3), "b": k, **({"c": "y,z"} if k % 2 else {})}


def _rows(n: int) -> dict:
    return {"rows": [_row(k) for k in range(n)]}


ROWS_VALUES = [_rows(n) for n in (0, 1, 2, 3, 38, 39, 40, 41, 45)]
WORDS_VALUES = [[",", "a,b", ", ,"][: 1 + n % 3] * (n // 3) + [","] * (n % 3) for n in range(24)]
WORDS_VALUES += [[",,,"] * 19, [","] * 21, ["x"] * 20, ["x"] * 21]
GRID_VALUES = [[[k] * n for k in range(m)] for m, n in [(0, 0), (1, 18), (19, 2), (20, 1), (3, 19)]]
GRID_VALUES += [[[]] * 19, [[1, 2]] * 18 + [list(range(18))]]

# counted strings in a counted array: a token closing one (read off the count rows) may
# also hold the separator past the bound
TEXTS = {"type": "array", "maxItems": 19, "items": {"type": "string", "maxLength": 300}}
TEXTS_VALUES = [["a,b"] * n for n in (18, 19, 20)] + [["x" * 300, "y,"] * 9 + ["z" * 301]]
TEXTS_VALUES += [[f"{k}\n,\t" for k in range(19)], ["\u0001,\\"] * 19]  # escapes

CASES = {
    "rows": (ROWS, ROWS_VALUES),
    "words": (WORDS, WORDS_VALUES),
    "grid": (GRID, GRID_VALUES),
    "texts": (TEXTS, TEXTS_VALUES),
}


@pytest.fixture(scope="module")
def pairs(smollm2_vocab):
    """{case: (counted grammar, structural grammar)}; small items counted with the chain
    budget at 0."""
    out = {}
    saved = schema_compile.CHAIN_ROUTE_MAX_STATES
    try:
        for name, (schema, _) in CASES.items():
            schema_compile.CHAIN_ROUTE_MAX_STATES = saved if name == "rows" else 0
            counted = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
            structural = compile_json_schema(
                schema, smollm2_vocab, strict=False, cache=False, route="cfg"
            )
            out[name] = counted, structural
    finally:
        schema_compile.CHAIN_ROUTE_MAX_STATES = saved
    return out


def _walk(grammar, tokenizer, text: str) -> bool:
    ids = tokenizer.encode(text, add_special_tokens=False)
    matcher = grammar.matcher()
    return matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()


@pytest.mark.parametrize("name", list(CASES))
def test_counted_on_the_regex_route(pairs, name):
    counted, structural = pairs[name]
    assert isinstance(counted, UniqueItemsGrammar) and counted.count_patterns
    assert not isinstance(counted.inner, CompiledCFG)  # the regex route's automaton
    assert isinstance(structural, CompiledCFG)  # (the bound in its grammar)
    bounds = {bound for _, bound in counted.count_patterns}
    assert bounds == {"rows": {40}, "words": {20}, "grid": {19, 18}, "texts": {19}}[name]
    if name == "texts":
        assert counted.text_patterns  # (the strings counted too)


@pytest.mark.parametrize("name", list(CASES))
def test_walks_agree_with_jsonschema(pairs, smollm2_tokenizer, name):
    schema, values = CASES[name]
    counted, _ = pairs[name]
    oracle = validator(schema)
    verdicts = []
    for value in values:
        text = serialize(value, schema, schema)
        is_walked = _walk(counted, smollm2_tokenizer, text)
        assert is_walked == oracle.is_valid(value), text[:80]
        verdicts.append(is_walked)
    assert any(verdicts) and not all(verdicts)


@pytest.mark.parametrize("name", list(CASES))
def test_masks_equal_the_structural_route(pairs, smollm2_tokenizer, name):
    """Every mask of every valid walk, over the whole vocabulary: the matcher's count
    equals the structural route's grammar (bound inside it), the walks at the bound
    included (where the mask walks the comma tokens)."""
    schema, values = CASES[name]
    counted, structural = pairs[name]
    assert valid_masks_equal(structural, counted, schema, values, smollm2_tokenizer) >= 3


def test_fill_bitmask_clears_the_separator_at_the_bound(pairs, smollm2_vocab, smollm2_tokenizer):
    """In the last item at the bound, the in-place clearing of the bitmask row matches
    ``allowed_token_ids``: a comma is text there, a quote and a comma a separator."""
    from formcast.grammar import allocate_token_bitmask

    counted, _ = pairs["words"]
    bitmask = allocate_token_bitmask(2, smollm2_vocab.vocab_size)
    text = serialize(["ab"] * 20, WORDS, WORDS)
    matcher = counted.matcher()
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert matcher.accept_tokens(ids[:-1]) == len(ids) - 1  # all but the closing bracket
    matcher.fill_bitmask(bitmask, 1)
    words = bitmask[1].numpy().view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: smollm2_vocab.vocab_size]
    allowed = matcher.allowed_token_ids()
    assert np.array_equal(np.flatnonzero(bits), allowed)
    token_ids = {data: t for t, data in enumerate(smollm2_vocab.token_bytes)}
    assert token_ids[b","] in allowed.tolist() and token_ids[b'"]'] in allowed.tolist()
    assert token_ids[b'","'] not in allowed.tolist()
    expected = pairs["words"][1].matcher()
    assert expected.accept_tokens(ids[:-1]) == len(ids) - 1
    assert np.array_equal(expected.allowed_token_ids(), allowed)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(st.lists(st.integers(-5, 120), max_size=20), max_size=21))
def test_grids_walk_like_jsonschema(pairs, smollm2_tokenizer, rows):
    counted, _ = pairs["grid"]
    text = serialize(rows, GRID, GRID)
    assert _walk(counted, smollm2_tokenizer, text) == validator(GRID).is_valid(rows)


def test_clash_takes_the_structural_route(smollm2_vocab, smollm2_tokenizer):
    """Two array schemas with other bounds at one place (a union): the matcher could not
    tell which one it counts, so the auto route compiles without counting them."""
    item = ROWS["properties"]["rows"]["items"]
    schema = {
        "anyOf": [
            {"type": "array", "maxItems": 40, "items": item},
            {"type": "array", "maxItems": 30, "items": {"type": "integer"}},
        ]
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert not (isinstance(grammar, UniqueItemsGrammar) and grammar.count_patterns)
    oracle = validator(schema)
    values = [_rows(40)["rows"], _rows(41)["rows"], list(range(30)), list(range(31))]
    for value in values:
        text = serialize(value, schema, schema)
        assert _walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value)


def test_disk_cache_hit_keeps_the_count(smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    first = compile_json_schema(ROWS, smollm2_vocab)
    second = compile_json_schema(ROWS, smollm2_vocab)  # from disk: the plan is rebuilt
    assert isinstance(second, UniqueItemsGrammar) and len(second.count_patterns) == 1
    for size, expected in [(40, True), (41, False)]:
        text = serialize(_rows(size), ROWS, ROWS)
        for grammar in (first, second):
            assert _walk(grammar, smollm2_tokenizer, text) is expected


def test_bounds_within_a_tokens_commas_stay_in_the_automaton(smollm2_vocab):
    """``maxItems`` at most a token's commas + 1 is never counted (a token could open the
    array and pass it within itself), whatever the budget."""
    bound = vocab_table(smollm2_vocab).max_commas() + 1
    schema = {"type": "array", "maxItems": bound, "items": ROWS["properties"]["rows"]["items"]}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert not (isinstance(grammar, UniqueItemsGrammar) and grammar.count_patterns)


def test_max_commas_is_the_vocabularys(smollm2_vocab):
    most = max(data.count(b",") for data in smollm2_vocab.token_bytes)
    assert vocab_table(smollm2_vocab).max_commas() == most


def test_has_items_above_reads_the_bounds():
    assert has_items_above('{"maxItems": 64}', 17)
    assert not has_items_above('{"maxItems": 17}', 17)
    assert not has_items_above('{"maxLength": 64}', 17)
    assert not has_items_above('{"maxItems": 64}', None)  # (no counting on that route)


def _byte_vocab():
    """Every single byte, tokens holding several separators, and EOS."""
    extra = [b"1,2,3,4,", b"5,6,", b"7,", b"],[", b"],[1,2,", b'","', b'",",",', b"]"]
    return byte_vocab(extra)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "maxItems": 9, "items": {"type": "integer"}},
        {"type": "array", "maxItems": 7, "items": {"type": "array", "items": {"type": "integer"}}},
        {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 2}},
    ],
)
def test_tokens_with_several_separators(monkeypatch, schema):
    """A token may hold up to ``max_commas`` separators: the mask checks them from that
    many commas before the bound on (brute force over the whole vocabulary at every prefix
    of the texts around the bound, against the structural route)."""
    vocab = _byte_vocab()
    assert vocab_table(vocab).max_commas() == 4
    monkeypatch.setattr(schema_compile, "CHAIN_ROUTE_MAX_STATES", 0)
    counted = compile_json_schema(schema, vocab, strict=False, cache=False)
    assert isinstance(counted, UniqueItemsGrammar) and counted.count_patterns
    structural = compile_json_schema(schema, vocab, strict=False, cache=False, route="cfg")
    item = schema["items"]
    value = {"integer": 1, "array": [1, 2], "string": ","}[item["type"]]
    for size in (schema["maxItems"] - 1, schema["maxItems"]):
        text = serialize([value] * size, schema, schema).encode()
        assert_masks_equal(structural, counted, list(text), text)  # (byte b is token b)
