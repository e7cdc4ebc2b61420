"""``set_bit_ids`` (the ids of a packed row's set bits) and ``set_ids_among`` (those of
given ids) against numpy's unpacking."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.index.kernels import set_bit_ids, set_ids_among

words_lists = st.lists(
    st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2**31, 2**32 - 1])), max_size=64
)


@settings(max_examples=300, deadline=None)
@given(words_lists, st.sampled_from([np.uint32, np.int32]))
def test_set_bit_ids_match_unpacking(words, dtype):
    row = np.array(words, dtype=np.uint32).view(dtype)  # int32 rows: bit 31 is the sign bit
    expected = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
    found = set_bit_ids(row)
    assert found.dtype == np.int64
    assert found.tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(
    words_lists,
    st.sampled_from([np.uint32, np.int32]),
    st.lists(st.integers(0, 64 * 32 + 40), max_size=80),
)
def test_set_ids_among_match_unpacking(words, dtype, ids):
    row = np.array(words, dtype=np.uint32).view(dtype)
    is_set = np.unpackbits(row.view(np.uint8), bitorder="little").astype(bool)
    expected = [t for t in ids if t < len(is_set) and is_set[t]]  # ids past the row: unset
    found = set_ids_among(row, np.array(ids, dtype=np.int64))
    assert found.dtype == np.int64
    assert found.tolist() == expected
