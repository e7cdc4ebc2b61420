"""``gc_paused``: the collector is off inside (nested pauses too), back on after the outermost
one, and what the pause let pile up in the young generation is collected when it ends (so the
scans of a compile's objects do not fall on the first masks)."""

from __future__ import annotations

import gc

from formcast.grammar.automata.budget import gc_paused


def test_nested_pauses_restore_the_collector_once():
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner end does not resume it
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_the_young_generation_is_collected_when_the_pause_ends():
    gc.enable()
    with gc_paused():
        kept = [[k] for k in range(20 * gc.get_threshold()[0])]  # tracked, and they survive
        assert gc.get_count()[0] > gc.get_threshold()[0]
    assert gc.get_count()[0] <= gc.get_threshold()[0]
    assert gc.get_count()[1] == 0  # moved past generation 1, not left for its next scan
    assert len(kept) > 0
