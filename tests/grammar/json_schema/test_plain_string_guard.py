"""Plain strings bounded past the regex route's counter (``maxLength: 32767``): on the auto
route the automaton keeps an unbounded string and the matcher counts its characters
(``compiler._string_text``, ``length_guard``), instead of sending the whole schema to the
structural path; a clash with another string schema at the same place, or an automaton over
``GUARDED_ROUTE_MAX_STATES``, takes the structural path, which holds the bounds itself.

Oracles: the structural route's grammar (chunked counted chains: the bounds inside the
grammar, an independent construction) for masks over the whole SmolLM2 vocabulary at every
position of every walk; ``jsonschema`` for instances.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.json_schema import compile as schema_compile
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.unique_plan import may_need_plan
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import valid_masks_equal, validator

# lengths around the bounds: below minLength, at it, far inside (room for any token), and
# within a token's length of maxLength (where the matcher walks the tokens one by one)
LONG = {"type": "string", "minLength": 120, "maxLength": 300}
SCHEMAS = [
    LONG,
    {"type": ["string", "null"], "maxLength": 280},
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "text": {"type": "string", "maxLength": 32767},
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 260},
            },
            "note": {"type": "string", "minLength": 200, "maxLength": 5000},
            "name": {"type": "string", "maxLength": 12},
        },
        "required": ["id", "text"],
    },
]


def _text(size: int, alphabet: str = "ab cd, é") -> str:
    return "".join(alphabet[(k * 7 + k // 3) % len(alphabet)] for k in range(size))


STRINGS = [_text(n) for n in (0, 1, 119, 120, 121, 200, 279, 280, 281, 299, 300, 301)]
STRINGS += ['say "hi" \\ now 😀 ' * 8, "x" * 310]
OBJECTS = [
    {"id": 1, "text": "short"},
    {"id": 2, "text": _text(400), "tags": ["a", _text(260), "b"], "name": "n"},
    {"id": 3, "text": "", "tags": [""]},
    {"id": 4, "text": "t", "tags": [_text(261)]},
    {"id": 5, "text": "t", "note": _text(200)},
    {"id": 6, "text": "t", "note": _text(199)},
    {"id": 7, "text": "t", "name": _text(13)},
]


def _values(schema):
    if schema.get("type") == "object":
        return OBJECTS
    return STRINGS + ([None] if "null" in schema["type"] else [])


@pytest.fixture(scope="module")
def grammars():
    return {}


def _pair(grammars, index, vocab):
    if index not in grammars:
        schema = SCHEMAS[index]
        counted = compile_json_schema(schema, vocab, strict=False, cache=False)
        structural = compile_json_schema(schema, vocab, strict=False, cache=False, route="cfg")
        grammars[index] = counted, structural
    return grammars[index]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_counted_on_the_regex_route(grammars, smollm2_vocab, index):
    counted, structural = _pair(grammars, index, smollm2_vocab)
    assert isinstance(counted, UniqueItemsGrammar) and counted.text_patterns
    assert not isinstance(counted.inner, CompiledCFG)  # the regex route's automaton
    assert not isinstance(structural, UniqueItemsGrammar)  # (bounds in its grammar)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_walks_agree_with_jsonschema(grammars, smollm2_vocab, smollm2_tokenizer, index):
    schema = SCHEMAS[index]
    counted, _ = _pair(grammars, index, smollm2_vocab)
    oracle = validator(schema)
    verdicts = []
    for value in _values(schema):
        text = serialize(value, schema, schema)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = counted.matcher()
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value), text[:80]
        verdicts.append(is_walked)
    assert any(verdicts) and not all(verdicts)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_masks_equal_the_structural_route(grammars, smollm2_vocab, smollm2_tokenizer, index):
    """Every mask of every valid walk, over the whole vocabulary: the matcher's count
    equals the structural route's chunked chains (bounds inside the grammar)."""
    schema = SCHEMAS[index]
    counted, structural = _pair(grammars, index, smollm2_vocab)
    values = _values(schema)
    assert valid_masks_equal(structural, counted, schema, values, smollm2_tokenizer) >= 2


def test_fill_bitmask_clears_the_refused_tokens(grammars, smollm2_vocab, smollm2_tokenizer):
    """The in-place clearing of the bitmask row (CPU) matches ``allowed_token_ids``."""
    from formcast.grammar import allocate_token_bitmask

    counted, _ = _pair(grammars, 0, smollm2_vocab)
    bitmask = allocate_token_bitmask(2, smollm2_vocab.vocab_size)
    text = json.dumps(_text(150), ensure_ascii=False)
    matcher = counted.matcher()
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False)[:40]:
        matcher.fill_bitmask(bitmask, 1)
        words = bitmask[1].numpy().view(np.uint32)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: smollm2_vocab.vocab_size]
        assert np.array_equal(np.flatnonzero(bits), matcher.allowed_token_ids())
        assert matcher.accept_token(token_id)


def test_clash_takes_the_structural_route(smollm2_vocab, smollm2_tokenizer):
    """Two string schemas at one place (a union): the matcher could not tell which one it
    counts, so the auto route compiles the structural path (bounds in the grammar), where
    a pattern guard would be refused."""
    schema = {
        "type": "object",
        "properties": {
            "home": {
                "anyOf": [
                    {"type": "string", "maxLength": 400},
                    {"type": "string", "format": "date"},
                ]
            }
        },
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, CompiledCFG)
    oracle = validator(schema)
    for value in [{"home": "2024-01-02"}, {"home": "x" * 400}, {"home": "x" * 401}]:
        text = serialize(value, schema, schema)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = grammar.matcher()
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value)


def test_large_automaton_takes_the_structural_route(monkeypatch, smollm2_vocab, smollm2_tokenizer):
    monkeypatch.setattr(schema_compile, "GUARDED_ROUTE_MAX_STATES", 10)
    grammar = compile_json_schema(SCHEMAS[2], smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, CompiledCFG)
    oracle = validator(SCHEMAS[2])
    for value in OBJECTS[:5]:
        text = serialize(value, SCHEMAS[2], SCHEMAS[2])
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = grammar.matcher()
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value)


def test_regex_route_keeps_the_counter(smollm2_vocab):
    """``route="regex"`` has no structural path to fall back to: the bound stays a counted
    repetition in the automaton (no guard)."""
    schema = {"type": "string", "maxLength": 300}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route="regex")
    assert isinstance(grammar, CompiledGrammar)


def test_may_need_plan_sees_long_bounds():
    assert may_need_plan('{"maxLength": 300}', 256)
    assert may_need_plan('{"minLength":257}', 256)
    assert not may_need_plan('{"maxLength": 256}', 256)
    assert not may_need_plan('{"maxLength": 300}')  # (no counter limit on that route)


def test_disk_cache_hit_keeps_the_count(smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 300}}}
    first = compile_json_schema(schema, smollm2_vocab)
    second = compile_json_schema(schema, smollm2_vocab)  # from disk: the plan is rebuilt
    assert isinstance(second, UniqueItemsGrammar) and len(second.text_patterns) == 1
    for size, expected in [(300, True), (301, False)]:
        value = {"text": "a" * size}
        ids = smollm2_tokenizer.encode(json.dumps(value), add_special_tokens=False)
        for grammar in (first, second):
            matcher = grammar.matcher()
            is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
            assert is_walked is expected


def test_nfa_bound_exits_before_determinisation():
    """``max_nfa_states`` (the guarded route's budget) holds the NFA as it is built (its
    unshared upper bound, ~4x the built NFA for o9766, would refuse automata that fit)
    and stops before determinising."""
    from formcast.errors import CompileBudgetError
    from formcast.grammar.index.compile import regex_to_dfa

    pattern = "(alpha|beta|gamma)[a-z]{0,3}"
    dfa = regex_to_dfa(pattern)
    with pytest.raises(CompileBudgetError, match="more than 5"):
        regex_to_dfa(pattern, max_nfa_states=5)
    assert regex_to_dfa(pattern, max_nfa_states=1000).num_states == dfa.num_states


def test_budget_reads_the_built_nfa_not_its_upper_bound(monkeypatch, smollm2_vocab):
    """o9766's shape (one pattern at five places, in array items): the builder shares what
    the unshared upper bound counts at every use; the budget holds the NFA built."""
    from formcast.grammar.automata.budget import CompileBudget
    from formcast.grammar.automata.nfa_builder import build_nfa, unshared_states
    from formcast.grammar.index.compile import regex_to_dfa, strip_anchors
    from formcast.grammar.json_schema.compile import marked_schema_tree
    from formcast.grammar.json_schema.unique_plan import UniqueItemsPlan

    hex_id = {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"}
    item = {"type": "object", "properties": dict.fromkeys("abcde", hex_id)}
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": item},
            "text": {"type": "string", "maxLength": 5000},
        },
    }
    tree = marked_schema_tree(
        schema, unique_plan=UniqueItemsPlan(), strict=False, max_count=256,
        count_strings_above=256, share_refs=False,
    )  # fmt: skip
    node = strip_anchors(tree)
    num_built = build_nfa(node, CompileBudget()).num_states
    budget = max(2 * num_built, regex_to_dfa(tree).num_states)
    assert unshared_states(node, CompileBudget()) > budget  # the bound would refuse it
    monkeypatch.setattr(schema_compile, "GUARDED_ROUTE_MAX_STATES", budget)
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar) and not isinstance(grammar.inner, CompiledCFG)


def test_strings_after_a_counted_one_are_counted(smollm2_vocab):
    """A flat object of bounded strings beside a counted one: once the matcher counts a
    string, every later plain string longer than a token can put into a string it opens is
    counted too (the flat wild schemas built 100k+ NFA states of chains), so the schema
    keeps the regex route with a small automaton."""
    from formcast.grammar.json_schema.compile import marked_schema_tree
    from formcast.grammar.json_schema.unique_plan import UniqueItemsPlan

    fields = {f"f{k}": {"type": "string", "maxLength": 200} for k in range(40)}
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 5000}, **fields},
    }
    plan = UniqueItemsPlan()
    marked_schema_tree(
        schema, unique_plan=plan, strict=False, max_count=256, count_strings_above=256,
        count_strings_floor=3, share_refs=False,
    )  # fmt: skip
    assert len(plan.text_patterns()) == 41
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar) and not isinstance(grammar.inner, CompiledCFG)
    assert len(grammar.text_patterns) == 41


def test_chains_before_a_counted_string_stop_the_tree_early(smollm2_vocab):
    """Bounded strings written out before the first counted one still count against the
    guarded route's budget, known while the tree is built; the auto route budgets the
    chains first (`CHAIN_ROUTE_MAX_STATES`), so the later strings are counted instead."""
    from formcast.errors import CompileBudgetError
    from formcast.grammar.json_schema.compile import GUARDED_ROUTE_MAX_STATES, marked_schema_tree
    from formcast.grammar.json_schema.unique_plan import UniqueItemsPlan

    fields = {f"f{k}": {"type": "string", "maxLength": 200} for k in range(40)}
    schema = {
        "type": "object",
        "properties": {**fields, "text": {"type": "string", "maxLength": 5000}},
    }
    with pytest.raises(CompileBudgetError, match="bounded strings need more than"):
        marked_schema_tree(
            schema, unique_plan=UniqueItemsPlan(), strict=False, max_count=256,
            count_strings_above=256, guarded_max_states=GUARDED_ROUTE_MAX_STATES,
            count_strings_floor=3, share_refs=False,
        )  # fmt: skip
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar) and not isinstance(grammar.inner, CompiledCFG)
    assert 30 < len(grammar.text_patterns) <= 41


def test_chains_past_their_budget_count_the_later_strings(smollm2_vocab, smollm2_tokenizer):
    """Without a string counted, bounded strings are chains in the automaton until they
    would need more than ``CHAIN_ROUTE_MAX_STATES`` states; the matcher counts the later
    ones (the automaton stays within the eager index), exactly."""
    from formcast.grammar.json_schema.compile import CHAIN_ROUTE_MAX_STATES

    fields = {f"f{k}": {"type": "string", "maxLength": 200} for k in range(40)}
    schema = {"type": "object", "properties": fields}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar) and not isinstance(grammar.inner, CompiledCFG)
    assert 30 < len(grammar.text_patterns) < 40  # (the first ones are chains)
    assert grammar.inner.schema_grammar.dfa.num_states < 2 * CHAIN_ROUTE_MAX_STATES
    structural = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False, route="cfg")
    oracle = validator(schema)
    for size in (199, 200, 201):
        value = {"f0": "a" * size, "f39": "b" * size}
        text = serialize(value, schema, schema)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = grammar.matcher()
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value) == (size <= 200)
    text = serialize({"f1": "x" * 198, "f38": "y" * 199}, schema, schema)
    expected, found = structural.matcher(), grammar.matcher()
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
        assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids())
        assert expected.accept_token(token_id) and found.accept_token(token_id)


def test_chain_budget_not_beside_patterns(smollm2_vocab):
    """A schema with a pattern or a format keeps its chains (their route as before: format
    automata cost more than the state budgets see)."""
    fields = {f"f{k}": {"type": "string", "maxLength": 200} for k in range(40)}
    schema = {"type": "object", "properties": {**fields, "day": {"format": "date"}}}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert not isinstance(grammar, UniqueItemsGrammar)


def test_has_string_patterns_reads_schema_positions():
    from formcast.grammar.json_schema.keyword_types import has_string_patterns

    assert has_string_patterns({"items": {"properties": {"a": {"pattern": "^x$"}}}})
    assert has_string_patterns({"$defs": {"d": {"format": "date"}}})
    assert not has_string_patterns({"self": {"format": "jsonschema"}, "type": "object"})
    assert not has_string_patterns({"enum": [{"pattern": "x"}], "const": {"format": "y"}})
    assert not has_string_patterns({"properties": {"pattern": {"type": "string"}}})


def test_chained_chars_reads_the_bounds_within_the_counter():
    from formcast.grammar.json_schema.unique_plan import chained_chars

    source = '{"a": {"maxLength": 10}, "b": {"maxLength":300}, "c": {"minLength": 5}}'
    assert chained_chars(source, 256) == 11


# short counted strings (after a counted one): every position within a token of maxLength,
# escapes, multi-byte characters, minLength in the automaton, a nullable string, array items
SHORT = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": 5000},
        "code": {"type": "string", "maxLength": 4},
        "name": {"type": ["string", "null"], "maxLength": 12},
        "word": {"type": "string", "minLength": 2, "maxLength": 9},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}},
        "meta": {
            "type": "object",
            "properties": {"key": {"type": "string", "maxLength": 5}},
            "additionalProperties": True,
        },
    },
    "required": ["text"],
}
SHORT_VALUES = [
    {"text": "t", "code": "abcd", "name": "hello world!", "word": "ab"},
    {"text": "t", "code": "abcde"},
    {"text": "t", "code": 'a"\\b'},
    {"text": "t", "code": "a\\bcd"},
    {"text": "t", "name": "é😀\n\t\u0001abcdefg"},
    {"text": "t", "name": "é😀\n\t\u0001abcdefgh"},
    {"text": "t", "name": None, "word": "a"},
    {"text": "t", "word": "123456789", "tags": ["", "abcdef", "x y"]},
    {"text": "t", "word": "1234567890"},
    {"text": "t", "tags": ["abcdefg"]},
    {"text": "t", "meta": {"key": "12345", "other": "anything at all"}},
    {"text": "t", "meta": {"key": "123456"}},
    {"text": "t", "meta": {"key": "ab", "z": {"key": "123456789"}}},
]


@pytest.fixture(scope="module")
def short_pair(smollm2_vocab):
    counted = compile_json_schema(SHORT, smollm2_vocab, strict=False, cache=False)
    structural = compile_json_schema(SHORT, smollm2_vocab, strict=False, cache=False, route="cfg")
    return counted, structural


def test_short_strings_are_counted(short_pair):
    counted, _ = short_pair
    assert isinstance(counted, UniqueItemsGrammar) and not isinstance(counted.inner, CompiledCFG)
    assert len(counted.text_patterns) == 6
    assert all(guard.is_plain_count for _, guard in counted.text_patterns)


def test_short_strings_walk_like_jsonschema(short_pair, smollm2_tokenizer):
    counted, _ = short_pair
    oracle = validator(SHORT)
    verdicts = []
    for value in SHORT_VALUES:
        text = serialize(value, SHORT, SHORT)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        matcher = counted.matcher()
        is_walked = matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()
        assert is_walked == oracle.is_valid(value), text
        verdicts.append(is_walked)
    assert sum(verdicts) == 6


def test_short_strings_masks_equal_the_structural_route(short_pair, smollm2_tokenizer):
    """Every mask of every valid walk over the whole vocabulary, each string character by
    character (every count within a token of maxLength): the tables of
    `_forbidden_plain_count` equal the structural route's counted chains."""
    counted, structural = short_pair
    oracle = validator(SHORT)
    num_masks = 0
    for value in SHORT_VALUES:
        if not oracle.is_valid(value):
            continue
        text = serialize(value, SHORT, SHORT)
        pieces = [smollm2_tokenizer.encode(text, add_special_tokens=False)]
        pieces.append(  # one token per character where the vocabulary has it
            [ids[0] for ch in text if len(ids := smollm2_tokenizer.encode(ch)) == 1]
        )
        for ids in pieces:
            if smollm2_tokenizer.decode(ids) != text:
                continue
            expected, found = structural.matcher(), counted.matcher()
            for token_id in ids:
                assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids())
                assert expected.accept_token(token_id) and found.accept_token(token_id)
                num_masks += 1
            assert found.is_accepting()
    assert num_masks > 200


def test_fill_bitmask_clears_many_refused_tokens(short_pair, smollm2_vocab, smollm2_tokenizer):
    """Near a short bound most of the vocabulary is refused (a packed row and the
    vectorised clearing): the row equals ``allowed_token_ids``."""
    import torch

    from formcast.grammar import allocate_token_bitmask

    counted, _ = short_pair
    bitmask = allocate_token_bitmask(2, smollm2_vocab.vocab_size)
    strided = torch.zeros(2 * bitmask.shape[1], dtype=torch.int32)[::2]  # (the torch path)
    text = serialize({"text": "", "code": "abcd"}, SHORT, SHORT)
    matcher = counted.matcher()
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
        for row in (bitmask[1], strided):
            matcher.fill_bitmask(row)
            words = row.contiguous().numpy().view(np.uint32)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")
            allowed = np.flatnonzero(bits[: smollm2_vocab.vocab_size])
            assert np.array_equal(allowed, matcher.allowed_token_ids())
        assert matcher.accept_token(token_id)


def test_chain_budget_where_the_matcher_cannot_count(smollm2_vocab):
    """Past the chain budget with no plan to record guards (or inside a complement), the
    strings stay chains: the switch to the floor happens once, then they are written out."""
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.json_schema.compile import marked_schema_tree

    fields = {f"f{k}": {"type": "string", "maxLength": 20} for k in range(6)}
    schema = {"type": "object", "properties": fields}
    tree = marked_schema_tree(
        schema, strict=False, max_count=256, count_strings_above=256, count_strings_floor=3,
        chain_max_states=100, share_refs=False,
    )  # fmt: skip
    dfa = regex_to_dfa(tree)

    def is_accepted(text: bytes) -> bool:
        state = dfa.walk(dfa.start_state, text)
        return state >= 0 and bool(dfa.is_accepting[state])

    assert is_accepted(b'{"f0":"' + b"a" * 20 + b'","f5":"' + b"b" * 20 + b'"}')
    assert not is_accepted(b'{"f5":"' + b"a" * 21 + b'"}')
