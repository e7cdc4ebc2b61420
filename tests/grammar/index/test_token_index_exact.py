"""Exactness by brute force: every token of the real SmolLM2 vocabulary at several states.

A token is allowed iff some string of the language starts with (bytes so far + token bytes);
EOS iff the bytes so far are in the language; special tokens never. The oracle is the
``regex`` package's partial fullmatch (see ``_regex_oracle``), independent of our automaton.
"""

from __future__ import annotations

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.grammar import compile_regex
from tests.grammar._regex_oracle import is_viable_prefix, representatives

# (pattern, prefixes as bytes; prefixes may end inside a UTF-8 character)
CASES = [
    (r"[a-z]+@[a-z]+\.com", [b"", b"john@ex", b"a@b.co"]),
    (r"\d{4}-\d{2}-\d{2}", [b"", b"2024-", b"2024-01-3"]),
    (
        r"(?:中文|日本語|한국어)x?[α-ω]{1,3}",
        [b"", b"\xe6\x97", b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"],
    ),
    (r"[^\"\\]{0,6}\"", [b"ab\xc3", b"x\xf0\x9f\x98", b"123456"]),
    (r".{2,4}|a+b", [b"", b"aab", b"\xc3"]),
    (r"(?:true|false|null|-?(?:0|[1-9][0-9]{0,3})(?:\.[0-9]{1,2})?)", [b"", b"12.", b"fa"]),
    (r" ?(?:yes|no) ?", [b"", b" ", b"ye"]),
]


def _expected_ids(pattern: str, prefix: bytes, vocab) -> set[int]:
    reps = representatives(pattern)
    allowed = set()
    for token_id, piece in enumerate(vocab.token_bytes):
        if token_id in vocab.special_token_ids or not piece:
            continue
        if is_viable_prefix(pattern, prefix + piece, reps):
            allowed.add(token_id)
    try:
        text = prefix.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and regex.fullmatch(pattern, text):
        allowed |= set(vocab.eos_token_ids)
    return allowed


@pytest.mark.parametrize("pattern,prefixes", CASES, ids=[c[0][:24] for c in CASES])
def test_allowed_tokens_match_brute_force(pattern, prefixes, smollm2_vocab):
    vocab = smollm2_vocab
    grammar = compile_regex(pattern, vocab, cache=False)
    for prefix in prefixes:
        matcher = grammar.matcher()
        assert matcher.accept_bytes(prefix) or prefix == b"", prefix
        got = set(matcher.allowed_token_ids().tolist())
        expected = _expected_ids(pattern, prefix, vocab)
        missing, extra = sorted(expected - got)[:5], sorted(got - expected)[:5]
        assert got == expected, (prefix, [vocab[i] for i in missing], [vocab[i] for i in extra])
        # the sparse transition table agrees with the packed row and with a byte walk
        ids, next_states = grammar.index.transitions(matcher.state)
        assert set(ids.tolist()) == got - set(vocab.eos_token_ids)
        for token_id, nxt in list(zip(ids.tolist(), next_states.tolist(), strict=True))[:200]:
            assert grammar.dfa.walk(matcher.state, vocab[token_id]) == nxt


def test_lazy_index_equals_eager(smollm2_vocab):
    pattern = r"(?:[a-f0-9]{2}:){2}[a-f0-9]{2}|[A-Z][a-z]{1,4}"
    eager = compile_regex(pattern, smollm2_vocab, cache=False)
    lazy = compile_regex(pattern, smollm2_vocab, cache=False, eager_max_states=0)
    assert eager.index.is_eager and not lazy.index.is_eager
    for state in range(eager.num_states):
        assert np.array_equal(eager.index.row(state), lazy.index.row(state))


def test_special_and_padding_ids_never_allowed(smollm2_tokenizer):
    from formcast.grammar import Vocabulary

    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49152 + 40)
    grammar = compile_regex(r"(?s:.)*", vocab, cache=False)
    allowed = set(grammar.matcher().allowed_token_ids().tolist())
    specials = set(vocab.special_token_ids) - set(vocab.eos_token_ids)
    assert not allowed & specials
    assert not allowed & set(range(49152, 49152 + 40))
    assert set(vocab.eos_token_ids) <= allowed
    # every non-special token is allowed by "any text" except those that are not valid UTF-8
    # prefixes (e.g. a lone continuation byte)
    for token_id in range(vocab.num_tokenizer_tokens):
        piece = vocab[token_id]
        if piece and token_id not in vocab.special_token_ids:
            valid = is_viable_prefix(r"(?s:.)*", piece, [0, 0x10FFFF])
            assert (token_id in allowed) == valid, piece


# -- the trie walk (row ranges for looping subtrees) against the token-by-token walk ----------


def _assert_trie_walk_exact(dfa, vocab) -> None:
    """The trie kernel's packed rows (row ranges, dense subtree rows, singles, EOS) equal the
    allowed sets of the plain per-token walk (``walk_tokens``, one gather per byte)."""
    from formcast.grammar.index.token_index import (
        index_packed_rows,
        state_transitions,
        vocab_table,
        walk_tokens,
    )

    table = vocab_table(vocab)
    states = np.arange(dfa.num_states)
    width = table.num_words * 32
    expected = np.zeros((len(states), width), dtype=bool)
    owner, rows, _ = walk_tokens(dfa, table, states)
    expected[owner, table.token_ids[rows]] = True
    expected[np.ix_(np.flatnonzero(dfa.is_accepting), table.eos_token_ids)] = True
    packed = index_packed_rows(dfa, table, states)  # (S, W) int32
    got = np.unpackbits(packed.view(np.uint8), axis=1, bitorder="little").astype(bool)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected), "allowed tokens differ"
    # the sparse transitions of each state (trie_ends): the same (token, end state) pairs
    owner, rows, ends = walk_tokens(dfa, table, states)
    for state in states.tolist():
        ids, found_ends = state_transitions(dfa, table, state)
        mine = owner == state
        order = np.argsort(table.token_ids[rows[mine]])
        assert np.array_equal(ids, table.token_ids[rows[mine]][order]), state
        assert np.array_equal(found_ends, ends[mine][order]), state


# patterns whose DFAs have self-loops over wide byte sets and counted chains (the row-range
# shortcut), UTF-8 continuation states and accepting states with exits
TRIE_PATTERNS = [
    r'\{"name":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*","n":-?(?:0|[1-9][0-9]*)\}',
    r"[a-z ]{0,12}\.|[^\n]*x",
    r"(?:é|[α-ω]+)[^a]*|\d{3,5}",
    r"(?s:.)*",
    r'"[^"\\]{0,20}"(?:,"[a-z]{2,5}")?',
    # bounded JSON strings: the walk cuts subtrees by length at the chain's end (the end state
    # reads only the quote or an escape), and must not where the end state reads more
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,8}"(?:,"k":[0-9]|\})',
    r'\{"a":"[^"\\\x00-\x1f]{2,5}","b":"[^"\\\x00-\x1f]{0,3}"\}',
    r"[a-z]{0,3}[a-z0-9]|[ -~]{1,6}\.",
    # the chain's end reads `e` off the chain (to a state of its own): "the" lives past it
    r"[a-z]{2}(?:[0-9]+|e)",
    # searches for unanchored patterns inside a JSON string: no byte loops on one state, but
    # every string over the printable ASCII text bytes stays alive (kernels.closed_bytes)
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*[A-Fa-f0-9]{6}(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
    r'"[ -~]*ab[ -~]*"(?:,|\})',
    r"[ -~]*(?:x[0-9]{3}|é)[ -~]*",
]


@pytest.mark.parametrize("pattern", TRIE_PATTERNS, ids=range(len(TRIE_PATTERNS)))
def test_trie_walk_equals_token_walk(pattern, smollm2_vocab):
    from formcast.grammar.index.compile import regex_to_dfa

    _assert_trie_walk_exact(regex_to_dfa(pattern), smollm2_vocab)


@pytest.mark.parametrize("max_cells", [1, 2_000])
@pytest.mark.parametrize("pattern", TRIE_PATTERNS, ids=range(len(TRIE_PATTERNS)))
def test_trie_walk_with_levels_cut_short(pattern, max_cells, smollm2_vocab, monkeypatch):
    """Chain coverage kept to a few levels (a cell budget, as for a DFA of many thousand
    states): still exact, the subtrees taller than the levels kept are walked into."""
    from formcast.grammar.index import token_index
    from formcast.grammar.index.compile import regex_to_dfa

    monkeypatch.setattr(token_index, "COVERAGE_MAX_CELLS", max_cells)
    dfa = regex_to_dfa(pattern)
    tokens = token_index.TrieTokens(dfa, token_index.vocab_table(smollm2_vocab))
    if max_cells == 1:  # levels 0..2 and, if they still changed, an empty one
        assert tokens.covered.shape[0] <= 4
        assert tokens.covered.shape[0] < 4 or not tokens.covered[3].any()
        if "{0,8}" in pattern:  # a counted chain changes at every level: cut
            assert tokens.covered.shape[0] == 4
    _assert_trie_walk_exact(dfa, smollm2_vocab)


_ATOMS = ["a", "b", "[a-c]", "[^a]", "[ -~]", "\\d", "é", '[^"\\\\]', '"', "."]


@st.composite
def _patterns(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["atom", "seq", "alt", "star", "count"] if depth < 3 else ["atom"]))
    if kind == "atom":
        return draw(st.sampled_from(_ATOMS))
    if kind == "seq":
        return "".join(draw(st.lists(_patterns(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(?:" + "|".join(draw(st.lists(_patterns(depth + 1), min_size=2, max_size=3))) + ")"
    inner = "(?:" + draw(_patterns(depth + 1)) + ")"
    if kind == "star":
        return inner + "*"
    lo = draw(st.integers(0, 3))
    return inner + f"{{{lo},{lo + draw(st.integers(0, 3))}}}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns())
def test_trie_walk_hypothesis(pattern, smollm2_vocab):
    from formcast.grammar.index.compile import regex_to_dfa

    _assert_trie_walk_exact(regex_to_dfa(pattern), smollm2_vocab)


def test_vocab_trie_structure(smollm2_vocab):
    """Every node: its row range holds exactly the tokens with its prefix; bytes below exact."""
    from formcast.grammar.index.token_index import vocab_table

    table = vocab_table(smollm2_vocab)
    trie = table.trie
    pieces = [smollm2_vocab.token_bytes[i] for i in table.token_ids.tolist()]
    prefix = [b""] * trie.num_nodes
    for node in range(trie.num_nodes):
        for child in range(trie.child_start[node], trie.child_end[node]):
            prefix[child] = prefix[node] + bytes([int(trie.node_byte[child])])
    assert len(set(prefix)) == trie.num_nodes
    rng = np.random.default_rng(0)
    for node in [0, *rng.choice(trie.num_nodes, 200, replace=False).tolist()]:
        lo, hi = int(trie.row_lo[node]), int(trie.row_hi[node])
        inside = [r for r, piece in enumerate(pieces) if piece.startswith(prefix[node])]
        assert inside == list(range(lo, hi))
        below = set()
        for r in inside:
            below |= set(pieces[r][len(prefix[node]) :])
        bits = trie.bytes_below[node]
        assert below == {b for b in range(256) if (int(bits[b // 64]) >> (b % 64)) & 1}
        own = trie.token_rows[trie.token_start[node] : trie.token_start[node + 1]].tolist()
        assert own == [r for r in inside if pieces[r] == prefix[node]]
        assert bool(trie.has_token[node]) == bool(own)


def test_lazy_index_equals_eager_on_a_schema(smollm2_vocab):
    from formcast.grammar.index.compile import compile_dfa, regex_to_dfa
    from formcast.grammar.json_schema.compile import json_schema_to_regex

    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "maxLength": 5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number"},
        },
        "required": ["id"],
    }
    dfa = regex_to_dfa(json_schema_to_regex(schema, strict=False, max_any_depth=2))
    eager = compile_dfa(dfa, smollm2_vocab)
    lazy = compile_dfa(dfa, smollm2_vocab, eager_max_states=0)
    assert eager.index.is_eager and not lazy.index.is_eager
    for state in range(dfa.num_states):
        assert np.array_equal(eager.index.row(state), lazy.index.row(state))


def _schema_dfa():
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.json_schema.compile import json_schema_to_regex

    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "replicas": {"type": "integer", "minimum": 0},
            **{f"terminationGracePeriod{i}": {"type": "boolean"} for i in range(12)},
        },
    }
    return regex_to_dfa(json_schema_to_regex(schema, strict=True))


def test_eager_index_stores_each_distinct_row_once(smollm2_vocab):
    from formcast.grammar.index.compile import compile_dfa

    dfa = _schema_dfa()
    eager = compile_dfa(dfa, smollm2_vocab)
    lazy = compile_dfa(dfa, smollm2_vocab, eager_max_states=0)
    index = eager.index
    assert index.wait_indexed(timeout=60)  # the background fill
    assert index.is_eager and index.packed.shape[0] < dfa.num_states  # key letters share rows
    assert not index.packed.flags.writeable  # shared by several states
    distinct = {lazy.index.row(s).tobytes() for s in range(dfa.num_states)}
    assert index.packed.shape[0] == len(distinct)
    for state in range(dfa.num_states):
        assert np.array_equal(index.row(state), lazy.index.row(state))
        assert index.row_views[state] is index.row(state)


def test_eager_index_over_its_time_cap_turns_lazy_and_keeps_its_rows(smollm2_vocab):
    from formcast.grammar.automata.budget import CompileBudget
    from formcast.grammar.index.token_index import _EAGER_CHUNK, TokenIndex

    dfa = _schema_dfa()
    assert dfa.num_states > _EAGER_CHUNK  # more than one chunk, so the cap can cut in
    reference = TokenIndex(dfa, smollm2_vocab, is_eager=True)
    assert reference.build_eager(CompileBudget(timeout_s=60))
    capped = TokenIndex(dfa, smollm2_vocab, is_eager=True)
    assert not capped.build_eager(CompileBudget(timeout_s=60), max_s=0.0)
    assert not capped.is_eager and capped.row_views is None
    assert len(capped.lazy_rows) == _EAGER_CHUNK  # the first chunk, kept
    for state in range(dfa.num_states):  # the rest on first use, equal to the eager rows
        assert np.array_equal(capped.row(state), reference.row(state))


# -- rows derived by difference (an eager build) against rows walked in full -----------------


def _assert_derived_rows_exact(
    dfa,
    vocab,
    min_ratio: int,
    chunk: int,
    monkeypatch,
    max_fix_tokens: int | None = None,
    has_twins: bool = True,
) -> tuple[int, int, int]:
    """An eager build whose states take their rows from other states' where
    ``difference_refs`` says so (``min_ratio = 0``: by difference, every state that has a
    uniform successor, cycles included; a huge ratio: by shift wherever a state's pair with
    its successor agrees on some depth, ``max_fix_tokens`` tokens walked again at most; with
    ``has_twins``, the other states of a twin block from its first walked one) equals the full
    walk of every state; returns how many rows were derived by difference, by shift and as
    twins."""
    from formcast.grammar.index import kernels, token_index
    from formcast.grammar.index.kernels import difference_refs
    from formcast.grammar.index.token_index import (
        Derivations,
        TokenIndex,
        TrieTokens,
        index_packed_rows,
        vocab_table,
    )

    table = vocab_table(vocab)
    tokens = TrieTokens(dfa, table)
    trie = table.trie
    first_bits = np.zeros(4, dtype=np.uint64)
    for b in trie.node_byte[trie.child_start[0] : trie.child_end[0]].tolist():
        first_bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    _, num_longer = table.rows_by_length()
    if max_fix_tokens is None:
        max_fix_tokens = table.num_words // token_index.FIX_WORDS_PER_TOKEN
    found = Derivations(
        *difference_refs(
            dfa.transitions, dfa.byte_to_class, tokens.uniform, first_bits, min_ratio,
            len(num_longer) - 1, num_longer, max_fix_tokens, 4 * dfa.num_states + 64,
            tokens.twins()[0] if has_twins else np.full(dfa.num_states, -1, dtype=np.int64),
        )
    )  # fmt: skip
    tokens._derivations = found
    ref, level = found.ref, found.level
    # references end in walked states, one level down each step (no cycle survives)
    derived = np.flatnonzero(ref >= 0)
    assert (level[ref < 0] == 0).all()
    assert (level[derived] == level[ref[derived]] + 1).all()
    by_twin = found.fix_depth == kernels.TWIN_DEPTH
    assert (ref[by_twin] >= 0).all()
    by_shift = (ref >= 0) & ~found.diff.any(axis=1) & ~by_twin
    monkeypatch.setattr(token_index, "_EAGER_CHUNK", chunk)
    index = TokenIndex(dfa, vocab, is_eager=True)
    index._trie_tokens = tokens
    assert index.build_eager(None)
    walked = index_packed_rows(dfa, table, np.arange(dfa.num_states))
    for state in range(dfa.num_states):
        assert np.array_equal(index.row(state), walked[state]), (state, int(ref[state]))
    num_shift, num_twin = int(by_shift.sum()), int(by_twin.sum())
    return len(derived) - num_shift - num_twin, num_shift, num_twin


def _key_complement_dfa(num_keys: int):
    """An object with named properties and any other key (a key complement: string states
    that differ from the string loop on one byte, the next letter of a name)."""
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.json_schema.compile import json_schema_to_regex

    names = ["height", "heading", "width", "name", "nickname", "id", "idle"][:num_keys]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "additionalProperties": {"type": "string", "maxLength": 3},
    }
    return regex_to_dfa(json_schema_to_regex(schema, strict=True))


@pytest.mark.parametrize("chunk", [256, 7])
def test_rows_derived_by_difference_equal_walked_rows(chunk, smollm2_vocab, monkeypatch):
    dfa = _key_complement_dfa(7)
    # the key complement's prefixes are derived with the default ratio
    # (without twins, which take most of them: other keys' prefixes of different lengths
    # move alike until the closing quote)
    found = _assert_derived_rows_exact(dfa, smollm2_vocab, 8, chunk, monkeypatch, has_twins=False)
    assert found[0] > 10
    # every state with a uniform successor derived: long chains, a cycle cut
    found = _assert_derived_rows_exact(dfa, smollm2_vocab, 0, chunk, monkeypatch, has_twins=False)
    assert found[0] > 100
    # with twins: the first state of a block derived by difference, its twins from it
    found = _assert_derived_rows_exact(dfa, smollm2_vocab, 0, chunk, monkeypatch)
    assert found[2] > 10


@pytest.mark.parametrize("chunk", [256, 7])
def test_rows_derived_by_shift_equal_walked_rows(chunk, smollm2_vocab, monkeypatch):
    """A bounded string longer than the longest token: its positions with more characters
    left than that are copies of the next one; the later ones walk their long tokens again."""
    from formcast.grammar.index.compile import regex_to_dfa

    dfa = regex_to_dfa(r'\{"a":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,120}","b":[0-9]{0,90}\}')
    found = _assert_derived_rows_exact(dfa, smollm2_vocab, 8, chunk, monkeypatch, has_twins=False)
    assert found[1] > 100  # by shift
    # every walk again (any number of long tokens) and none (copies only)
    for max_fix in (10**9, 0):
        found = _assert_derived_rows_exact(
            dfa, smollm2_vocab, 8, chunk, monkeypatch, max_fix, has_twins=False
        )
        assert found[1] > 30
    _assert_derived_rows_exact(dfa, smollm2_vocab, 8, chunk, monkeypatch)  # twins too


@pytest.mark.parametrize("chunk", [256, 7])
def test_rows_derived_as_twins_equal_walked_rows(chunk, smollm2_vocab, monkeypatch):
    """An object of several string properties (and strings inside an array and a nested
    object): the states inside its strings differ only after the closing quote, so all but
    one are twins, each walking the tokens that hold a quote again; the build equals the
    full walks with and without twins, and with twins walks far fewer states in full."""
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.json_schema.compile import json_schema_to_regex

    schema = {
        "type": "object",
        "properties": {
            **{name: {"type": "string"} for name in ("name", "city", "email", "note")},
            "tags": {"type": "array", "items": {"type": "string", "pattern": '^[a-z"]+$'}},
            "owner": {"type": "object", "properties": {"id": {"type": "string"}}},
            "code": {"type": "string", "maxLength": 4},
        },
        "required": ["name", "city"],
    }
    dfa = regex_to_dfa(json_schema_to_regex(schema, strict=True))
    with_twins = _assert_derived_rows_exact(dfa, smollm2_vocab, 8, chunk, monkeypatch)
    without = _assert_derived_rows_exact(dfa, smollm2_vocab, 8, chunk, monkeypatch, has_twins=False)
    assert without[2] == 0
    assert with_twins[2] >= 5  # the strings of the other six properties at least


def test_first_visits_copy_an_indexed_twin(smollm2_vocab, monkeypatch):
    """A lazy index asked for rows one by one, in a shuffled order: before its twin blocks
    are known every row is walked; once they are (computed in the background, as a compile
    queues them), a state of a block with an indexed state copies that row and walks the
    quote's tokens again. Every row equals the state's full walk either way."""
    import random

    from formcast.grammar.index import token_index
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.index.token_index import TokenIndex, index_packed_rows, vocab_table

    copied = []
    twin_of = TokenIndex._twin_of

    def counted(self, state, tokens):
        found = twin_of(self, state, tokens)
        copied.append(found is not None)
        return found

    monkeypatch.setattr(token_index.TokenIndex, "_twin_of", counted)
    table = vocab_table(smollm2_vocab)
    dfa = regex_to_dfa(
        r'\{"a":"[^"\\]*","b":"([^"\\]|\\["\\/bfnrt]|\\u[0-9a-f]{4})*",'
        r'"c":\["[a-z]*"(,"[^"]*")*\],"d":"[^"]{0,3}","e":"[^"]{0,3}"\}'
    )
    walked = index_packed_rows(dfa, table, np.arange(dfa.num_states))
    for seed in range(3):
        index = TokenIndex(dfa, smollm2_vocab, is_eager=False)
        states = list(range(dfa.num_states))
        random.Random(seed).shuffle(states)
        half = len(states) // 2
        for state in states[:half]:  # blocks not known yet
            assert np.array_equal(index.row(state), walked[state]), state
        assert not any(copied)
        index.find_twins_ahead()
        assert index._twin_job is not None
        assert token_index.BACKGROUND_INDEXER.wait_idle(timeout=60)
        for state in states[half:]:
            assert np.array_equal(index.row(state), walked[state]), state
        assert any(copied)
        copied.clear()


def test_twin_blocks_move_alike_off_the_quote(smollm2_vocab):
    """Every pair of states in one twin block agrees, on every byte but the quote, on being
    alive and on the block it moves to; the twin rows are exactly the tokens holding a quote."""
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.index.token_index import TrieTokens, vocab_table

    table = vocab_table(smollm2_vocab)
    dfa = regex_to_dfa(r'\{"a":"[^"]*","b":"[^"\\]*(\\.[^"\\]*)*","c":\["[a-z]*"(,"x?")*\]\}')
    block, rows = TrieTokens(dfa, table).twins()
    assert len(set(block.tolist())) < dfa.num_states  # some states are twins
    for s in range(dfa.num_states):
        for t in np.flatnonzero(block == block[s]).tolist():
            for b in range(256):
                if b == 0x22:
                    continue
                p, q = (int(dfa.transitions[x, dfa.byte_to_class[b]]) for x in (s, t))
                assert (p < 0) == (q < 0) and (p < 0 or block[p] == block[q]), (s, t, b)
    holding = [r for r in range(len(table.lengths)) if 0x22 in table.matrix[r, : table.lengths[r]]]
    assert rows.tolist() == holding


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=_patterns(),
    min_ratio=st.sampled_from([0, 1, 8, 10**6]),
    chunk=st.sampled_from([3, 256]),
    max_fix_tokens=st.sampled_from([None, 0, 10**9]),
    has_twins=st.booleans(),
)
def test_rows_derived_hypothesis(
    pattern, min_ratio, chunk, max_fix_tokens, has_twins, smollm2_vocab
):
    from formcast.grammar.index.compile import regex_to_dfa

    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_derived_rows_exact(
            regex_to_dfa(pattern),
            smollm2_vocab,
            min_ratio,
            chunk,
            monkeypatch,
            max_fix_tokens,
            has_twins,
        )


def _closed_states_by_search(dfa, byte_set: list[int]) -> np.ndarray:
    """``(S,)`` bool: from the state, every string over ``byte_set`` stays alive, found by a
    search of the states each one reaches on those bytes (none may miss one of them)."""
    moves = [sorted({int(dfa.transitions[s, dfa.byte_to_class[b]]) for b in byte_set})
             for s in range(dfa.num_states)]  # fmt: skip
    is_closed = np.zeros(dfa.num_states, dtype=bool)
    for start in range(dfa.num_states):
        seen, stack = {start}, [start]
        while stack:
            state = stack.pop()
            if -1 in moves[state]:
                break
            for nxt in moves[state]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        else:
            is_closed[start] = True
    return is_closed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), byte_set=st.sampled_from(["text", "ab", "digits"]))
def test_closed_bytes_are_exactly_the_states_alive_on_every_string(pattern, byte_set):
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.index.kernels import STRING_TEXT_BYTES, closed_bytes

    dfa = regex_to_dfa(pattern)
    chosen = {
        "text": STRING_TEXT_BYTES.tolist(), "ab": [0x61, 0x62], "digits": list(range(0x30, 0x3A)),
    }[byte_set]  # fmt: skip
    closed = closed_bytes(dfa.transitions, dfa.byte_to_class, np.array(chosen, np.int64))
    bits = np.zeros(4, np.uint64)
    for b in chosen:
        bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    is_closed = _closed_states_by_search(dfa, chosen)
    for state in range(dfa.num_states):
        assert np.array_equal(closed[state], bits if is_closed[state] else np.zeros(4, np.uint64))


def test_closed_string_states_of_a_search(smollm2_vocab):
    """Inside a JSON string that must contain 6 hex digits, every state before and after the
    match is closed over the text bytes (the rows need no walk of those subtrees)."""
    from formcast.grammar.index.compile import regex_to_dfa
    from formcast.grammar.index.token_index import TrieTokens, vocab_table

    dfa = regex_to_dfa(TRIE_PATTERNS[-3])
    tokens = TrieTokens(dfa, vocab_table(smollm2_vocab))
    num_closed = int((tokens.closed != 0).any(axis=1).sum())
    assert num_closed >= 7  # the 6 counted positions and the state after the match
