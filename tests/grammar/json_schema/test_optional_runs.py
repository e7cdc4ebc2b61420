"""Runs of optional members on the structural route: exact, and no LR chain per run.

An object's optional members whose values are nonterminals (bounded strings, nested objects,
arrays) are empty-or-member links of one rule, ``{ L_1 ... L_n }``. What may follow member
``i`` is every key up to the next required member: read off the rule's suffix after the
dot, not by reducing the empty links one state at a time (each state's row built on first
use), and a key ``j`` after member ``i`` is shifted after pushing the empty links' gotos,
without their rows. Checked against jsonschema (token walks of valid and invalid values)
and against the Earley runtime's masks (every token of every walk).
"""

from __future__ import annotations

from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.values import serialize
from tests.grammar.schema_oracle import assert_walks_agree, heads_agreeing_with_earley

_KINDS = [
    {"type": "string", "maxLength": 8},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "string", "maxLength": 4}},
    {"type": "integer"},  # merged with its key into one terminal (no nonterminal)
]
NUM_MEMBERS = 40
SCHEMA = {
    "type": "object",
    "properties": {f"m{k:02d}": _KINDS[k % len(_KINDS)] for k in range(NUM_MEMBERS)},
    "required": ["m21"],
    "additionalProperties": False,
}


def _value(k: int, is_valid: bool = True):
    return [["x", 17][is_valid], {"a": 1}, ["ab"], 5][k % len(_KINDS)]


VALUES = [
    {"m21": {"a": 1}},
    {"m00": "x", "m21": {"a": 1}},
    {"m00": "x", "m21": {"a": 1}, "m39": 5},
    {"m01": {"a": 1}, "m18": ["ab"], "m21": {"a": 2}, "m22": ["", "abcd"], "m37": {"a": 3}},
    {"m13": {"a": 0}, "m21": {"a": 1}, "m24": "abcdefgh", "m38": []},
    {k: _value(int(k[1:])) for k in (f"m{j:02d}" for j in range(0, NUM_MEMBERS, 3))}
    | {"m21": {"a": 1}},
    {f"m{j:02d}": _value(j) for j in range(NUM_MEMBERS)},
    # invalid: the required member missing, a value out of its schema, an unknown member
    {"m00": "x"},
    {"m00": "x", "m21": {"a": 1}, "m39": "five"},
    {"m02": ["abcde"], "m21": {"a": 1}},
    {"m21": {"a": 1}, "m24": "abcdefghi"},
    {"m21": {"a": 1}, "m40": 1},
    {"m21": {}},
]


def _grammar(vocab):
    grammar = compile_json_schema(SCHEMA, vocab, strict=False, cache=False, route="cfg")
    assert grammar.runtime.is_lr
    return grammar


def test_walks_agree_with_jsonschema(smollm2_vocab, smollm2_tokenizer):
    assert_walks_agree(_grammar(smollm2_vocab), SCHEMA, VALUES, smollm2_tokenizer)


def test_masks_equal_the_earley_masks_along_every_walk(smollm2_vocab, smollm2_tokenizer):
    grammar = _grammar(smollm2_vocab)
    walk = heads_agreeing_with_earley(grammar, SCHEMA, VALUES, smollm2_vocab, smollm2_tokenizer)
    assert sum(1 for _ in walk) > 200


def test_a_run_of_absent_members_builds_no_row_per_member(smollm2_vocab, smollm2_tokenizer):
    """Masks after the first member and a jump from it to the last member build a few LR
    rows, not one per optional member in between (the run is 20 members long)."""
    grammar = _grammar(smollm2_vocab)
    runtime = grammar.runtime
    table = runtime.parser.table
    text = serialize({"m00": "x", "m21": {"a": 1}, "m39": 5}, SCHEMA, SCHEMA)
    heads = runtime.initial_heads()
    for token in smollm2_tokenizer.encode(text, add_special_tokens=False):
        runtime.mask(heads)
        heads = runtime.advance(heads, smollm2_vocab.token_bytes[token])
    assert runtime.is_accepting(heads)
    num_built = sum(row is not None for row in table._rows)
    assert num_built < NUM_MEMBERS // 2, num_built
