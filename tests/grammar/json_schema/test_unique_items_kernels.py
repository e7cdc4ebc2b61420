"""The uniqueItems check's candidate filters (``long_enough``, ``split_by_end``) against the
numpy expressions they replace."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.json_schema.unique_items import long_enough, split_by_end


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_long_enough_matches_numpy(data):
    lengths = np.array(data.draw(st.lists(st.integers(0, 8), max_size=40)), dtype=np.int32)
    ids = sorted(data.draw(st.sets(st.integers(0, 50), max_size=30)))
    token_ids = np.array(ids, dtype=np.int64)
    min_length = data.draw(st.integers(0, 9))
    kept = token_ids[token_ids < len(lengths)]
    expected = kept[lengths[kept] >= min_length]
    assert long_enough(token_ids, lengths, min_length).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_split_by_end_matches_numpy(data):
    num_states = data.draw(st.integers(1, 6))
    vocab_size = data.draw(st.integers(1, 40))
    ends = np.array(data.draw(st.lists(st.integers(-1, num_states - 1), min_size=vocab_size,
                                       max_size=vocab_size)), dtype=np.int64)  # fmt: skip
    is_alive = np.array(data.draw(st.lists(st.booleans(), min_size=num_states,
                                           max_size=num_states)), dtype=bool)  # fmt: skip
    token_ids = np.array(sorted(data.draw(st.sets(st.integers(0, vocab_size - 1)))), np.int64)
    # the expressions _forbidden_items used before (is_alive: ItemAutomaton.is_alive_fast's)
    token_ends = ends[token_ids]
    inside = token_ends >= 0
    inside_ends = token_ends[inside]
    is_undecided = ~is_alive[inside_ends]
    found = split_by_end(token_ids, ends, is_alive)
    assert found[0].tolist() == token_ids[inside][is_undecided].tolist()
    assert found[1].tolist() == inside_ends[is_undecided].tolist()
    assert found[2].tolist() == token_ids[~inside].tolist()
