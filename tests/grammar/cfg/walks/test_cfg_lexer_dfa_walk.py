"""Single-terminal lexer parts walked on their terminal's DFA (``cfg_dfa_walk``) are exact.

Three checks over the whole SmolLM2 vocabulary:

- part by part, the DFA walk (trie walk for wide states, first-byte classes otherwise, record
  walks of split groups) equals the generic interned-lexer walk, except for split records whose
  suffix starts with a byte no lexeme after the terminal can start with (the follow filter);
- ``FOLLOW`` sets against a hand-derived grammar;
- masks of a recursive JSON schema compiled through the structural route (chunked long strings,
  enum strings, nested objects) equal a brute-force read of the vocabulary at prefixes along
  valid instances, with two fresh compiles visiting the prefixes in opposite orders.
"""

from __future__ import annotations

import numpy as np
import pytest

from formcast.bitmask import allocate_token_bitmask
from formcast.grammar.cfg import lexer as cfg_lexer
from formcast.grammar.cfg.compiled import CfgTuning
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.cfg.lexer import CfgLexer
from formcast.grammar.cfg.rules import CfgGrammar, prepare_grammar
from formcast.grammar.cfg.walks.dfa_walk import follow_terminals
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from tests.grammar._cfg_grammars import JSON_GBNF, LARK_GRAMMARS
from tests.grammar._cfg_oracle import brute_force_mask, compare_dfa_walks

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 100},
        "kind": {"enum": ["alpha", "beta gamma", 'quote"d']},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
        "size": {"type": "integer"},
        "child": {"$ref": "#"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
INSTANCES = [
    b'{"name":"' + b"word " * 19 + b'","kind":"beta gamma","size":-12}',
    b'{"name":"a\\"b \xc3\xa9\\n\\u001f","tags":["x","\xe2\x82\xac"],"child":{"name":"","child":'
    b'{"name":"z","kind":"quote\\"d"}}}',
]


def _single_parts(prepared, max_states: int) -> list[tuple[int, int]]:
    """(terminal, state) pairs: every state of small terminals, a spread of large ones."""
    out = []
    for t, dfa in enumerate(prepared.terminal_dfas):
        states = range(dfa.num_states)
        if dfa.num_states > max_states:
            states = np.linspace(0, dfa.num_states - 1, max_states).astype(int).tolist()
        out += [(t, q) for q in states]
    return out


@pytest.mark.parametrize("name", ["json.gbnf", "json_schema", "sql"])
def test_dfa_part_walks_equal_generic_walks(name, smollm2_vocab):
    if name == "json.gbnf":
        prepared = compile_gbnf(JSON_GBNF, smollm2_vocab, cache=False).prepared
    elif name == "json_schema":
        prepared = compile_json_schema_cfg(SCHEMA, smollm2_vocab, cache=False).prepared
    else:
        prepared = compile_lark(LARK_GRAMMARS[name], smollm2_vocab, cache=False).prepared
    table = vocab_table(smollm2_vocab)
    parts = _single_parts(prepared, max_states=6)
    assert compare_dfa_walks(prepared, table, parts) > 0


def test_follow_terminals_by_hand():
    # s: A x B | y ;  x: "" | C x ;  y: D ; terminals A=0 B=1 C=2 D=3
    grammar = CfgGrammar(
        terminal_names=["A", "B", "C", "D"],
        terminal_regexes=["a", "b", "c", "d"],
        nonterminal_names=["s", "x", "y"],
        rules=[(0, (0, ~1, 1)), (0, (~2,)), (1, ()), (1, (2, ~1)), (2, (3,))],
        start=0,
    )
    follow = follow_terminals(prepare_grammar(grammar))
    assert follow == [{1, 2}, set(), {1, 2}, set()]


def _mask_ids(grammar, prefix: bytes) -> set[int]:
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prefix), prefix
    bits = np.unpackbits(matcher.packed_row().view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[: grammar.vocab_size]).tolist())


def test_structural_schema_masks_equal_brute_force(smollm2_vocab):
    prefixes = []
    for text in INSTANCES:
        cuts = [1, 9, 12, 40, len(text) // 2, len(text) - 3]
        prefixes += [text[:k] for k in cuts]
    forward = compile_json_schema_cfg(SCHEMA, smollm2_vocab, cache=False)
    backward = compile_json_schema_cfg(SCHEMA, smollm2_vocab, cache=False)
    for text in INSTANCES:
        matcher = forward.matcher()
        assert matcher.accept_bytes(text) and matcher.is_accepting(), text
    got_forward = [_mask_ids(forward, p) for p in prefixes]
    got_backward = [_mask_ids(backward, p) for p in reversed(prefixes)][::-1]
    runtime = forward.runtime
    for prefix, mask_a, mask_b in zip(prefixes, got_forward, got_backward, strict=True):
        heads = runtime.advance(forward.initial_heads, prefix)
        assert mask_a == brute_force_mask(runtime, heads, smollm2_vocab), prefix
        assert mask_b == mask_a, prefix


def test_grammars_sharing_a_terminal_share_its_walks_exactly(smollm2_vocab):
    from formcast.grammar import caches
    from formcast.grammar.cfg.walks.dfa_walk import SHARED_WALKS

    caches.clear(
        "index.regex_to_dfa", "cfg.walks.shared_walks"
    )  # no walks of earlier tests: the first grammar computes every one
    assert SHARED_WALKS.num_bytes == 0
    note = {"type": "string", "maxLength": 200}  # chunked: the chunk DFAs are shared terminals
    first = compile_json_schema_cfg(
        {"type": "object", "properties": {"note": note}}, smollm2_vocab, cache=False
    )
    second = compile_json_schema_cfg(
        {"type": "object", "properties": {"size": {"type": "integer"}, "memo": note}},
        smollm2_vocab,
        cache=False,
    )
    words = b"shared walks " * 6 + b"\xc3\xa9\\n"
    for grammar, key in ((first, b'{"note":"'), (second, b'{"size":3,"memo":"')):
        for k in (0, 5, 13, 40, len(words)):
            _mask_ids(grammar, key + words[:k])
        if grammar is first:
            num_bytes = SHARED_WALKS.num_bytes
            assert num_bytes > 0
    # the second grammar's walks inside the string were lookups: little was added
    assert SHARED_WALKS.num_bytes - num_bytes < num_bytes / 4
    runtime = second.runtime
    for k in (0, 5, 13, 40, len(words)):
        prefix = b'{"size":3,"memo":"' + words[:k]
        heads = runtime.advance(second.initial_heads, prefix)
        assert _mask_ids(second, prefix) == brute_force_mask(runtime, heads, smollm2_vocab)
    caches.clear("index.regex_to_dfa", "cfg.walks.shared_walks")
    assert SHARED_WALKS.num_bytes == 0


MANY_KEYS = {
    "type": "object",
    "properties": {
        **{f"key_{i:02d}_{'ab'[i % 2]}": {"type": ["integer", "null"]} for i in range(24)},
        "label": {"type": "string", "maxLength": 70},
        "flag": {"type": "boolean"},
    },
    "additionalProperties": False,
}


def _walk_records(walk) -> tuple[np.ndarray, set[tuple[int, int, frozenset]]]:
    records = set()
    for group in walk.splits:
        for row, step in zip(group.rows.tolist(), group.steps.tolist(), strict=True):
            records.add((row, step, group.accepts))
    return walk.within_row, records


def test_set_walks_equal_the_union_of_part_walks(smollm2_vocab, monkeypatch):
    # after "{" and after each member, 2-26 key terminals are expected: one set walk each
    texts = [b'{"key_00_a":1,"key_07_b":null,"label":"x\\"', b'{"key_05_b":-3,"flag":true}']
    record_set_walks = []
    walk_records_set = CfgLexer.walk_records_set

    def counted(self, *args):
        record_set_walks.append(len(args[0]))
        return walk_records_set(self, *args)

    monkeypatch.setattr(CfgLexer, "walk_records_set", counted)
    # cut_chars=1: every member its own terminal (as in large schemas)
    alone = compile_json_schema_cfg(  # every part walked alone
        MANY_KEYS, smollm2_vocab, cut_chars=1, cache=False, tuning=CfgTuning(min_set_parts=10**9)
    )
    together = compile_json_schema_cfg(
        MANY_KEYS, smollm2_vocab, cut_chars=1, cache=False, tuning=CfgTuning(min_set_parts=8)
    )
    assert together.runtime.lexer.min_set_parts == 8
    table = vocab_table(smollm2_vocab)
    num_set_states = 0
    for text in texts:
        for k in range(len(text) + 1):
            lexer = together.runtime.lexer
            for _, sid in together.runtime.advance(together.initial_heads, text[:k]):
                num_set_states += bool(len(lexer.set_parts(lexer.parts(sid))[0]))
                got_within, got = _walk_records(lexer.token_walk(sid))
                other = alone.runtime.lexer  # the same state, interned in the other lexer
                twin = other._intern(
                    lexer.expected_of[sid], set(lexer.pairs_of[sid]), lexer.is_boundary[sid]
                )
                assert not len(other.set_parts(other.parts(twin))[0])
                ref = [other.token_walk(p) for p in other.parts(twin)]
                ref_within = np.bitwise_or.reduce([w.within_row for w in ref])
                assert np.array_equal(got_within, ref_within), text[:k]
                # a set walk drops the records of tokens within any pair, a part walk only
                # those within its own part
                within = np.unpackbits(ref_within.view(np.uint8), bitorder="little")
                ref_records = set().union(*(_walk_records(w)[1] for w in ref))
                assert got == {r for r in ref_records if not within[table.token_ids[r[0]]]}
            assert _mask_ids(together, text[:k]) == _mask_ids(alone, text[:k]), text[:k]
    assert num_set_states >= 4
    # e.g. the '"' of the token '{"', read from the 27 parts after "{"
    assert record_set_walks and max(record_set_walks) >= 20


def _reference_set_parts(lexer, parts, first_bytes):
    """``CfgLexer.set_parts`` part by part, from each part's own facts (plain Python)."""
    if len(parts) < lexer.min_set_parts and first_bytes == -1:
        return [], list(parts)  # too few for a set walk: every part, unfiltered
    walker = lexer._dfa_walker
    is_stacked = {
        p: (pair := lexer._single_pair(p)) is not None and walker.can_walk_in_set(pair[0])
        for p in parts
    }
    # no byte filter: parts walked alone are kept untested
    readers = [
        p
        for p in parts
        if first_bytes & lexer.first_bytes(p) or (first_bytes == -1 and not is_stacked[p])
    ]
    stacked = {p: walker.set_start(*lexer._single_pair(p)) for p in readers if is_stacked[p]}
    if len(stacked) < lexer.min_set_parts:
        return [], readers
    return [stacked[p] for p in readers if p in stacked], [p for p in readers if p not in stacked]


# a key pattern: a wide looping key terminal, walked alone beside the set of literal keys
PATTERN_KEYS = {**MANY_KEYS, "patternProperties": {"^x_[a-z]+$": {"type": "integer"}}}


@pytest.mark.parametrize("min_set_parts", [2, 8, 24, 26])
@pytest.mark.parametrize("schema", [MANY_KEYS, PATTERN_KEYS], ids=["keys", "keys+pattern"])
def test_set_parts_equal_a_part_by_part_reference(smollm2_vocab, min_set_parts, schema):
    # every set of parts met along the walks, filtered by no byte, by the first bytes of each
    # split group met, and by random byte sets, against the facts of each part alone (the
    # thresholds put some sets exactly at the bound)
    grammar = compile_json_schema_cfg(
        schema,
        smollm2_vocab,
        cut_chars=1,
        cache=False,
        tuning=CfgTuning(min_set_parts=min_set_parts),
    )
    lexer = grammar.runtime.lexer
    rng = np.random.default_rng(0)
    masks = [-1] + [int(rng.integers(0, 2**62)) << int(rng.integers(0, 194)) for _ in range(6)]
    num_sets = 0
    texts = [b'{"key_00_a":1,"key_07_b":null,"label":"x\\"', b'{"key_05_b":-3,"flag":true}']
    if schema is PATTERN_KEYS:
        texts.append(b'{"key_01_b":2,"flag":false,"x_ab":1}')
    num_alone = 0
    for text in texts:
        for k in range(len(text) + 1):
            for _, sid in grammar.runtime.advance(grammar.initial_heads, text[:k]):
                parts = lexer.parts(sid)
                walk = lexer.token_walk(sid)
                for first_bytes in masks + [group.first_bytes for group in walk.splits]:
                    starts, alone = lexer.set_parts(parts, first_bytes)
                    ref_starts, ref_alone = _reference_set_parts(lexer, parts, first_bytes)
                    assert starts.tolist() == ref_starts, (text[:k], first_bytes)
                    assert list(alone) == ref_alone, (text[:k], first_bytes)
                    num_sets += bool(ref_starts)
                    num_alone += bool(ref_starts) and bool(ref_alone)
    assert num_sets >= 1
    if schema is PATTERN_KEYS and min_set_parts <= 24:
        assert num_alone >= 1  # a set walk beside a part walked alone


def test_interned_state_keys_are_untracked_by_the_collector(smollm2_vocab):
    # the lexer's state keys are flat tuples of ints: one collection untracks every one of them
    # (keys holding frozensets or nested tuples stayed tracked and filled the older
    # generations whose collections pause masks)
    import gc

    grammar = compile_json_schema_cfg(PATTERN_KEYS, smollm2_vocab, cut_chars=1, cache=False)
    matcher = grammar.matcher()
    bitmask = allocate_token_bitmask(1, smollm2_vocab.vocab_size)
    for byte in b'{"key_01_b":2,"label":"q","flag":false,"x_ab":1}':
        matcher.fill_bitmask(bitmask, 0)
        assert matcher.accept_bytes(bytes([byte]))
    lexer = grammar.runtime.lexer
    assert len(lexer._keys) > 20
    gc.collect()
    assert not any(gc.is_tracked(key) for key in lexer._keys)


def test_pair_parts_are_the_states_intern_gives_their_single_pairs(smollm2_vocab):
    # _pair_part builds its key directly: it must be the state (and acceptance) _intern gives
    # the same single pair, whichever of the two meets the pair first
    grammar = compile_json_schema_cfg(PATTERN_KEYS, smollm2_vocab, cut_chars=1, cache=False)
    lexer = grammar.runtime.lexer
    pairs = [(t, s) for t, dfa in enumerate(lexer.dfas[: lexer.num_terminals])
             for s in range(min(dfa.num_states, 6))]  # fmt: skip
    assert any(lexer.dfas[t].is_accepting[s] for t, s in pairs)
    for k, (t, s) in enumerate(pairs):
        if k % 2:  # interned first: the part is found under the same key
            sid = lexer._intern(cfg_lexer._NO_TERMINALS, {(t, s)}, False)
            assert lexer._pair_part(t, s) == sid
        else:  # the part first: interning the pair finds it
            sid = lexer._pair_part(t, s)
            assert lexer._intern(cfg_lexer._NO_TERMINALS, {(t, s)}, False) == sid
        assert lexer.pairs_of[sid] == ((t, s),)
        assert lexer.accepts[sid] == ({t} if lexer.dfas[t].is_accepting[s] else set())
        assert lexer.expected_of[sid] == frozenset() and not lexer.is_boundary[sid]


def test_set_walks_are_for_json_schema_grammars_only(smollm2_vocab):
    lark = compile_lark(LARK_GRAMMARS["pyexpr"], smollm2_vocab, cache=False)
    assert lark.runtime.lexer.min_set_parts is None
    schema = compile_json_schema_cfg(MANY_KEYS, smollm2_vocab, cut_chars=1, cache=False)
    assert schema.runtime.lexer.min_set_parts == cfg_lexer.MIN_SET_PARTS
