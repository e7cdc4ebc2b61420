"""``caches.held_bytes``: the arrays a memo entry keeps alive, shared instances excluded even
where the entry also points into them directly."""

from __future__ import annotations

import numpy as np

from formcast.grammar.caches import held_bytes


class _Table:
    def __init__(self) -> None:
        self.rows = np.zeros(1000, dtype=np.int64)  # 8,000 bytes


class _Entry:
    def __init__(self, table: _Table) -> None:
        self.table = table
        self.own = np.zeros(10, dtype=np.int32)  # 40 bytes
        self.arguments = (table.rows, table.rows[10:20], (self.own[:5],))


def test_an_array_of_a_shared_instance_is_not_counted_where_the_entry_holds_it_directly():
    entry = _Entry(_Table())
    assert held_bytes(entry) == 8_040  # each array once, views as their base
    assert held_bytes(entry, shared=(_Table,)) == 40


def test_an_array_only_the_entry_holds_is_counted_beside_a_shared_instance():
    table = _Table()
    entry = _Entry(table)
    entry.copy = table.rows.copy()  # an array of its own, equal to the table's
    assert held_bytes(entry, shared=(_Table,)) == 8_040


def test_long_containers_are_entered_unless_they_hold_only_atoms():
    words = tuple(b"w%d" % k for k in range(1000))  # a vocabulary's byte strings: no arrays
    tail = np.zeros(3, dtype=np.int16)  # 6 bytes, after 1,000 atoms
    mixed = [*words, "text", 7, None, tail]
    assert held_bytes({"words": words}) == 0
    assert held_bytes({"mixed": mixed}) == 6
    holder = _Holder(tail[:2])  # hashable, so a set may hold it
    assert held_bytes({"set": frozenset([*range(100), holder])}) == 6


class _Holder:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array
