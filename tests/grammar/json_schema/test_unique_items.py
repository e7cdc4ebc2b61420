"""``uniqueItems`` over strings, integers and numbers: the matcher keeps items distinct.

Oracles: jsonschema for walks of whole instances (real SmolLM2 tokens, valid accepted and
invalid rejected); for masks, an independent check of every tested token at every position
of several walks: a token is allowed iff the inner grammar allows it and the text after it
still has a valid completion, i.e. its completed items (read with ``json.JSONDecoder``) are
distinct and, for integers, a pending ``0`` / ``-0`` is not already an item.
"""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.values import equality_key, serialize
from tests.grammar._byte_vocab import byte_vocab
from tests.grammar.schema_oracle import validator

STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
INTEGERS = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
NUMBERS = {"type": "array", "items": {"type": "number"}, "uniqueItems": True}
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU", "M"]  # 8 values: 109,601 distinct arrays
WEEKDAYS = {"type": "array", "items": {"enum": DAYS}, "uniqueItems": True}
ANYTHING = {"type": "array", "uniqueItems": True}  # items of any value
NESTED = {"type": "array", "items": {"type": ["array", "string", "null"]}, "uniqueItems": True}
TAGS = {"type": "array", "items": {"$ref": "#/$defs/tag"}, "uniqueItems": True, "maxItems": 4}
DOCUMENT = {
    "type": "object",
    "$defs": {"tag": {"type": "string", "minLength": 1}},
    "properties": {
        "tags": TAGS,
        "labels": TAGS,
        "ids": INTEGERS,
        "matrix": {"type": "array", "items": NUMBERS},
        "names": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["tags", "ids"],
    "additionalProperties": STRINGS,
}


def walk(grammar, tokenizer, text: str) -> bool:
    """Token by token through the matcher, then complete."""
    matcher = grammar.matcher()
    for token_id in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.accept_token(token_id):
            return False
    return matcher.is_accepting()


def walks_agree(grammar, tokenizer, schema, values) -> dict[bool, int]:
    """Each value's text walked token by token <=> jsonschema validity; counts by validity."""
    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for value in values:
        text = serialize(value, schema, schema)
        is_valid = oracle.is_valid(value)
        assert walk(grammar, tokenizer, text) == is_valid, text
        seen[is_valid] += 1
    return seen


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    return {
        name: compile_json_schema(schema, smollm2_vocab, cache=False)
        for name, schema in [
            ("strings", STRINGS),
            ("integers", INTEGERS),
            ("numbers", NUMBERS),
            ("document", DOCUMENT),
            ("weekdays", WEEKDAYS),
            ("anything", ANYTHING),
        ]
    }


def test_guarded_grammar_kinds(grammars):
    assert all(isinstance(g, UniqueItemsGrammar) for g in grammars.values())
    assert len(grammars["document"].patterns) == 5  # tags, labels, ids, matrix/[], extras


INSTANCES = {
    "strings": [[], ["a"], ["a", "b"], ["a", "a"], [".", "?", "!", ""], ["", ""], ["x", "y", "x"],
                ["ab", "a", "abc", "a"], ["é", "e"], ["\n", "\n"], ['"', "'", '"']],
    "integers": [[], [0], [0, 1, 10, 2], [1, 1], [0, 0], [10, 1, 0, 100, 10], [-1, 1, -1]],
    "numbers": [[1.5, 2, 1000.0], [1, 1.0], [2.5, 2.50], [0.1, 0.2, 0.1], [1e3, 1000], [-0.0, 0]],
    "weekdays": [[], ["MO"], ["M", "MO"], ["MO", "M"], ["MO", "MO"], ["M", "M"], DAYS,
                 [*DAYS, "MO"], ["SU", "SA", "SU"]],
    "document": [
        {"tags": ["a", "b"], "ids": [1, 2]},
        {"tags": ["a", "a"], "ids": [1, 2]},
        {"tags": ["a"], "ids": [2, 2]},
        {"tags": ["a"], "labels": ["b", "b"], "ids": []},
        {"tags": ["a"], "labels": ["a"], "ids": [1], "names": ["n", "n"]},
        {"tags": ["a"], "ids": [], "matrix": [[1, 2], [1, 2], [3, 3]]},
        {"tags": ["a"], "ids": [], "matrix": [[1, 2], [2, 1]]},
        {"tags": ["a"], "ids": [], "extra": ["x", "y"]},
        {"tags": ["a"], "ids": [], "extra": ["x", "x"]},
        {"tags": ["a", "b", "c", "d", "e"], "ids": []},
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", list(INSTANCES))
def test_walks_agree_with_jsonschema(grammars, smollm2_tokenizer, name):
    schema = {"strings": STRINGS, "integers": INTEGERS, "numbers": NUMBERS, "weekdays": WEEKDAYS}
    schema = schema.get(name, DOCUMENT)
    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for value in INSTANCES[name]:
        text = serialize(value, schema, schema)
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammars[name], smollm2_tokenizer, text) == is_valid, (name, text)
        seen[is_valid] += 1
    assert seen[True] and seen[False]


def test_number_texts_compare_as_values(grammars, smollm2_tokenizer):
    # texts serialize would not write: the grammar's other spellings of one value
    for text, is_valid in [
        ("[1, 1.0]", False),
        ("[1e3, 1000]", False),
        ("[1E+3, 100]", True),
        ("[0.5, 5e-1]", False),
        ("[-0, 0]", False),
    ]:
        assert walk(grammars["numbers"], smollm2_tokenizer, text) == is_valid, text
    assert not walk(grammars["integers"], smollm2_tokenizer, "[-0, 0]")


def _completed_items(text: str) -> tuple[list, str]:
    """The items after ``[`` that are complete, and the pending text of the last one."""
    decoder = json.JSONDecoder()
    items, i = [], 1
    while i < len(text):
        if text[i] in " ,\n\t":
            i += 1
            continue
        if text[i] == "]":
            return items, ""
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            return items, text[i:]
        is_scalar = not isinstance(value, str | list | dict)
        if is_scalar and (end == len(text) or text[end] in ".eE+-0123456789"):
            return items, text[i:]  # more of the number may follow ("2" of "2.5")
        items.append(value)
        i = end
    return items, ""


def _has_completion(text: bytes, kind: str) -> bool:
    decoded = text.decode("utf-8", errors="replace")
    items, pending = _completed_items(decoded)
    keys = [equality_key(item) for item in items]  # (True != 1, 1 == 1.0, objects unordered)
    if len(set(keys)) < len(keys):
        return False
    if kind == "any":  # only a prefix of true / false / null completes one way alone
        literals = [text for text in ("true", "false", "null") if text.startswith(pending)]
        return not pending or not literals or equality_key(json.loads(literals[0])) not in keys
    if kind == "enum":  # a value not used yet must start like the pending text
        unused = [json.dumps(d) for d in DAYS if d not in items]
        if decoded.rstrip().endswith(",") and not pending:
            return bool(unused)
        return not pending or any(u.startswith(pending) for u in unused)
    return not (kind == "integer" and pending in ("0", "-0") and 0 in items)


@pytest.mark.parametrize(
    ("name", "kind", "text"),
    [
        ("strings", "string", '[".", "?", "", "!", "_", "a"]'),
        ("strings", "string", '["\\"", "\'", "\\\\"]'),
        ("integers", "integer", "[0, 1, 10, 2, 100, -1]"),
        ("numbers", "number", "[2, 1.5, 20, 2.5, 2e3, -1]"),
        ("weekdays", "enum", '["M", "MO", "TU", "WE", "TH", "FR", "SA", "SU"]'),
        ("anything", "any", '[1, true, "a", [1, 2], {"a": 1}, null, 1.5, [], {}, false, "b", 0]'),
        ("anything", "any", '[[true], {"a": [1, {}]}, "true", "", 10, {"b": null}, [[]], [0]]'),
    ],
)
def test_masks_agree_with_the_completion_oracle(grammars, smollm2_tokenizer, name, kind, text):
    grammar = grammars[name]
    token_bytes = grammar.vocab.token_bytes
    rng = random.Random(0)
    interesting = [
        t
        for t, data in enumerate(token_bytes)
        if data
        and (
            set(data) & set(b'"\\,]-0123456789.eE' + (b"[]{}truefalsn" if kind == "any" else b""))
            or rng.random() < 0.01
            or kind == "enum"
        )
    ]
    matcher = grammar.matcher()
    prefix = b""
    num_forbidden = 0
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
        allowed = set(matcher.allowed_token_ids().tolist())
        inner_allowed = set(matcher._inner.allowed_token_ids().tolist())
        assert allowed  # never stuck
        for t in interesting:
            if t not in inner_allowed:
                assert t not in allowed
                continue
            expected = _has_completion(prefix + token_bytes[t], kind)
            assert (t in allowed) == expected, (prefix, token_bytes[t])
            num_forbidden += not expected
        assert matcher.accept_token(token_id)
        prefix += token_bytes[token_id]
    assert matcher.is_accepting()
    assert num_forbidden > 0  # the walk passed positions where some token repeats an item


def test_bitmask_equals_allowed_ids(grammars, smollm2_tokenizer):
    from formcast.grammar import allocate_token_bitmask

    grammar = grammars["strings"]
    matcher = grammar.matcher()
    for token_id in smollm2_tokenizer.encode('[".", "', add_special_tokens=False):
        assert matcher.accept_token(token_id)
    bitmask = allocate_token_bitmask(2, grammar.vocab_size)
    matcher.fill_bitmask(bitmask, 1)
    bits = np.unpackbits(bitmask[1].numpy().view(np.uint8), bitorder="little")
    from_mask = np.flatnonzero(bits[: grammar.vocab_size])
    assert np.array_equal(from_mask, matcher.allowed_token_ids())
    assert len(matcher.forbidden_token_ids()) > 0  # '."' and friends repeat "."


@pytest.mark.parametrize("layout", ["1d", "wide", "strided", "alternating"])
def test_bitmask_layouts_equal_allowed_ids(grammars, smollm2_tokenizer, layout):
    """Every bitmask layout gets the refusal applied: the prepared-rows fast path (shared
    with the inner matcher, alternating between two bitmasks) and the torch fallbacks."""
    from formcast.grammar import allocate_token_bitmask

    grammar = grammars["strings"]
    matcher = grammar.matcher()
    for token_id in smollm2_tokenizer.encode('[".", "', add_special_tokens=False):
        assert matcher.accept_token(token_id)
    num_words = (grammar.vocab_size + 31) // 32
    if layout == "1d":
        bitmask, row = torch.full((num_words,), -1, dtype=torch.int32), 0
    elif layout == "wide":  # more words than the vocabulary needs: the torch path
        bitmask, row = torch.full((2, num_words + 3), -1, dtype=torch.int32), 1
    elif layout == "strided":
        bitmask, row = torch.full((num_words, 2), -1, dtype=torch.int32).t(), 1
    else:  # another bitmask prepared in between must not leave its rows behind
        other = allocate_token_bitmask(1, grammar.vocab_size)
        grammar.matcher().fill_bitmask(other, 0)
        bitmask, row = allocate_token_bitmask(2, grammar.vocab_size), 1
    matcher.fill_bitmask(bitmask, row)
    words = (bitmask if bitmask.dim() == 1 else bitmask[row]).contiguous().numpy()
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    assert np.array_equal(np.flatnonzero(bits[: grammar.vocab_size]), matcher.allowed_token_ids())
    assert not bits[grammar.vocab_size :].any()
    assert len(matcher.forbidden_token_ids()) > 0


def test_rollback_fork_and_reset(grammars, smollm2_tokenizer):
    grammar = grammars["strings"]
    ids = smollm2_tokenizer.encode('["a", "b"', add_special_tokens=False)
    matcher = grammar.matcher()
    assert matcher.accept_tokens(ids) == len(ids)
    twin = matcher.fork()
    close = smollm2_tokenizer.encode("]", add_special_tokens=False)
    assert matcher.accept_tokens(close) == len(close) and matcher.is_accepting()
    assert not twin.is_accepting()
    matcher.rollback(len(close) + 2)
    assert matcher.accept_tokens(ids[-2:]) == 2
    again = smollm2_tokenizer.encode(', "a"', add_special_tokens=False)
    assert twin.accept_tokens(again) < len(again)  # "a" again is refused, twin unchanged
    assert not matcher.accept_bytes(b', "a"') and matcher.accept_bytes(b', "c"]')
    matcher.reset()
    assert matcher.num_accepted == 0 and matcher.accept_bytes(b'["a"]')


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    st.lists(st.sampled_from(["", "a", "b", "ab", ".", "?", "x y", "é"]), max_size=5),
    st.lists(st.integers(-12, 12), max_size=5),
)
def test_generated_lists(grammars, smollm2_tokenizer, strings, integers):
    for name, schema, value in [("strings", STRINGS, strings), ("integers", INTEGERS, integers)]:
        text = serialize(value, schema, schema)
        is_valid = validator(schema).is_valid(value)
        assert walk(grammars[name], smollm2_tokenizer, text) == is_valid, text


def test_refused_where_the_matcher_cannot_tell_arrays_apart(smollm2_vocab):
    for schema, pointer in [
        ({"anyOf": [STRINGS, {"type": "array", "items": {"type": "integer"}}]}, "/anyOf/0"),
        ({"properties": {"t": STRINGS}, "additionalProperties": True}, None),
        ({"anyOf": [STRINGS, INTEGERS]}, "/anyOf/1"),
        # items holding values nested without bound: no item automaton, not an open kind
        ({"type": "array", "items": {"type": "array", "maxItems": 2}, "uniqueItems": True}, ""),
        ({"type": "array", "items": {"type": ["array", "integer"]}, "uniqueItems": True}, ""),
    ]:
        if pointer is None:  # extras exclude the declared name: no clash
            assert isinstance(
                compile_json_schema(schema, smollm2_vocab, strict=False, cache=False),
                UniqueItemsGrammar,
            )
            continue
        with pytest.raises(SchemaError) as info:
            compile_json_schema(schema, smollm2_vocab, cache=False)
        assert info.value.keyword == "uniqueItems", info.value
        assert info.value.pointer == pointer, info.value


def test_lenient_drops_the_guard_with_a_warning(smollm2_vocab, smollm2_tokenizer):
    schema = {"anyOf": [STRINGS, {"type": "array", "items": {"type": "integer"}}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grammar = compile_json_schema(schema, smollm2_vocab, lenient=True, cache=False)
    assert any("uniqueItems" in str(w.message) for w in caught)
    assert walk(grammar, smollm2_tokenizer, '["a", "a"]')  # a superset, as documented


def test_plain_regex_still_refuses(smollm2_vocab):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(STRINGS)
    assert info.value.keyword == "uniqueItems"


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "tags": STRINGS,
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["tags"],
        }
    },
    "$ref": "#/$defs/node",
}


def test_structural_route_guards_shared_nonterminals(smollm2_vocab, smollm2_tokenizer):
    # recursive: only the structural route; the $ref target is one nonterminal for every depth
    grammar = compile_json_schema(TREE, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(TREE)
    for value in [
        {"tags": ["a", "b"], "children": [{"tags": ["a"]}, {"tags": ["b", "c"]}]},
        {"tags": ["a"], "children": [{"tags": ["x", "x"]}]},
        {"tags": ["a", "a"]},
        {"tags": [], "children": [{"tags": ["y"], "children": [{"tags": ["z", "y", "z"]}]}]},
    ]:
        text = serialize(value, TREE, TREE)
        assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value), text
    # the same document on the forced structural route, not recursive
    cfg = compile_json_schema(DOCUMENT, smollm2_vocab, route="cfg", cache=False)
    assert isinstance(cfg, UniqueItemsGrammar)
    text = serialize({"tags": ["a", "a"], "ids": []}, DOCUMENT, DOCUMENT)
    assert not walk(cfg, smollm2_tokenizer, text)
    text = serialize({"tags": ["a", "b"], "ids": [3, 1]}, DOCUMENT, DOCUMENT)
    assert walk(cfg, smollm2_tokenizer, text)


def test_shared_nonterminals_at_their_use_sites(smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "object",
        "$defs": {"T": {"type": "object", "properties": {"tags": STRINGS}}},
        "properties": {
            "a": {"$ref": "#/$defs/T"},
            "b": {"type": "object", "properties": {"tags": {"type": "array"}}},
        },
    }
    # both routes know the places: a/tags unique, b/tags plain (on the structural route T's
    # paths are relative to its use sites, expanded by the plan)
    oracle = validator(schema)
    for route in ("regex", "cfg"):
        grammar = compile_json_schema(schema, smollm2_vocab, route=route, cache=False)
        assert isinstance(grammar, UniqueItemsGrammar), route
        for value in [{"a": {"tags": ["x", "x"]}}, {"b": {"tags": ["x", "x"]}},
                      {"a": {"tags": ["x", "y"]}, "b": {"tags": [1, 1]}}]:  # fmt: skip
            text = serialize(value, schema, schema)
            assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value), text
    # T used where another schema writes plain arrays at the same keys: refused
    clash = {
        "$defs": {"T": {"type": "object", "properties": {"tags": STRINGS}}},
        "anyOf": [
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/T"}}},
            {"type": "object", "properties": {"a": {"properties": {"tags": {"type": "array"}}}}},
        ],
    }
    for route in ("regex", "cfg"):
        with pytest.raises(SchemaError) as info:
            compile_json_schema(clash, smollm2_vocab, route=route, cache=False)
        assert (info.value.keyword, info.value.pointer) == (
            "uniqueItems",
            "/$defs/T/properties/tags",
        )


def test_objects_told_apart_by_the_keys_before(smollm2_vocab, smollm2_tokenizer):
    """Two object schemas with a property of the same name, unique in one and plain in the
    other (GitHub Actions jobs: ``needs`` of a job and of a reusable-workflow call): the keys
    written before it tell them apart (properties are written in schema order)."""
    schema = {
        "type": "object",
        "additionalProperties": {
            "oneOf": [
                {"type": "object", "properties": {"runs-on": {"type": "string"}, "needs": STRINGS},
                 "required": ["runs-on"], "additionalProperties": False},
                {"type": "object", "properties": {"uses": {"type": "string"},
                                                  "needs": {"type": "array"}},
                 "required": ["uses"], "additionalProperties": False},
            ]
        },
    }  # fmt: skip
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    for text in [  # members in schema order, as formcast writes them
        '{"j":{"runs-on":"x","needs":["a","b"]}}',
        '{"j":{"runs-on":"x","needs":["a","a"]}}',
        '{"j":{"uses":"x","needs":["a","a"]}}',
        '{"j":{"uses":"x","needs":[1,1]},"k":{"runs-on":"y","needs":["b","b"]}}',
        '{"j":{"uses":"x","needs":[1,1]},"k":{"runs-on":"y","needs":["b","c"]}}',
    ]:
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammar, smollm2_tokenizer, text) == is_valid, text
    # without a required key before it, "needs" first is either: refused
    for branch in schema["additionalProperties"]["oneOf"]:
        branch["required"] = []
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema, smollm2_vocab, cache=False)
    assert info.value.keyword == "uniqueItems"


def test_disk_cache_hit_keeps_the_guard(smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    first = compile_json_schema(DOCUMENT, smollm2_vocab)
    second = compile_json_schema(DOCUMENT, smollm2_vocab)  # from disk: the tree is not built
    assert isinstance(second, UniqueItemsGrammar)
    assert second.patterns == first.patterns
    text = serialize({"tags": ["a", "a"], "ids": []}, DOCUMENT, DOCUMENT)
    assert not walk(second, smollm2_tokenizer, text)
    first_tree = compile_json_schema(TREE, smollm2_vocab)  # the structural route's cache
    second_tree = compile_json_schema(TREE, smollm2_vocab)
    assert isinstance(second_tree, UniqueItemsGrammar)
    assert second_tree.patterns == first_tree.patterns
    assert not walk(second_tree, smollm2_tokenizer, '{"tags": ["q", "q"]}')


def test_contains_with_unique_items_is_refused_not_ignored(smollm2_vocab):
    # items of any number >= 3 or any other value: neither an open kind nor an automaton
    schema = {"type": "array", "items": {"minimum": 3}, "contains": {"const": 4},
              "uniqueItems": True}  # fmt: skip
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema, smollm2_vocab, cache=False)
    assert info.value.keyword == "uniqueItems"


def test_items_of_any_value(grammars, smollm2_vocab, smollm2_tokenizer):
    # compared as jsonschema compares them: true != 1, 1 == 1.0, objects by their members
    # (any order), containers nested; a pending prefix of a used literal is refused
    tagged = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True,
              "items": {"description": "anything"}, "contains": {"const": 1}}}}  # fmt: skip
    cases = [
        (ANYTHING, grammars["anything"], [
            [1, True], [1, 1.0], [0, False], [None, None], ["1", 1], [[1], [1]], [[1], [1, 2]],
            [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [{"a": [1]}, {"a": [1.0]}], [{}, []],
            [True, False, None, 0, "", [], {}], [[True], [1]], ["a", "b", "a"],
        ]),
        (NESTED, compile_json_schema(NESTED, smollm2_vocab, cache=False), [
            [[1], [1]], [[1], [1.0, 2]], ["a", ["a"]], [None, [None]], [[], []], [[[]], []],
        ]),
        (tagged, compile_json_schema(tagged, smollm2_vocab, cache=False), [
            {"tags": [1]}, {"tags": [2]}, {"tags": [1, 1]}, {"tags": [2, 1, True]},
            {"tags": [[1], 1, [1]]}, {},
        ]),
    ]  # fmt: skip
    for schema, grammar, values in cases:
        assert isinstance(grammar, UniqueItemsGrammar)
        seen = walks_agree(grammar, smollm2_tokenizer, schema, values)
        assert seen[True] and seen[False]
    # spellings serialize would not write, and literal prefixes
    grammar = grammars["anything"]
    for text, is_valid in [("[1e0, 1]", False), ('[{"a":1,"b":[]}, {"b":[],"a":1.0}]', False),
                           ("[null, nul", False), ("[true, false, tr", False)]:  # fmt: skip
        matcher = grammar.matcher()
        assert matcher.accept_bytes(text.encode()) == is_valid, text


def test_enum_domains_past_the_enumeration_budget(grammars, smollm2_vocab, smollm2_tokenizer):
    grammar = grammars["weekdays"]
    assert isinstance(grammar, UniqueItemsGrammar)
    # all eight used: neither another item nor a used value can start
    matcher = grammar.matcher()
    text = '["M", "MO", "TU", "WE", "TH", "FR", "SA", "SU"'
    assert matcher.accept_bytes(text.encode())
    assert not matcher.accept_bytes(b", ")
    assert matcher.accept_bytes(b"]") and matcher.is_accepting()
    # more items required than there are values: no array is valid
    too_many = {**WEEKDAYS, "minItems": 9}
    with pytest.raises(SchemaError):
        compile_json_schema(too_many, smollm2_vocab, cache=False)
    # an enum whose sibling keyword drops values: only admitted ones count
    short = {"type": "array", "uniqueItems": True, "items": {"enum": DAYS, "maxLength": 1}}
    assert walk(compile_json_schema(short, smollm2_vocab, cache=False), smollm2_tokenizer, '["M"]')


# pyproject.toml's [project] (PEP 621): "version" is required unless "dynamic" names it
PROJECT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "dynamic": {"type": "array", "uniqueItems": True, "items": {"enum": DAYS + ["version"]}},
    },
    "required": ["name"],
    "if": {"not": {"properties": {"dynamic": {"contains": {"const": "version"}}}}},
    "then": {"required": ["version"]},
}


def test_if_then_around_a_unique_enum_array(smollm2_vocab, smollm2_tokenizer):
    # "then or not if": both branches write "dynamic" with the same item domain, one with
    # contains, so one guard serves both (the full expansion wrote "items but not version"
    # in one branch: another item kind at the same place, refused)
    grammar = compile_json_schema(PROJECT, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    seen = walks_agree(
        grammar,
        smollm2_tokenizer,
        PROJECT,
        [
            {"name": "p", "version": "1"},
            {"name": "p"},
            {"name": "p", "dynamic": ["version"]},
            {"name": "p", "dynamic": ["MO", "version", "TU"]},
            {"name": "p", "dynamic": ["MO", "version", "MO"]},
            {"name": "p", "dynamic": ["version", "version"]},
            {"name": "p", "dynamic": ["MO", "TU"]},
            {"name": "p", "version": "1", "dynamic": ["MO", "TU"]},
            {"name": "p", "version": "1", "dynamic": ["TU", "TU"]},
            {"name": "p", "version": "1", "dynamic": DAYS + ["version"]},
            {"name": "p", "dynamic": DAYS},
        ],
    )
    assert seen[True] >= 4 and seen[False] >= 4
    # all eight other values used, no version yet: only "version" can start an item
    matcher = grammar.matcher()
    assert matcher.accept_bytes(serialize({"name": "p"}, PROJECT, PROJECT)[:-1].encode())
    body = ", ".join(json.dumps(d) for d in DAYS)
    assert matcher.accept_bytes(f', "dynamic": [{body}, "'.encode())
    assert not matcher.fork().accept_bytes(b'M"')
    assert matcher.accept_bytes(b'version"]}') and matcher.is_accepting()


PATTERNED = {
    "type": "object",
    "properties": {
        "columns": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
            "uniqueItems": True,
        },
        "to": {
            "type": "array",
            "items": {"type": "string", "format": "email"},
            "uniqueItems": True,
        },
    },
}


def test_open_patterns_and_formats(smollm2_vocab, smollm2_tokenizer):
    # every prefix of an identifier or an email address can still grow without bound
    grammar = compile_json_schema(PATTERNED, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar) and len(grammar.patterns) == 2
    oracle = validator(PATTERNED)
    for value in [
        {"columns": ["id", "name", "id_2"], "to": ["a@b.org", "c@d.org"]},
        {"columns": ["id", "name", "id"]},
        {"to": ["a@b.org", "a@b.org"]},
        {"columns": ["x"], "to": ["x@y.z"]},
    ]:
        text = serialize(value, PATTERNED, PATTERNED)
        assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value), text


def test_guards_beside_a_not_on_other_keywords(smollm2_vocab, smollm2_tokenizer):
    # tsconfig's compilerOptions: "not": {"required": ["outDir", "outFile"]} beside unique lists
    schema = {
        "type": "object",
        "properties": {"lib": STRINGS, "outDir": {"type": "string"}, "outFile": {"type": "string"}},
        "not": {"required": ["outDir", "outFile"]},
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    seen = walks_agree(
        grammar,
        smollm2_tokenizer,
        schema,
        [
            {"lib": ["a", "b"], "outDir": "d"},
            {"lib": ["a", "a"], "outDir": "d"},
            {"lib": ["a"], "outDir": "d", "outFile": "f"},
            {"lib": [], "outFile": "f"},
        ],
    )
    assert seen[True] and seen[False]
    # a uniqueItems inside the negated schema is refused, never guarded
    negated = {"type": "array", "not": STRINGS}
    with pytest.raises(SchemaError) as info:
        compile_json_schema(negated, smollm2_vocab, cache=False)
    assert info.value.keyword == "uniqueItems"


def test_large_enum_on_the_structural_route(smollm2_vocab, smollm2_tokenizer):
    schema = {**TREE, "$defs": {"node": {**TREE["$defs"]["node"]}}}
    schema["$defs"]["node"]["properties"] = {
        **TREE["$defs"]["node"]["properties"],
        "days": WEEKDAYS,
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    assert walk(grammar, smollm2_tokenizer, '{"tags": [], "days": ["MO", "M"]}')
    assert not walk(grammar, smollm2_tokenizer, '{"tags": [], "days": ["MO", "MO"]}')


def test_pattern_property_classes_told_apart(smollm2_vocab, smollm2_tokenizer):
    """Extra keys of one object in different ``patternProperties`` classes never share a
    key (GitLab CI: ``.hidden`` jobs hold any object, named jobs a unique ``needs``): the
    key written tells the matcher which class an array is under."""
    schema = {
        "type": "object",
        "patternProperties": {
            "^\\.": {"type": "object"},
            "^[a-z][a-z0-9_-]*$": {
                "type": "object",
                "properties": {"needs": STRINGS},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }
    grammar = compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    for text in [
        '{"build":{"needs":["a","b"]}}',
        '{"build":{"needs":["a","a"]}}',
        '{".hidden":{"needs":["a","a"]}}',
        '{".hidden":{"needs":["a","a"]},"test":{"needs":["x","x"]}}',
        '{".hidden":{"needs":[1,1]},"test":{"needs":["x","y"]}}',
    ]:
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammar, smollm2_tokenizer, text) == is_valid, text
    # classes of two objects (union branches) may share a key: refused as before
    clash = {
        "anyOf": [
            {"type": "object", "patternProperties": {"^a": {"type": "object"}}},
            {"type": "object", "patternProperties": {"^a": {"properties": {"needs": STRINGS}}}},
        ]
    }
    with pytest.raises(SchemaError) as info:
        compile_json_schema(clash, smollm2_vocab, strict=False, cache=False)
    assert info.value.keyword == "uniqueItems"


def test_recursive_nonterminals_keep_their_entries(smollm2_vocab, smollm2_tokenizer):
    """A recursive ``$ref`` is used at its entries, then any number of turns, the last one
    written out (ESLint's ``overrides``: a unique ``plugins`` at ``overrides/[]/plugins``
    and deeper, plain arrays as values of ``rules``' any-key map); a coarser place (``**``
    from the root) met the map's values and was refused."""
    override = {
        "type": "object",
        "properties": {
            "plugins": STRINGS,
            "rules": {"type": "object", "additionalProperties": {"type": "array"}},
            "overrides": {"type": "array", "items": {"$ref": "#/$defs/override"}},
        },
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "$defs": {"override": override},
        "properties": {"overrides": {"type": "array", "items": {"$ref": "#/$defs/override"}}},
        "additionalProperties": False,
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    for value in [
        {"overrides": [{"plugins": ["a", "b"], "rules": {"plugins": [1, 1]}}]},
        {"overrides": [{"plugins": ["a", "a"]}]},
        {"overrides": [{"overrides": [{"plugins": ["x", "y"], "rules": {"x": ["x", "x"]}}]}]},
        {"overrides": [{"overrides": [{"overrides": [{"plugins": ["x", "x"]}]}]}]},
        {"overrides": [{"rules": {"plugins": ["a", "a"]}, "overrides": [{"plugins": ["z"]}]}]},
    ]:
        text = serialize(value, schema, schema)
        assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value), text


def test_mutually_recursive_nonterminals(smollm2_vocab, smollm2_tokenizer):
    """``A`` holds ``B``, ``B`` holds ``A`` and a unique array: the turns through both are
    places of the array, and a plain array beside it elsewhere in ``A`` is not one."""
    schema = {
        "type": "object",
        "$defs": {
            "A": {
                "type": "object",
                "properties": {"b": {"$ref": "#/$defs/B"}, "ids": {"type": "array"}},
                "additionalProperties": False,
            },
            "B": {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}, "ids": INTEGERS},
                "additionalProperties": False,
            },
        },
        "properties": {"root": {"$ref": "#/$defs/A"}},
        "additionalProperties": False,
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    for value in [
        {"root": {"ids": [1, 1], "b": {"ids": [1, 2]}}},
        {"root": {"b": {"ids": [3, 3]}}},
        {"root": {"b": {"a": {"ids": [5, 5], "b": {"ids": [4, 5, 4]}}}}},
        {"root": {"b": {"a": {"b": {"a": {"ids": [0, 0], "b": {"ids": [0]}}}}}}},
    ]:
        text = serialize(value, schema, schema)
        assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value), text


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        (("a", "**", "b"), ("a", "b"), True),
        (("a", "**", "b"), ("a", "x", "y", "b"), True),
        (("a", "**", "b"), ("a", "x", "y"), False),
        (("**",), (), True),
        (("**", "b"), ("b", "b"), True),
        (("a", "**"), ("b",), False),
        (("a", "[]", "**", "[]"), ("a", "[]"), False),
        (("a", "[]", "**", "[]"), ("a", "[]", "[]"), True),
    ],
)
def test_path_patterns_with_inner_any_runs(pattern, path, expected):
    from formcast.grammar.json_schema.unique_plan import path_matches

    assert path_matches(pattern, path) is expected


def test_branching_reference_chains_expand_within_a_budget(smollm2_vocab, smollm2_tokenizer):
    """Forty ``$defs`` each using the next twice: 2^40 use chains to the unique array at the
    bottom. The plan walks chains one by one up to a budget, then places the array at "**"
    (any place: coarser, never wrong); the walks still agree with jsonschema."""
    depth = 40
    defs = {
        f"d{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}},
            "additionalProperties": False,
        }
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "object", "properties": {"tags": STRINGS}}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    for tags in (["x", "y"], ["x", "x"]):
        value: dict = {"tags": tags}
        for _ in range(depth):
            value = {"b": value}
        text = json.dumps(value, separators=(",", ":"))
        assert walk(grammar, smollm2_tokenizer, text) == oracle.is_valid(value)


def test_any_value_token_that_ends_a_string_and_completes_another_item(smollm2_vocab):
    """A token that closes a string item and completes a number item after it is walked, not
    judged by the string before its quote (SmolLM2 has none: two are added)."""
    from tests.grammar.json_schema.test_length_guard import _with_tokens

    vocab = _with_tokens(smollm2_vocab, [b'",1,', b'",2,'])
    repeat, fresh = smollm2_vocab.vocab_size, smollm2_vocab.vocab_size + 1
    grammar = compile_json_schema(ANYTHING, vocab, cache=False)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'[1,"a')
    allowed = set(matcher.allowed_token_ids().tolist())
    assert repeat not in allowed and fresh in allowed


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 1.5, -0.5])
    | st.sampled_from(["", "a", "1", "true"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner,
                                                                max_size=2),
    max_leaves=4,
)  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(_JSON_VALUES, max_size=4))
def test_generated_lists_of_any_values(grammars, smollm2_tokenizer, values):
    # equal pairs are frequent (few leaves): both outcomes occur across the examples
    text = serialize(values, ANYTHING, ANYTHING)
    is_valid = validator(ANYTHING).is_valid(values)
    assert walk(grammars["anything"], smollm2_tokenizer, text) == is_valid, text


def test_tuple_arrays(smollm2_vocab, smollm2_tokenizer):
    # prefixItems (and draft-07's array items) of open kinds: one kind for every position, or
    # any value for a mix; integer beside another kind is refused (0 completes alone there)
    mixed = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}],
             "items": {"type": "string"}, "uniqueItems": True}  # fmt: skip
    old = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
           "items": [{"type": "string"}], "additionalItems": {"type": "string"},
           "uniqueItems": True}  # fmt: skip
    cases = [
        (mixed, [["a", 1, "b"], ["a", 1, "a"], ["1", 1], ["a", 1.5, "1.5"], ["a"], [1, 1]]),
        (old, [["a", "b"], ["a", "a"], ["a", "b", "a"], []]),
    ]
    for schema, values in cases:
        grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
        assert isinstance(grammar, UniqueItemsGrammar)
        seen = walks_agree(grammar, smollm2_tokenizer, schema, values)
        assert seen[True] and seen[False]
    counted = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
               "uniqueItems": True}  # fmt: skip
    with pytest.raises(SchemaError) as info:
        compile_json_schema(counted, smollm2_vocab, cache=False)
    assert info.value.keyword == "uniqueItems"


def test_any_value_string_item_completed_by_its_head(grammars):
    # inside a string item, a token whose bytes before its quote complete a used string
    # (looked up by that head) is refused; another head is not
    grammar = grammars["anything"]
    ids_of = {data: t for t, data in enumerate(grammar.vocab.token_bytes)}
    repeats = [ids_of[d] for d in (b'."', b'.",') if d in ids_of]
    fresh = [ids_of[d] for d in (b'?"', b'?",') if d in ids_of]
    assert repeats and fresh
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'[1, "a.", "a')
    allowed = set(matcher.allowed_token_ids().tolist())
    assert not allowed & set(repeats) and set(fresh) <= allowed


def test_any_value_items_in_a_recursive_schema(smollm2_vocab, smollm2_tokenizer):
    # the guard's pattern ("**", kids, [], tags) also matches inside its own items, where
    # values are unconstrained: no guard applies there (an array named tags may repeat)
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "tags": {"type": "array", "uniqueItems": True},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    seen = walks_agree(
        grammar,
        smollm2_tokenizer,
        schema,
        [
            {"tags": [{"tags": [1, 1]}], "kids": [{"tags": [1, 2]}]},
            {"tags": [[1, 1], {"tags": ["a", "a"]}]},
            {"tags": [{"kids": [{"tags": [1, 1]}]}]},  # matches ("**", kids, [], tags): free
            {"kids": [{"tags": [1, 1]}]},
            {"kids": [{"kids": [{"tags": [{"a": 1}, {"a": 1.0}]}]}]},
            {"tags": [{"tags": [1]}, {"tags": [1]}]},
        ],
    )
    assert seen[True] and seen[False]


def test_paths_meet_without_wildcards_agrees_with_concrete_paths():
    """`unique_plan.paths_meet` on patterns without ``**`` (segment by segment) against
    brute force: some concrete path over a small alphabet matches both."""
    import itertools

    from formcast.grammar.json_schema.unique_plan import ELEMENT, path_matches, paths_meet

    segments = ["a", "b", ELEMENT, ("", frozenset({"a"})), ("", frozenset({"a", "b"}))]
    concrete = ["a", "b", "c", ELEMENT]
    num_meeting = 0
    for size_first, size_second in itertools.product(range(3), repeat=2):
        for first in itertools.product(segments, repeat=size_first):
            for second in itertools.product(segments, repeat=size_second):
                expected = any(
                    path_matches(first, path) and path_matches(second, path)
                    for path in itertools.product(concrete, repeat=size_first)
                )
                assert paths_meet(first, second) == expected, (first, second)
                num_meeting += expected
    assert num_meeting > 10


def _crafted_token_verdicts(grammar, vocab, num_extra: int, texts, has_completion):
    """Walk ``texts`` byte by byte (token ``b`` is byte ``b``); at every prefix, each of the
    ``num_extra`` tokens after the single bytes that the inner grammar allows is allowed
    iff ``has_completion(prefix + its bytes)``, through ``allowed_token_ids`` and
    ``fill_bitmask`` alike. Returns (verdicts refused, verdicts allowed)."""
    from formcast.grammar import allocate_token_bitmask

    assert isinstance(grammar, UniqueItemsGrammar)
    extra_ids = range(256, 256 + num_extra)
    bitmask = allocate_token_bitmask(1, grammar.vocab_size)
    num_refused = num_allowed = 0
    for text in texts:
        matcher = grammar.matcher()
        prefix = b""
        for byte in text.encode():
            allowed = set(matcher.allowed_token_ids().tolist())
            inner_allowed = set(matcher._inner.allowed_token_ids().tolist())
            matcher.fill_bitmask(bitmask, 0)
            bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
            assert set(np.flatnonzero(bits[: grammar.vocab_size]).tolist()) == allowed
            for t in extra_ids:
                if t not in inner_allowed:
                    assert t not in allowed
                    continue
                expected = has_completion(prefix + vocab.token_bytes[t])
                assert (t in allowed) == expected, (prefix, vocab.token_bytes[t])
                num_refused += not expected
                num_allowed += expected
            assert matcher.accept_token(byte)
            prefix += bytes([byte])
        assert matcher.is_accepting()
    return num_refused, num_allowed


def test_tokens_that_open_a_guarded_array_and_repeat_an_item():
    """A token may open a guarded array and complete two of its items within itself (mask
    kind ``enter`` between members, ``enter_string`` from inside the key before it): the
    mask refuses exactly those whose items repeat (oracle: the items read from the text)."""
    extra = [b"[1,1", b"[1,2", b" [1,1]", b"[2,1,2", b'k":[1,1', b'k":[1,2', b'k": [2,2]']
    vocab = byte_vocab(extra)
    schema = {"type": "object", "properties": {"k": INTEGERS}, "additionalProperties": False}
    grammar = compile_json_schema(schema, vocab, cache=False)

    def has_completion(data: bytes) -> bool:
        text = data.decode()
        items, _ = _completed_items(text[text.index("[") :])
        return len(set(items)) == len(items)

    texts = ('{"k":[1,2]}', '{"k": [2]}')
    num_refused, num_allowed = _crafted_token_verdicts(
        grammar, vocab, len(extra), texts, has_completion
    )
    assert num_refused >= 3 and num_allowed >= 3  # both kinds of position were met


def test_tokens_that_complete_an_item_and_start_the_next():
    """In an array of automaton items (strings of at most one character), a token may
    complete the pending item, and after a comma start or complete the next ones: the
    next item's completions must avoid the item just completed too. Masks against an
    oracle that reads the items and the pending one's only completion."""
    from formcast.grammar.json_schema.item_automaton import ItemAutomaton

    extra = [b'a","a', b'a","b', b'a", "a"', b'a","', b'","', b'b","a', b'", "', b'"],']
    vocab = byte_vocab(extra)
    schema = {"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True}
    grammar = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(grammar.patterns[0][1], ItemAutomaton)

    def has_completion(data: bytes) -> bool:
        items, pending = _completed_items(data.decode())
        if len(set(items)) < len(items):
            return False
        # a pending '"c' can only complete as "c"; '"' and nothing pending have new values
        return not (len(pending) == 2 and pending[1] != '"' and pending[1] in items)

    texts = ('["b", "a", ""]', '["", "a"]')
    num_refused, num_allowed = _crafted_token_verdicts(
        grammar, vocab, len(extra), texts, has_completion
    )
    assert num_refused >= 3 and num_allowed >= 3


def test_string_item_tokens_with_escapes_and_two_quotes():
    """Open string items: a token whose quotes are all escaped stays inside (never refused),
    one with an escape before its closing quote is walked, one that closes the item and
    opens the next (two quotes) is looked up by its head: each against the oracle."""
    extra = [b'\\\\"', b'\\"', b'\\\\", "', b'a","', b'a", "b', b'\\\\"]', b'a"]', b'"\\\\"']
    vocab = byte_vocab(extra)
    grammar = compile_json_schema(STRINGS, vocab, cache=False)
    texts = ('["\\\\", "a", "\\"", "b"]', '["a", "\\\\\\\\", "c"]')
    num_refused, num_allowed = _crafted_token_verdicts(
        grammar, vocab, len(extra), texts, lambda data: _has_completion(data, "string")
    )
    assert num_refused >= 3 and num_allowed >= 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(alphabet='ab\\"\x7f\xe9\U0001f600', max_size=4),
        min_size=1,
        max_size=12,
        unique=True,
    ),
    st.data(),
)
def test_enum_dead_prefixes_are_those_without_unused_values(values, data):
    """``EnumDomain.dead_prefixes`` (masks find dead ends from them) against
    ``has_unused`` at every proper prefix of every value's text."""
    from formcast.grammar.json_schema.unique_plan import EnumDomain

    domain = EnumDomain(values)
    used = frozenset(data.draw(st.lists(st.sampled_from(values), max_size=len(values))))
    dead = domain.dead_prefixes(used)
    prefixes = {text[:end] for text in domain.texts for end in range(1, len(text))}
    assert dead <= prefixes
    for prefix in prefixes:
        assert (prefix in dead) == (not domain.has_unused(prefix, used)), prefix
    assert domain.dead_prefixes(used) is dead  # kept for the set


def test_automaton_items_completed_several_to_a_token():
    """Integers 0..3 as automaton items: a token may complete several items and leave a
    pending one (``1,2,1``), or end with a comma once every value is used; each completed
    item counts against the next ones. Masks against an oracle that reads the items (a
    pending digit can only complete as itself)."""
    from formcast.grammar.json_schema.item_automaton import ItemAutomaton

    extra = [b"1,1", b"1,2,1", b"1,2,3", b"2,3,0", b", 0", b",0,", b"0,3", b"3,", b"2,1,"]
    vocab = byte_vocab(extra)
    items = {"type": "integer", "minimum": 0, "maximum": 3}
    grammar = compile_json_schema(
        {"type": "array", "items": items, "uniqueItems": True}, vocab, cache=False
    )
    assert isinstance(grammar.patterns[0][1], ItemAutomaton)

    def has_completion(data: bytes) -> bool:
        text = data.decode()
        items, pending = _completed_items(text)
        if len(set(items)) < len(items):
            return False
        if pending:
            return int(pending) not in items
        return not text.rstrip().endswith(",") or len(items) < 4

    texts = ("[1, 2, 0]", "[3,1]", "[0,3,2,1]")
    num_refused, num_allowed = _crafted_token_verdicts(
        grammar, vocab, len(extra), texts, has_completion
    )
    assert num_refused >= 5 and num_allowed >= 5


def test_pending_number_items_of_any_value():
    """Items of any value with a number pending: a token of number bytes keeps it open, one
    that ends it with separators after it (and perhaps the next item's first byte) completes
    exactly that number, the others (a literal's first letter after the comma) are walked:
    masks against the completion oracle."""
    extra = [b",t", b',"', b",-", b",[", b",{", b"1,", b"1]", b"e5", b",tr", b"2,f", b", n"]
    vocab = byte_vocab(extra)
    grammar = compile_json_schema(ANYTHING, vocab, cache=False)
    texts = ("[true, 1, false, 2, null, 3]", "[1, 2.5, 12]")
    num_refused, num_allowed = _crafted_token_verdicts(
        grammar, vocab, len(extra), texts, lambda data: _has_completion(data, "any")
    )
    assert num_refused >= 5 and num_allowed >= 5
