"""Token indexes filled ahead of use by the background thread: the rows equal the on-demand
rows, whether asked for before, during or after the fill; the row-grouping kernel equals
numpy's grouping; the job stack runs newest first and skips dropped jobs."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.index.background_indexer import BackgroundIndexer
from formcast.grammar.index.compile import compile_dfa, compile_regex, regex_to_dfa
from formcast.grammar.index.kernels import group_rows, hash_slots, unique_rows_inplace
from formcast.grammar.index.token_index import _EAGER_CHUNK, TokenIndex
from formcast.grammar.json_schema.compile import json_schema_to_regex

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "kind": {"enum": ["alpha", "beta", "gamma"]},
        "count": {"type": "integer", "minimum": 0},
        **{f"flag{i}": {"type": "boolean"} for i in range(30)},
    },
    "required": ["name"],
}


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=n, max_size=n
        )
    )
)
@settings(max_examples=200, deadline=None)
def test_unique_rows_groups_exactly_the_equal_rows(rows):
    matrix = np.asarray(rows, dtype=np.uint32) * np.uint32(0x9E3779B1)  # spread the bits
    row_of = np.empty(len(matrix), dtype=np.int32)
    grouped = matrix.copy()
    distinct = grouped[: unique_rows_inplace(grouped, row_of)]
    # groups numbered by first occurrence, each holding exactly its equal rows
    _, first_index, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first_index)  # numpy's groups by first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    assert np.array_equal(row_of, rank[inverse.reshape(-1)])
    assert np.array_equal(distinct, matrix[np.sort(first_index)])


@given(
    st.lists(st.lists(st.integers(0, 2), min_size=4, max_size=4), min_size=1, max_size=60),
    st.lists(st.integers(1, 12), min_size=1, max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_group_rows_chunk_by_chunk_equals_grouping_all_rows_at_once(rows, sizes):
    matrix = np.asarray(rows, dtype=np.uint32) * np.uint32(0x9E3779B1)
    expected_of = np.empty(len(matrix), dtype=np.int32)
    expected = matrix.copy()
    expected = expected[: unique_rows_inplace(expected, expected_of)]
    # the same rows in chunks of the given sizes, the store grown between chunks as needed
    store = np.empty((1, 4), dtype=np.uint32)
    slot_group, slot_hash = hash_slots(len(matrix))
    row_of = np.empty(len(matrix), dtype=np.int32)
    num_stored, lo, k = 0, 0, 0
    while lo < len(matrix):
        hi = min(len(matrix), lo + sizes[k % len(sizes)])
        if num_stored + hi - lo > len(store):
            grown = np.empty((2 * (num_stored + hi - lo), 4), dtype=np.uint32)
            grown[:num_stored] = store[:num_stored]
            store = grown
        num_stored = group_rows(
            matrix[lo:hi], row_of[lo:hi], store, num_stored, slot_group, slot_hash
        )
        lo, k = hi, k + 1
    assert np.array_equal(row_of, expected_of)
    assert np.array_equal(store[:num_stored], expected)


def _lazy_rows(dfa, vocab):
    lazy = compile_dfa(dfa, vocab, eager_max_states=0)
    return [lazy.index.row(state) for state in range(dfa.num_states)]


def _wide_schema_dfa(num_more: int):
    schema = dict(
        SCHEMA,
        properties={
            **SCHEMA["properties"],
            **{f"more{i}": {"type": "null"} for i in range(num_more)},
        },
    )
    return regex_to_dfa(json_schema_to_regex(schema, strict=True))


@pytest.mark.parametrize("index_now_s", [0.0, None])  # first chunk now, rest behind; all now
def test_rows_built_now_and_behind_equal_the_rows_built_on_demand(smollm2_vocab, index_now_s):
    dfa = _wide_schema_dfa(120)
    assert dfa.num_states > 2 * _EAGER_CHUNK  # several chunks
    expected = _lazy_rows(dfa, smollm2_vocab)
    grammar = compile_dfa(dfa, smollm2_vocab, index_now_s=index_now_s)
    index = grammar.index
    if index_now_s == 0.0:  # the first chunk (walked states first) was indexed now
        order = np.argsort(index._trie_tokens.derivations().level, kind="stable")
        assert all(state in index.lazy_rows for state in order[:_EAGER_CHUNK].tolist())
    else:
        assert index.row_views is not None  # all of it
    early = [index.row(state) for state in range(0, dfa.num_states, 7)]  # maybe mid-fill
    assert index.wait_indexed(timeout=60)
    assert index.is_eager and index.row_views is not None
    assert index.packed.shape[0] == len({row.tobytes() for row in expected})
    for state in range(dfa.num_states):
        assert np.array_equal(index.row(state), expected[state])
    for k, state in enumerate(range(0, dfa.num_states, 7)):
        assert np.array_equal(early[k], expected[state])


def test_matchers_made_before_the_fill_ends_read_the_filled_rows(smollm2_vocab, smollm2_tokenizer):
    import torch

    dfa = _wide_schema_dfa(120)
    grammar = compile_dfa(dfa, smollm2_vocab, index_now_s=0.0)  # the rest in the background
    text = '{"name":"Ada","kind":"beta","count":3,"flag0":true,"more0":null}'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    before = grammar.matcher()  # made now, walked after the fill
    assert grammar.index.wait_indexed(timeout=60)
    after = grammar.matcher()
    masks = torch.zeros((2, (smollm2_vocab.vocab_size + 31) // 32), dtype=torch.int32)
    for token_id in ids:
        before.fill_bitmask(masks, 0)
        after.fill_bitmask(masks, 1)
        assert torch.equal(masks[0], masks[1])
        assert before.accept_token(token_id) and after.accept_token(token_id)
    assert before.is_accepting()


def test_an_index_exported_before_its_fill_resumes_it_when_loaded(smollm2_vocab):
    dfa = regex_to_dfa(json_schema_to_regex(SCHEMA, strict=True))
    expected = _lazy_rows(dfa, smollm2_vocab)
    partial = TokenIndex(dfa, smollm2_vocab, is_eager=True)  # never filled: as if mid-fill
    partial.row(dfa.start_state)
    state = partial.export_state()
    assert state["packed"] is None and list(state["lazy_rows"]) == [dfa.start_state]
    loaded = TokenIndex.from_state(dfa, smollm2_vocab, state)
    assert loaded.wait_indexed(timeout=60) and loaded.row_views is not None
    for s in range(dfa.num_states):
        assert np.array_equal(loaded.row(s), expected[s])


def test_a_lazy_index_queues_nothing(smollm2_vocab):
    grammar = compile_regex(
        r"[a-z]{1,8}@[a-z]{2,5}\.(com|org)", smollm2_vocab, cache=False, eager_max_states=0
    )
    assert not grammar.index.is_eager and grammar.index.wait_indexed(timeout=0)
    assert grammar.index.row_views is None and list(grammar.index.lazy_rows) == [
        grammar.start_state
    ]


class _Job:
    def __init__(self, name, log, gate=None):
        self.name, self.log, self.gate = name, log, gate
        self.started = threading.Event()

    def fill_ahead(self):
        self.started.set()
        if self.gate is not None:
            self.gate.wait(30)
        self.log.append(self.name)


def test_jobs_run_newest_first_and_dropped_ones_are_skipped():
    indexer = BackgroundIndexer()
    log: list[str] = []
    gate = threading.Event()
    blocker = _Job("blocker", log, gate)
    indexer.submit(blocker)  # holds the thread while the others queue up
    assert blocker.started.wait(30)
    kept = [_Job(f"job{k}", log) for k in range(3)]
    for job in kept:
        indexer.submit(job)
    dropped = _Job("dropped", log)
    indexer.submit(dropped)
    del dropped
    gc.collect()
    last = _Job("last", log, threading.Event())
    last.gate.set()
    done = threading.Event()

    class _Marker:
        def fill_ahead(self):
            done.set()

    marker = _Marker()
    indexer.submit(marker)  # newest: runs right after the blocker
    indexer.submit(last)
    gate.set()
    assert done.wait(30)
    for _ in range(300):
        if len(log) == 5:
            break
        threading.Event().wait(0.01)
    assert log == ["blocker", "last", "job2", "job1", "job0"]


def _held_indexer() -> tuple[BackgroundIndexer, list[str], threading.Event]:
    """An indexer whose thread is busy with a job ("blocker") until the returned gate is set."""
    indexer = BackgroundIndexer()
    log: list[str] = []
    gate = threading.Event()
    blocker = _Job("blocker", log, gate)
    indexer.submit(blocker)
    assert blocker.started.wait(30)
    return indexer, log, gate


def test_a_forked_child_restarts_the_thread_for_the_jobs_it_inherited():
    indexer, log, gate = _held_indexer()
    waiting = _Job("waiting", log)
    indexer.submit(waiting)
    old_thread = indexer._thread
    # what os.register_at_fork runs in a child: a fresh lock and thread for the live jobs
    indexer._after_fork_in_child()
    assert indexer._thread is not old_thread
    for _ in range(300):
        if log:
            break
        threading.Event().wait(0.01)
    assert log == ["waiting"]
    gate.set()


def test_the_thread_ends_when_the_stack_is_empty_and_a_new_job_starts_another():
    indexer, log, gate = _held_indexer()
    first_thread = indexer._thread
    assert not indexer.wait_idle(timeout=0.05)  # the blocker still runs
    gate.set()
    assert indexer.wait_idle(timeout=30)
    assert log == ["blocker"]
    assert indexer._thread is None and not first_thread.is_alive()
    again = _Job("again", log)
    indexer.submit(again)
    assert indexer.wait_idle(timeout=30)
    assert log == ["blocker", "again"]
    assert not any(t is indexer._last_thread and t.is_alive() for t in threading.enumerate())
