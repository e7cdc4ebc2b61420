"""Counted chains (``X{m,n}`` of a prefix code) and their shared lexer walks are exact.

- a finite chain as built (no subset construction, no minimisation) is the minimal DFA: it is
  isomorphic to determinising and minimising the same pattern;
- every state of the chain terminals of JSON-Schema grammars (several ``maxLength`` values,
  a ``minLength``, nullable bodies) walks the vocabulary, through its :class:`ChainKeys` key
  and the canonical chain, exactly as a walk on its own DFA does, and states of different
  chains with equal keys get the very same stored walk;
- masks along instances that end near ``maxLength`` and cross a chunk boundary equal a
  brute-force read of the vocabulary.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import determinize
from formcast.grammar.automata.chain_keys import ChainKeys, canonical_chain, chain_acceptance
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa
from formcast.grammar.cfg.walks.dfa_walk import DfaWalker
from formcast.grammar.cfg.walks.kernels import chain_coverage, walk_suffixes, walk_trie
from formcast.grammar.index.compile import regex_to_dfa, strip_anchors
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.json_schema.structural import STRING_CHUNK, compile_json_schema_cfg
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import to_python_regex
from tests.grammar._cfg_oracle import brute_force_mask, compare_dfa_walks

CHAR = f"(?:{to_python_regex(JSON_CHAR)})"
CHAIN_PATTERNS = [
    CHAR + "{0,10}",
    CHAR + "{3,40}",
    CHAR + "{7,7}",
    "[a-c]{4,9}",
    "(?:ab|c){4,7}",
    "(?:[\\x80-\\xbf]x|y){0,5}",
]


def _full(dfa) -> np.ndarray:
    return dfa.transitions[:, dfa.byte_to_class]


@pytest.mark.parametrize("pattern", CHAIN_PATTERNS)
def test_finite_chains_are_minimal_as_built(pattern):
    built = regex_to_dfa(pattern)
    assert built.walk_keys is not None, pattern
    budget = CompileBudget(max_states=10**6, timeout_s=10.0)
    node = strip_anchors(parse_regex(pattern, "python"))
    reference = minimize(determinize(build_nfa(node, budget), budget), budget)
    assert _bfs_signature(built) == _bfs_signature(reference), pattern


def _bfs_signature(dfa) -> list[tuple]:
    """The DFA renumbered in BFS order over bytes: equal iff the DFAs are isomorphic."""
    full = _full(dfa)
    order = {0: 0}
    queue = deque([0])
    rows = []
    while queue:
        s = queue.popleft()
        row = []
        for t in full[s].tolist():
            if t >= 0 and t not in order:
                order[t] = len(order)
                queue.append(t)
            row.append(order[t] if t >= 0 else -1)
        rows.append((bool(dfa.is_accepting[s]), tuple(row)))
    assert len(rows) == dfa.num_states
    return rows


def test_chain_keys_of_positions():
    keys = ChainKeys("x", width=2, lo=3, hi=100)
    assert keys.key(0, 10) == ("x", 0, 3, 10)  # far from both bounds: capped
    assert keys.key(2 * 95 + 1, 10) == ("x", 1, 0, 5)  # 95 words read, inside the 96th
    assert keys.key(2 * 100, 10) == ("x", 0, 0, 0)  # the end state
    stripped = ChainKeys("x", width=2, lo=0, hi=4).without_empty()
    assert stripped.key(0, 10) == ("x", 0, 1, 4)  # the non-accepting copy of the start
    assert stripped.key(1, 10) == ("x", 0, 0, 4)
    # 5 words left, 2 more needed before accepting: state (5, 1) of x{0,10}, accepting from 7
    assert canonical_chain(("x", 1, 2, 5), width=2, horizon=10) == ("(?:x){0,10}", 11, 7)
    accepting = chain_acceptance(width=2, horizon=10, accept_from=7)
    assert np.flatnonzero(accepting).tolist() == [14, 16, 18, 20]


BOUNDED = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "maxLength": 6},
        "name": {"type": "string", "maxLength": 40},
        "word": {"type": "string", "minLength": 3, "maxLength": 30},
        "note": {"type": "string", "maxLength": STRING_CHUNK + 44},
        "body": {"type": "string", "minLength": 2, "maxLength": 3 * STRING_CHUNK + 5},
    },
    "additionalProperties": False,
}


def _chain_terminals(prepared) -> list[int]:
    return [t for t, dfa in enumerate(prepared.terminal_dfas) if dfa.walk_keys is not None]


def test_keyed_walks_equal_walks_on_the_own_dfa(smollm2_vocab):
    compiled = compile_json_schema_cfg(BOUNDED, smollm2_vocab, cache=False)
    prepared = compiled.prepared
    table = vocab_table(smollm2_vocab)
    walker = DfaWalker(prepared, table)
    terminals = _chain_terminals(prepared)
    shifts = {prepared.terminal_dfas[t].walk_keys.shift for t in terminals}
    assert len(terminals) >= 5 and shifts == {0, 1}
    stored: dict[tuple, tuple] = {}
    num_shared = 0
    for t in terminals:
        dfa = prepared.terminal_dfas[t]
        width = dfa.walk_keys.width
        ends = range(max(0, dfa.num_states - 4 * width), dfa.num_states)  # the last words
        states = sorted(set(range(0, min(dfa.num_states, 3 * width))) | set(ends))
        full = np.ascontiguousarray(dfa.transitions[:, dfa.byte_to_class], dtype=np.int32)
        own = (full, dfa.is_accepting, walker.follow[t])  # the (S, 256) table: a reference
        coverage = chain_coverage(dfa, table)
        for q in states:
            keyed = walker.vocabulary_walk(t, q)
            direct = walk_trie(own[0], q, own[1], own[2], coverage, table)
            for got, want in zip(keyed, direct[:3], strict=True):
                np.testing.assert_array_equal(got, want, err_msg=f"terminal {t} state {q}")
            site = (dfa.walk_keys.key(q, walker.horizon), walker._follow_keys[t])
            if site in stored:
                assert stored[site] is keyed  # one stored walk per key
                num_shared += 1
            stored[site] = keyed
            rows, steps = keyed[1], keyed[2]
            if len(rows):  # the split records read back from the chain's start
                order = np.lexsort((steps, rows, table.matrix[rows, steps]))
                rows, steps = rows[order], steps[order]
                first = table.matrix[rows, steps]
                bounds = np.searchsorted(first, np.arange(257)).astype(np.int64)
                got = walker.walk_records(t, 0, rows, bounds, steps, b"test:%d:%d" % (t, q))
                want = walk_suffixes(own[0], 0, rows, steps, bounds, own[1], own[2], table)
                for a, b in zip(got, want[:3], strict=True):
                    np.testing.assert_array_equal(a, b)
    assert num_shared > 0


def test_bounded_string_masks_equal_brute_force(smollm2_vocab):
    note = "né " * ((STRING_CHUNK + 40) // 3)  # crosses a chunk boundary, ends near maxLength
    body = "b\\n" + "x" * (STRING_CHUNK - 1) + "yz"
    text = (
        '{"code":"ab","name":"' + "n" * 38 + '","word":"abc",'
        '"note":"' + note + '","body":"' + body + '"}'
    ).encode()
    compiled = compile_json_schema_cfg(BOUNDED, smollm2_vocab, cache=False)
    matcher = compiled.matcher()
    assert matcher.accept_bytes(text) and matcher.is_accepting()
    runtime = compiled.runtime
    anchors = [text.index(b) + len(b) for b in (b'"code":"', b'"name":"', b'"note":"', b'"body":"')]
    cuts = sorted(
        {k for a in anchors for k in (a, a + 1, a + 2)}
        | {text.index(b'","word"') - 2, text.index(b'","word"')}
        | {anchors[2] + STRING_CHUNK - 3, anchors[2] + STRING_CHUNK + 1, len(text) - 4}
    )
    for k in cuts:
        prefix = text[:k]
        heads = runtime.advance(compiled.initial_heads, prefix)
        matcher = compiled.matcher()
        assert matcher.accept_bytes(prefix), prefix
        bits = np.unpackbits(matcher.packed_row().view(np.uint8), bitorder="little")
        got = set(np.flatnonzero(bits[: compiled.vocab_size]).tolist())
        assert got == brute_force_mask(runtime, heads, smollm2_vocab), prefix[-20:]


def test_chain_walks_near_the_bounds_equal_generic_walks(smollm2_vocab):
    # the last positions of each bounded string: chain jumps end on the last character (no
    # byte readable after it), where the trie walk settles the longer tokens at once; the
    # generic walk over interned lexer states has no jumps
    prepared = compile_json_schema_cfg(BOUNDED, smollm2_vocab, cache=False).prepared
    parts = []
    for t in _chain_terminals(prepared):
        dfa = prepared.terminal_dfas[t]
        width = dfa.walk_keys.width
        parts += [(t, q) for q in range(max(0, dfa.num_states - 14 * width), dfa.num_states, width)]
    assert len(parts) >= 50
    table = vocab_table(smollm2_vocab)
    assert compare_dfa_walks(prepared, table, parts) > 0
