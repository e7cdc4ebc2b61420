"""``Member``: the keys that must and may come before a declared property, built on first use.

Oracle: the sets written out from the declared list (the required / all names before the
member in schema order; under any order none required and every other name allowed),
compared after construction, after pickling, and through equality and hashing.
"""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from formcast.grammar.json_schema.unique_plan import Member

DECLARED = st.lists(
    st.tuples(st.sampled_from("abcdefgh"), st.just({}), st.booleans()),
    min_size=1,
    max_size=8,
    unique_by=lambda member: member[0],
)


@given(declared=DECLARED, data=st.data())
def test_key_sets_are_those_declared_before(declared, data):
    index = data.draw(st.integers(0, len(declared) - 1))
    any_order = data.draw(st.booleans())
    name = declared[index][0]
    if any_order:
        required = frozenset()
        allowed = frozenset(n for n, _, _ in declared if n != name)
    else:
        required = frozenset(n for n, _, is_req in declared[:index] if is_req)
        allowed = frozenset(n for n, _, _ in declared[:index])
    fresh = Member(declared, index, any_order)
    assert fresh.name == name
    # pickled before its sets were built: they are built for the pickle
    copy = pickle.loads(pickle.dumps(Member(declared, index, any_order)))
    for member in (fresh, copy):
        assert (member.required, member.allowed) == (required, allowed)
    assert fresh == copy and hash(fresh) == hash(copy)
    # another object's member of the same name is equal iff its key sets are
    other = Member([(name, {}, False)], 0)
    assert (other == fresh) == (required == frozenset() and allowed == frozenset())
