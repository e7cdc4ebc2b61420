"""``kernels._sort_small`` (the subset construction's classes of a set, ascending) against
``sorted``, on both of its paths (insertion sort up to 16 values, numpy's above)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.kernels import _sort_small


@settings(deadline=None)  # (the first example may compile the kernel)
@given(st.lists(st.integers(0, 255), max_size=40), st.integers(0, 8))
def test_sort_small_sorts_the_prefix_only(values, extra):
    array = np.array(values + [999] * extra, dtype=np.int64)
    _sort_small(array, len(values))
    assert array[: len(values)].tolist() == sorted(values)
    assert array[len(values) :].tolist() == [999] * extra
