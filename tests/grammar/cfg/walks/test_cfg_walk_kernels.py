"""The vocabulary-walk kernels (``cfg_walk_kernels``) against a plain per-token byte walk.

The reference reads every token (or every record's suffix) byte by byte from the start state,
vectorised over tokens with numpy only (no trie, no chain coverage, no jumps): a token is
within if it stays alive to its end; a split is recorded before byte ``j`` (at least one byte
read) when the state splits and ``follow`` marks byte ``j``; splits of within tokens are
dropped. Terminal DFAs cover the kernels' shortcuts: self-loops (a string's inside), counted
repetitions ``{0,n}`` (subtree jumps along the uniform chain), multi-byte UTF-8 content,
exact-count chunks that split at their end, and keyword-like narrow states.
"""

from __future__ import annotations

import numpy as np
import pytest

from formcast.grammar.cfg.walks.kernels import (
    BYTE_CLASSES,
    NO_COVERAGE,
    chain_coverage,
    sort_records,
    walk_suffixes,
    walk_trie,
)
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.index.token_index import vocab_table

PATTERNS = [
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',  # a JSON string: self-loop inside
    r'"(?:[\x20-\x21\x23-\x5b\x5d-\ud7ff]|\\["\\bfnrt]){0,10}"',  # counter, UTF-8 content
    r"(?:[\x20-\x21\x23-\x5b\x5d-\x7e]){6,6}",  # an exact chunk: splits at its end only
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?",  # a number: accepting loops
    r"select|from|where|[a-z_][a-z0-9_]*",  # keywords and names
    # searches for an unanchored pattern: no byte loops on one state, every printable ASCII
    # text byte keeps the states alive (closed bytes), and accepting states inside that set
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*[A-Fa-f0-9]{6}(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
    r"[ -~]*ab[ -~]*",
]


def _full_table(dfa) -> np.ndarray:
    return np.ascontiguousarray(dfa.transitions[:, dfa.byte_to_class].astype(np.int32))


def _reference(table, start, is_split, follow, vt, rows, steps):
    """Walk records ``(rows[k], steps[k])`` byte by byte from ``start`` (numpy over records).
    Returns (within token ids, {(row, offset, state)} of non-within tokens)."""
    rows = np.asarray(rows, dtype=np.int64)
    pos = np.asarray(steps, dtype=np.int64).copy()
    state = np.full(len(rows), start, dtype=np.int64)
    alive = np.ones(len(rows), dtype=bool)
    lengths = vt.lengths[rows].astype(np.int64)
    first = pos.copy()
    splits = set()
    while True:
        active = np.flatnonzero(alive & (pos < lengths))
        if not len(active):
            break
        byte = vt.matrix[rows[active], pos[active]].astype(np.int64)
        is_rec = (pos[active] > first[active]) & is_split[state[active]] & follow[byte]
        for k in np.flatnonzero(is_rec).tolist():
            i = active[k]
            splits.add((int(rows[i]), int(pos[i]), int(state[i])))
        nxt = table[state[active], byte]
        state[active] = nxt
        alive[active[nxt < 0]] = False
        pos[active] += 1
    within = set(vt.token_ids[rows[alive]].tolist())
    kept = {r for r in splits if int(vt.token_ids[r[0]]) not in within}
    return within, kept


def _ids(packed: np.ndarray) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(packed.view(np.uint8), bitorder="little")).tolist())


def _split_set(found) -> set[tuple[int, int, int]]:
    _, rows, steps, states = found
    return set(zip(rows.tolist(), steps.tolist(), states.tolist(), strict=True))


def _states(dfa, count: int) -> list[int]:
    if dfa.num_states <= count:
        return list(range(dfa.num_states))
    return np.linspace(0, dfa.num_states - 1, count).astype(int).tolist()


@pytest.fixture(scope="module")
def table(smollm2_vocab):
    return vocab_table(smollm2_vocab)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_trie_walk_equals_byte_walk(pattern, table):
    dfa = regex_to_dfa(pattern)
    full = _full_table(dfa)
    coverage = chain_coverage(dfa, table)
    rng = np.random.default_rng(len(pattern))
    all_rows = np.arange(len(table.token_ids))
    for state in _states(dfa, 6):
        follow = np.zeros(257, dtype=bool)
        follow[:256] = rng.random(256) < 0.3
        follow[[ord(","), ord('"'), ord(" ")]] = True
        first_bytes = np.ones(256, dtype=bool)
        if state % 2:
            first_bytes[rng.choice(256, 128, replace=False)] = False
        picked = all_rows[first_bytes[table.matrix[:, 0]]]
        # the trie walk's records start at offset 0 of every token: the first byte is read
        # from `state`, splits come after it
        want = _reference(
            full, state, dfa.is_accepting, follow, table, picked, np.zeros(len(picked), int)
        )
        for cov in (coverage, NO_COVERAGE):
            found = walk_trie(full, state, dfa.is_accepting, follow, cov, table, first_bytes)
            assert _ids(found[0]) == want[0], (pattern, state)
            assert _split_set(found) == want[1], (pattern, state)
        # the DFA's own (S, K) class table, as terminal walks read it
        found = walk_trie(
            dfa.transitions, state, dfa.is_accepting, follow, coverage, table, first_bytes,
            classes=dfa.byte_to_class,
        )  # fmt: skip
        assert _ids(found[0]) == want[0], (pattern, state, "classes")
        assert _split_set(found) == want[1], (pattern, state, "classes")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_record_walk_equals_byte_walk(pattern, table):
    dfa = regex_to_dfa(pattern)
    full = _full_table(dfa)
    rng = np.random.default_rng(7 + len(pattern))
    num_rows = len(table.token_ids)
    long_rows = np.flatnonzero(table.lengths >= 2)
    rows = rng.choice(long_rows, 3000)
    steps = (rng.random(len(rows)) * (table.lengths[rows] - 1)).astype(np.int64)
    rows = np.concatenate([rows, rows[:500]])  # several records of one token
    steps = np.concatenate([steps, np.zeros(500, dtype=np.int64)])
    rows, steps, bounds, _ = sort_records(rows, steps, table)
    assert rows.max() < num_rows
    follow = np.ones(257, dtype=bool)
    follow[256] = False
    for state in _states(dfa, 6):
        want = _reference(full, state, dfa.is_accepting, follow, table, rows, steps)
        for walked, classes in ((full, BYTE_CLASSES), (dfa.transitions, dfa.byte_to_class)):
            found = walk_suffixes(
                walked, state, rows, steps, bounds, dfa.is_accepting, follow, table,
                classes=classes,
            )  # fmt: skip
            assert _ids(found[0]) == want[0], (pattern, state, walked.shape)
            assert _split_set(found) == want[1], (pattern, state, walked.shape)


def test_sort_records_is_canonical(table):
    rng = np.random.default_rng(3)
    rows = rng.choice(np.flatnonzero(table.lengths >= 3), 2000)
    steps = rng.integers(0, 2, len(rows)).astype(np.int64)
    rows = np.concatenate([rows, rows[:100]])  # duplicates are dropped
    steps = np.concatenate([steps, steps[:100]])
    got_rows, got_steps, bounds, first_bytes = sort_records(rows, steps, table)
    pairs = zip(rows.tolist(), steps.tolist(), strict=True)
    want = sorted({(int(table.matrix[r, j]), r, j) for r, j in pairs})
    got = list(zip(got_rows.tolist(), got_steps.tolist(), strict=True))
    assert got == [(r, j) for _, r, j in want]
    firsts = np.array([b for b, _, _ in want])
    assert bounds.tolist() == np.searchsorted(firsts, np.arange(257)).tolist()
    assert first_bytes == sum(1 << b for b in set(firsts.tolist()))
    # the same set in another order gives the same arrays
    order = rng.permutation(len(rows))
    again = sort_records(rows[order], steps[order], table)
    assert again[0].tolist() == got_rows.tolist() and again[1].tolist() == got_steps.tolist()


@pytest.mark.parametrize("pattern", PATTERNS[:3])
def test_chain_coverage_strings_stay_alive(pattern, table):
    dfa = regex_to_dfa(pattern)
    full = _full_table(dfa)
    covered, uniform, _ = chain_coverage(dfa, table)
    top = covered.shape[0] - 1
    rng = np.random.default_rng(11)
    for state in _states(dfa, 12):
        assert np.array_equal(np.unpackbits(covered[0, state].view(np.uint8), bitorder="little"),
                              (full[state] >= 0).astype(np.uint8))  # fmt: skip
        for h in (1, 2, 3, 5, 9, 40):
            bits = covered[min(h, top), state]
            allowed = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little"))
            if not len(allowed):
                continue
            for _ in range(20):  # random strings of length <= h over the covered bytes
                s = state
                for byte in rng.choice(allowed, int(rng.integers(1, h + 1))).tolist():
                    assert full[s, byte] == uniform[s] >= 0, (pattern, state, h)
                    s = full[s, byte]


def _reference_levels(transitions, byte_to_class, uniform, max_height, max_cells):
    """Chain coverage levels as the docstring defines them, level by level over every state
    (plain numpy; the kernel recomputes only the states whose successor changed)."""
    num_states, num_classes = transitions.shape
    bits = np.zeros((num_classes, 4), np.uint64)
    for b in range(256):
        bits[byte_to_class[b], b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    live = np.zeros((num_states, 4), np.uint64)
    first = np.zeros((num_states, 4), np.uint64)
    for s in range(num_states):
        for k in range(num_classes):
            if transitions[s, k] >= 0:
                live[s] |= bits[k]
                if transitions[s, k] == uniform[s]:
                    first[s] |= bits[k]
    most = min(max_height, max(2, max_cells // max(num_states, 1) - 2))
    levels = [live, first]
    while len(levels) <= most:
        u = uniform
        nxt = np.where((u >= 0)[:, None], first & levels[-1][np.maximum(u, 0)], np.uint64(0))
        if np.array_equal(nxt, levels[-1]):
            return np.stack(levels)
        levels.append(nxt)
    if most < max_height:
        levels.append(np.zeros_like(live))
    return np.stack(levels)


@pytest.mark.parametrize(
    "pattern",
    [
        '"(?:[a-z]|\\\\n){3,40}"',
        "(?:ab|c){2,9}x?",
        '"[^"]{0,70}"(?:,"[a-z]{5,20}")*',
        "[0-9]{1,3}(?:\\.[0-9]{1,3}){3}",
        "a*b{4}c{0,90}",
    ],
)
@pytest.mark.parametrize("max_cells", [1 << 21, 300])
def test_chain_coverage_levels_equal_the_definition(pattern, max_cells, table):
    from formcast.grammar.index import kernels as index_kernels

    dfa = regex_to_dfa(pattern)
    height = max(int(table.trie.height[0]), 1)
    covered, uniform = index_kernels.chain_coverage(
        dfa.transitions, dfa.byte_to_class, height, max_cells
    )
    want = _reference_levels(dfa.transitions, dfa.byte_to_class, uniform, height, max_cells)
    assert covered.shape == want.shape and np.array_equal(covered, want), pattern
