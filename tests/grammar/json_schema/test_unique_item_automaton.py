"""``uniqueItems`` over any regular item schema (objects, bounded strings, mixed types):
the matcher runs the item automaton beside the inner grammar (`ItemAutomaton`).

Oracles: jsonschema for walks of whole instances (real SmolLM2 tokens, valid accepted and
invalid rejected, spellings that differ only in whitespace or number form included); for
masks, at every position of several walks and for every tested token, an independent
completion check: the completed items are distinct by value and the pending item text is a
prefix of some spelling of a value not used yet (spellings enumerated here from the values,
not from the automaton); brute force over small DFAs for the per-state value bounds.
"""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.complement import byte_dfa
from formcast.grammar.json_schema.item_automaton import ItemAutomaton
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.values import equality_key
from formcast.grammar.regex.parser import parse_regex
from tests.grammar.json_schema.test_unique_items import walk
from tests.grammar.schema_oracle import validator

POINT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["x", "y"],
    "additionalProperties": False,
}
POINTS = {"type": "array", "items": POINT, "uniqueItems": True}
# six values, 1,957 distinct arrays: past the enumeration budget, so guarded at run time
SWITCH = {
    "type": "object",
    "properties": {"mode": {"enum": ["a", "b", "c"]}, "on": {"type": "boolean"}},
    "required": ["mode", "on"],
    "additionalProperties": False,
}
SWITCHES = {"type": "array", "items": SWITCH, "uniqueItems": True}
MIXED = {"type": "array", "items": {"type": ["string", "integer", "boolean"]}, "uniqueItems": True}
SHORT = {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True}
TAG = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["name"],
}
DOCUMENT = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "uniqueItems": True},
        "ports": {
            "type": "array",
            "uniqueItems": True,
            "items": {
                "oneOf": [
                    {"type": "integer", "minimum": 1, "maximum": 99},
                    {"type": "string", "pattern": "^[0-9]+/(tcp|udp)$"},
                    {"type": "object", "properties": {"target": {"type": "integer"}},
                     "required": ["target"], "additionalProperties": False},
                ]
            },
        },
    },
    "$defs": {"Tag": TAG},
}  # fmt: skip
SCHEMAS = {
    "points": POINTS,
    "switches": SWITCHES,
    "mixed": MIXED,
    "short": SHORT,
    "document": DOCUMENT,
}


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    return {
        name: compile_json_schema(schema, smollm2_vocab, cache=False)
        for name, schema in SCHEMAS.items()
    }


def test_guarded_by_item_automata(grammars):
    for name, grammar in grammars.items():
        assert isinstance(grammar, UniqueItemsGrammar), name
        kinds = [kind for _, kind in grammar.patterns]
        assert any(isinstance(kind, ItemAutomaton) for kind in kinds), name


TEXTS = {
    "points": [
        '[{"x":1,"y":2},{"x":2,"y":1}]',
        '[{"x":1,"y":2},{"x":1,"y":2}]',
        '[{"x":1,"y":2},{"x": 1, "y": 2}]',  # the same value, spaced otherwise
        '[{"x":1,"y":2}, {"x":1,"y":22}]',
        '[{"x":0,"y":0},{"x":-0,"y":0}]',  # -0 == 0
        "[]",
    ],
    "switches": [
        '[{"mode":"a","on":true},{"mode":"a","on":false}]',
        '[{"mode":"a","on":true},{"mode": "a", "on": true}]',
        '[{"mode":"a","on":true},{"mode":"b","on":true},{"mode":"c","on":true},'
        '{"mode":"a","on":false},{"mode":"b","on":false},{"mode":"c","on":false}]',
        '[{"mode":"a","on":true},{"mode":"b","on":true},{"mode":"c","on":true},'
        '{"mode":"a","on":false},{"mode":"b","on":false},{"mode":"c","on":false},'
        '{"mode":"a","on":true}]',
    ],
    "mixed": ['["a", 1, true]', "[true, true]", '[1, "1", true, false]', "[1, 1]",
              '["a","a"]', "[false, 0, \"\"]", "[0, -0]", "[true, 1]"],
    "short": ['["ab", "a"]', '["ab", "ab"]', '["", ""]', '["a", "b", "ab", "ba", ""]'],
    "document": [
        '{"tags":[{"name":"a"},{"id":1,"name":"a"}]}',
        '{"tags":[{"id":1,"name":"a"},{"id": 1, "name": "a"}]}',
        '{"ports":[80, "80/tcp", {"target":80}, 81]}',
        '{"ports":[80, "80/tcp", 80]}',
        '{"ports":[{"target":80}, {"target": 80}]}',
        '{"ports":["80/udp", "80/udp"]}',
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", list(TEXTS))
def test_walks_agree_with_jsonschema(grammars, smollm2_tokenizer, name):
    oracle = validator(SCHEMAS[name])
    seen = {True: 0, False: 0}
    for text in TEXTS[name]:
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammars[name], smollm2_tokenizer, text) == is_valid, (name, text)
        seen[is_valid] += 1
    assert seen[True] and seen[False]


def _switch_spellings() -> dict[str, list[str]]:
    """Every compact-layout spelling of each SWITCH value (one optional space after each
    ``:`` and ``,``), by equality key: written here from the values, not the automaton."""
    out: dict[str, list[str]] = {}
    for mode, on in itertools.product("abc", (True, False)):
        value = {"mode": mode, "on": on}
        for spaces in itertools.product(("", " "), repeat=3):
            sp0, sp1, sp2 = spaces
            text = f'{{"mode":{sp0}"{mode}",{sp1}"on":{sp2}{json.dumps(on)}}}'
            out.setdefault(equality_key(value), []).append(text)
    return out


def _split_items(text: str) -> tuple[list, str, bool]:
    """(completed items, pending item text, an item must follow) after the ``[``."""
    decoder = json.JSONDecoder()
    items, i, must_follow = [], 1, False
    while i < len(text):
        if text[i] in " \n\t":
            i += 1
            continue
        if text[i] == ",":
            must_follow = True
            i += 1
            continue
        if text[i] == "]":
            return items, "", False
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            return items, text[i:], False
        if end == len(text) and not isinstance(value, (str, dict)) and text[end - 1].isdigit():
            return items, text[i:], False  # more digits may follow
        items.append(value)
        must_follow = False
        i = end
    return items, "", must_follow


def _switch_has_completion(text: str, spellings: dict[str, list[str]]) -> bool:
    items, pending, must_follow = _split_items(text)
    keys = [equality_key(v) for v in items]
    if len(set(keys)) < len(keys):
        return False
    unused = [s for key, texts in spellings.items() if key not in keys for s in texts]
    if pending:
        return any(s.startswith(pending) for s in unused)
    return bool(unused) or not must_follow


def _short_has_completion(text: str) -> bool:
    items, pending, must_follow = _split_items(text)
    if len(set(items)) < len(items):
        return False
    if not pending:
        return not must_follow or True  # strings up to 2 characters: many unused
    body = json.loads(pending + '"') if not pending.endswith("\\") else None
    if body is None:
        return True
    # the pending string can still grow (fewer than 2 characters) or closes as itself
    return len(body) < 2 or body not in items


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("switches", '[{"mode":"a","on":true},{"mode":"a","on":false},{"mode":"b","on":true},'
                     '{"mode":"b","on":false},{"mode":"c","on":true},{"mode":"c","on":false}]'),
        ("switches", '[{"mode": "c", "on": false}, {"mode":"c","on":true}]'),
        ("short", '["ab", "a", "b", "ba", "abc"]'),
    ],
)  # fmt: skip
def test_masks_agree_with_the_completion_oracle(grammars, smollm2_tokenizer, name, text):
    grammar = grammars[name]
    token_bytes = grammar.vocab.token_bytes
    spellings = _switch_spellings()
    rng = random.Random(0)
    interesting = [
        t
        for t, data in enumerate(token_bytes)
        if data and (set(data) & set(b'"\\,]}{:abcrufe ') or rng.random() < 0.01)
    ]
    matcher = grammar.matcher()
    prefix = b""
    num_forbidden = 0
    token_ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    for token_id in token_ids:
        allowed = set(matcher.allowed_token_ids().tolist())
        inner_allowed = set(matcher._inner.allowed_token_ids().tolist())
        assert allowed
        for t in interesting:
            if t not in inner_allowed:
                assert t not in allowed
                continue
            after = (prefix + token_bytes[t]).decode("utf-8", errors="replace")
            if name == "switches":
                expected = _switch_has_completion(after, spellings)
            else:
                expected = _short_has_completion(after)
            assert (t in allowed) == expected, (prefix, token_bytes[t])
            num_forbidden += not expected
        if not matcher.accept_token(token_id):
            break  # the text's last item repeats or is too long: the walk stops there
        prefix += token_bytes[token_id]
    assert num_forbidden > 0


def test_bitmask_equals_allowed_ids(grammars, smollm2_tokenizer):
    from formcast.grammar import allocate_token_bitmask

    grammar = grammars["switches"]
    matcher = grammar.matcher()
    text = '[{"mode":"a","on":true},{"mode":"a","on":false},{"mode":"b",'
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
        bitmask = allocate_token_bitmask(1, grammar.vocab_size)
        matcher.fill_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits[: grammar.vocab_size]).tolist() == (
            matcher.allowed_token_ids().tolist()
        )
        assert matcher.accept_token(token_id)


@pytest.mark.parametrize(
    ("items", "texts"),
    [
        ({"type": "string", "maxLength": 3}, {'["abc", "ab"]': True, '["abc", "abc"]': False}),
        ({"type": "string", "pattern": "^a[bc]?$"}, {'["a", "ab"]': True, '["ac", "ac"]': False}),
        ({"type": "integer", "maximum": 9}, {"[9, -9]": True, "[9, 9]": False, "[0, -0]": False}),
        ({"type": "object"}, {"[{}]": True, "[{}, {}]": False}),  # strict: only {}
    ],
)
def test_items_once_refused_now_guarded(smollm2_vocab, smollm2_tokenizer, items, texts):
    schema = {"type": "array", "items": items, "uniqueItems": True}
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    oracle = validator({**schema, "items": {**items, "additionalProperties": False}})
    for text, is_valid in texts.items():
        assert oracle.is_valid(json.loads(text)) == is_valid
        assert walk(grammar, smollm2_tokenizer, text) == is_valid, text


def test_fewer_values_than_min_items_is_empty(smollm2_vocab):
    # SWITCH has 6 values: 7 distinct items cannot exist, and nothing else may be written
    schema = {**SWITCHES, "minItems": 7}
    grammar = compile_json_schema({"anyOf": [schema, {"type": "null"}]}, smollm2_vocab)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"null")
    assert not grammar.matcher().accept_bytes(b"[")


def test_guarded_arrays_inside_object_items_are_refused(smollm2_vocab):
    schema = {
        "type": "array",
        "uniqueItems": True,
        "items": {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                    "uniqueItems": True}},
        },
    }  # fmt: skip
    with pytest.raises(SchemaError, match="uniqueItems") as info:
        compile_json_schema(schema, smollm2_vocab)
    assert info.value.pointer  # names the keyword's place


def _brute_values(dfa, state: int, prefix: bytes, limit: int = 12) -> tuple[set[str], bool]:
    """Distinct value keys of ``prefix`` + the completions from ``state`` up to ``limit``
    bytes, and whether some completion is longer than that."""
    rows = dfa.transitions[:, dfa.byte_to_class].tolist()
    keys, longer = set(), False
    frontier = [(state, prefix)]
    for depth in range(limit + 1):
        nxt = []
        for here, text in frontier:
            if dfa.is_accepting[here]:
                keys.add(equality_key(json.loads(text)))
            for byte, target in enumerate(rows[here]):
                if target >= 0:
                    nxt.append((target, text + bytes([byte])))
        frontier = nxt
        if depth == limit and frontier:
            longer = True
    return keys, longer


@pytest.mark.parametrize(
    "pattern",
    [
        r"(true|false|null)",
        r'\{"a": ?(1|2|3)\}',
        r"-?(0|[1-9])",
        r"1(\.50*)?",  # a padding cycle: 1.5, 1.50, 1.500 ... are one value
        r'"[ab]{0,2}"',
        r"[1-9][0-9]*",  # value-infinite
    ],
)
def test_value_bounds_against_brute_force(pattern):
    dfa = byte_dfa(parse_regex(pattern, "python"))
    automaton = ItemAutomaton(dfa, pattern)
    num_checked = 0
    for state in range(dfa.num_states):
        prefix = _path_to(dfa, state)
        if automaton.is_value_infinite[state]:
            # a value-infinite state has completions of every length (checked up to 4 bytes)
            _, longer = _brute_values(dfa, state, prefix, limit=4)
            assert longer
            continue
        keys, _ = _brute_values(dfa, state, prefix)
        # value-finite: the bounded enumeration holds every value (these patterns are short)
        assert 2 ** automaton.log2_values[state] <= len(keys) + 1e-9, (pattern, state)
        assert not automaton.has_new_value(state, prefix, frozenset(keys))
        for key in keys:
            assert automaton.has_new_value(state, prefix, frozenset(keys - {key}))
        num_checked += 1
    assert num_checked > 0 or pattern == r"[1-9][0-9]*"
    assert automaton.has_values(1)


@pytest.mark.parametrize(
    "pattern",
    [
        r"\[(1|2|30),(1|2|3|4|5|6|7|8|9|10|11|12)\]",  # one state, several prefixes
        r'"[abc]{0,2}"',  # 13 values: past the first suffixes of a state
        r"(1|10)(\.0+)?",  # spellings of one value: 1, 1.0, 1.00, ...
    ],
)
def test_new_values_from_every_prefix_against_brute_force(pattern):
    """A state's completion suffixes are enumerated once and shared by every prefix that
    reaches the state: has_new_value agrees with brute force for each prefix, whichever
    prefix asked first, with seen sets that force the search past the first suffixes."""
    dfa = byte_dfa(parse_regex(pattern, "python"))
    automaton = ItemAutomaton(dfa, pattern)
    rows = dfa.transitions[:, dfa.byte_to_class].tolist()
    prefixes = [(dfa.start_state, b"")]
    frontier = list(prefixes)
    for _ in range(5):  # every prefix of up to 5 bytes
        frontier = [
            (target, text + bytes([byte]))
            for here, text in frontier
            for byte, target in enumerate(rows[here])
            if target >= 0
        ]
        prefixes += frontier
    random.Random(7).shuffle(prefixes)
    num_checked = 0
    for state, prefix in prefixes:
        if automaton.is_value_infinite[state]:
            continue
        keys, longer = _brute_values(dfa, state, prefix, limit=8)
        if longer:  # (padding: values already complete within the limit)
            keys |= _brute_values(dfa, state, prefix, limit=10)[0]
        ordered = sorted(keys)
        for num_seen in range(len(ordered) + 1):
            seen = frozenset(ordered[:num_seen])
            expected = num_seen < len(ordered)
            assert automaton.has_new_value(state, prefix, seen, is_checked=True) == expected
        num_checked += 1
    assert num_checked > 5


def _path_to(dfa, state: int) -> bytes:
    """A shortest text reaching ``state`` (breadth first)."""
    rows = dfa.transitions[:, dfa.byte_to_class].tolist()
    paths = {dfa.start_state: b""}
    frontier = [dfa.start_state]
    while frontier and state not in paths:
        nxt = []
        for here in frontier:
            for byte, target in enumerate(rows[here]):
                if target >= 0 and target not in paths:
                    paths[target] = paths[here] + bytes([byte])
                    nxt.append(target)
        frontier = nxt
    return paths[state]


CONTAINS = {
    "type": "array",
    "uniqueItems": True,
    "items": {"enum": ["a", "b", "c", "d", "e", 1]},
    "contains": {"enum": ["d", "e", 1]},
    "minContains": 2,
}


@pytest.mark.parametrize(
    ("schema", "texts"),
    [
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
             "contains": {"const": "x"}},
            ['["x"]', '["a", "x"]', '["x", "x"]', '["a", "a", "x"]', "[]", '["a", "b", "x", "c"]'],
        ),
        (
            CONTAINS,
            ['["d", "e"]', '["d", "d"]', '["a", "d", "b", 1]', '["d"]', '["d", 1, "d"]', "[1, 1]"],
        ),
    ],
)  # fmt: skip
def test_unique_items_with_contains(smollm2_vocab, smollm2_tokenizer, schema, texts):
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for text in texts:
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammar, smollm2_tokenizer, text) == is_valid, text
        seen[is_valid] += 1
    assert seen[True] and seen[False]


def test_unique_items_with_contains_never_dead_ends(smollm2_vocab):
    """Random walks over the allowed tokens: the mask is never empty before the array is
    complete (the matching items hold enough distinct values), and every end is valid."""
    grammar = compile_json_schema(CONTAINS, smollm2_vocab, cache=False)
    oracle = validator(CONTAINS)
    token_bytes = grammar.vocab.token_bytes
    rng = random.Random(1)
    num_finished = 0
    for _ in range(25):
        matcher, text = grammar.matcher(), b""
        while not (matcher.is_accepting() and text.endswith(b"]")):
            allowed = matcher.allowed_token_ids().tolist()
            assert allowed, text
            token_id = rng.choice(allowed)
            assert matcher.accept_token(token_id)
            text += token_bytes[token_id]
        assert oracle.is_valid(json.loads(text)), text
        num_finished += 1
    assert num_finished == 25


def test_unique_items_with_too_few_matching_values_is_unsatisfiable(smollm2_vocab):
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
              "contains": {"const": "x"}, "minContains": 2}  # fmt: skip
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_json_schema(schema, smollm2_vocab, cache=False)


OPEN_OBJECTS = {
    "type": "array",
    "uniqueItems": True,
    "items": {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        "required": ["name"],
    },
}
OPEN_TEXTS = [
    '[{"name":"a"},{"name":"b"}]',
    '[{"name":"a"},{"name":"a"}]',
    '[{"name":"a","x":[1,{"y":2}]},{"name":"a","x":[1,{"y":2}]}]',
    '[{"name":"a","x":[1,{"y":2}]},{"name":"a","x":[1,{"y":3}]}]',
    '[{"id":1,"name":"a"},{"id":1.0,"name":"a"}]',  # 1 == 1.0
    '[{"name":"a","b":1,"c":2},{"name":"a","b":1}]',
    '[{"name":"a","b":{"p":1,"q":2}},{"name":"a","b":{"p":1,"q":2}}]',
]


@pytest.mark.parametrize("strict", [False, True])
def test_open_object_items(smollm2_vocab, smollm2_tokenizer, strict):
    """Objects that take extra keys (strict=False, or additionalProperties true): every
    prefix of an item completes in infinitely many ways, so the matcher only refuses the
    closing brace of an item equal to an earlier one (as JSON values, numbers by value)."""
    items = OPEN_OBJECTS["items"] if not strict else {
        **OPEN_OBJECTS["items"], "additionalProperties": True
    }  # fmt: skip
    schema = {**OPEN_OBJECTS, "items": items}
    grammar = compile_json_schema(schema, smollm2_vocab, strict=strict, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    assert [kind for _, kind in grammar.patterns] == ["object"]
    oracle = validator(schema)  # jsonschema: extra keys allowed, as in both compiles
    seen = {True: 0, False: 0}
    for text in OPEN_TEXTS:
        is_valid = oracle.is_valid(json.loads(text))
        assert walk(grammar, smollm2_tokenizer, text) == is_valid, text
        seen[is_valid] += 1
    assert seen[True] >= 2 and seen[False] >= 3


def _repeats_an_item(text: bytes) -> bool:
    """Do two complete items of the array text (``[`` then items, maybe unfinished) have
    equal values? (Reference: json's own decoder, item by item.)"""
    decoder = json.JSONDecoder()
    body, pos, keys = text.decode("utf-8", errors="replace"), 1, []
    while pos < len(body):
        while pos < len(body) and body[pos] in " ,\n":
            pos += 1
        try:
            value, pos = decoder.raw_decode(body, pos)
        except json.JSONDecodeError:
            break
        keys.append(equality_key(value))
    return len(set(keys)) < len(keys)


def test_open_object_masks_against_the_repeat_oracle(smollm2_vocab, smollm2_tokenizer):
    grammar = compile_json_schema(OPEN_OBJECTS, smollm2_vocab, strict=False, cache=False)
    token_bytes = grammar.vocab.token_bytes
    text = '[{"name":"a","n":[1,2]},{"name":"a","n":[1,2]},{"name":"a"}]'
    matcher, prefix, num_forbidden = grammar.matcher(), b"", 0
    for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
        allowed = set(matcher.allowed_token_ids().tolist())
        for t in matcher._inner.allowed_token_ids().tolist():
            if t >= len(token_bytes) or b"}" not in token_bytes[t]:
                assert t in allowed  # only a closing brace completes an item
                continue
            expected = not _repeats_an_item(prefix + token_bytes[t])
            assert (t in allowed) == expected, (prefix, token_bytes[t])
            num_forbidden += not expected
        if not matcher.accept_token(token_id):
            break  # the second item repeats the first: the walk stops at its closing brace
        prefix += token_bytes[token_id]
    assert num_forbidden > 0
    assert prefix.endswith(b"[1,2]")  # stopped at the repeat's closing brace


NAMED = {
    "type": "array",
    "uniqueItems": True,
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "port": {"enum": [1, 2]}},
        "required": ["name", "port"],
        "additionalProperties": False,
    },
}


# strings whose pattern x length product is over budget: the matcher counts their length
# (text_patterns), one alone and others as array items, beside a guarded array
SLUG = {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 5, "maxLength": 1000}
COUNTED = {
    "type": "object",
    "properties": {
        "code": SLUG,
        # short bounds: plain tokens near them are risky (more characters than room is left)
        "url": {"type": "string", "format": "uri", "minLength": 10, "maxLength": 14},
        # bounded content ahead (the two digits): under minLength every plain token is risky
        "ver": {**SLUG, "pattern": "^[a-z]+(-[a-z]+)*-[0-9]{2}$", "minLength": 8},
        "tags": {"type": "array", "items": {**SLUG, "minLength": 7}},
        "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    },
    "required": ["code"],
}


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        (NAMED, '[{"name":"alpha, beta and gamma","port":1},{"name":"alpha, beta and gamma",'
                '"port":2},{"name":"x","port":1}]'),
        (MIXED, '["80:80", 80, "80:80x", true, 8080]'),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
         '["a, b", "c", "a, b, c"]'),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "[0, 1, 10, -1]"),
        (COUNTED, '{"code":"abc-de","url":"http://ab.cd","ver":"ab-cd-12",'
                  '"tags":["ab-cd-ef","abc-defgh"],"ids":[1,2,1]}'),
    ],
)  # fmt: skip
def test_mask_shortcuts_equal_the_cursor_walk(smollm2_vocab, smollm2_tokenizer, schema, text):
    """The mask decides most tokens without walking them (a first item: only tokens with a
    comma; inside a pending item: the item automaton alone, `_item_token_refused`; long
    candidate lists: the automaton's token index; a quote closing a counted string:
    `_closing_token_refused`): at every position, for every allowed
    token of the inner grammar with a structural byte (and a sample of the rest), it is
    refused iff the cursor's own byte walk (`JsonCursor.feed`) refuses it."""
    grammar = compile_json_schema(schema, smollm2_vocab, cache=False)
    assert isinstance(grammar, UniqueItemsGrammar)
    token_bytes = grammar.vocab.token_bytes
    rng = random.Random(0)
    tested = {
        t
        for t, data in enumerate(token_bytes)
        if data and (set(data) & set(b'"\\,]}{[: 0123456789') or rng.random() < 0.05)
    }
    num_index_walks = 0
    real_token_ends = ItemAutomaton.token_ends

    def counted_token_ends(self, state, vocab):
        nonlocal num_index_walks
        num_index_walks += 1
        return real_token_ends(self, state, vocab)

    ItemAutomaton.token_ends = counted_token_ends
    try:
        matcher = grammar.matcher()
        num_refused = 0
        for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
            forbidden = set(matcher.forbidden_token_ids().tolist())
            cursor = matcher._cursors[-1]
            for t in sorted(tested & set(matcher._inner.allowed_token_ids().tolist())):
                is_refused = cursor.feed(token_bytes[t]) is None
                assert (t in forbidden) == is_refused, (cursor.raw, token_bytes[t])
                num_refused += is_refused
            if not matcher.accept_token(token_id):
                break  # the text's last item repeats: the walk stops there
    finally:
        ItemAutomaton.token_ends = real_token_ends
    assert num_refused > 0
    if schema is NAMED:
        assert num_index_walks > 0  # the long-candidate path ran (inside "name")
