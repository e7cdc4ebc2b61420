"""ThreadGovernor: the pool follows the cores other work leaves free (fabricated and live load)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from formcast.engine.threads import (
    ThreadGovernor,
    affinity_cores,
    read_busy_seconds,
    threads_for_load,
)


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)


def _write_stat(path: Path, cores: list[int], busy_ticks: dict[int, int]) -> None:
    # /proc/stat: "cpuN user nice system idle iowait irq softirq steal guest guest_nice"
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    for core in cores:
        busy = busy_ticks.get(core, 0)
        lines.append(f"cpu{core} {busy} 0 0 1000000 7 0 0 0 0 0")
    lines.append("intr 0")
    path.write_text("\n".join(lines) + "\n")


def test_threads_for_load_takes_whole_cores_above_slack():
    assert threads_for_load(2, 0.0, 2) == 2
    assert threads_for_load(2, 0.2, 2) == 2  # noise
    assert threads_for_load(2, 0.3, 2) == 1  # a busy fraction of a core costs the core
    assert threads_for_load(2, 1.0, 2) == 1
    assert threads_for_load(2, 5.0, 2) == 1  # never below one
    assert threads_for_load(8, 2.6, 8) == 5
    assert threads_for_load(8, 0.0, 3) == 3  # the user's cap


def test_read_busy_seconds_sums_the_affinity_cores(tmp_path):
    stat = tmp_path / "stat"
    _write_stat(stat, [0, 1, 2], {0: 100, 1: 50, 2: 7})
    ticks = read_busy_seconds([0, 1], str(stat))
    from formcast.engine.threads import _CLOCK_TICKS

    assert ticks == pytest.approx(150 / _CLOCK_TICKS)
    assert read_busy_seconds([0, 5], str(stat)) is None  # a core missing: unknown
    assert read_busy_seconds([0], str(tmp_path / "absent")) is None


def test_governor_drops_and_restores_threads_with_fabricated_load(tmp_path):
    from formcast.engine.threads import _CLOCK_TICKS

    stat = tmp_path / "stat"
    cores = affinity_cores()
    _write_stat(stat, cores, {})
    governor = ThreadGovernor(interval_s=0.0, stat_path=str(stat))
    assert torch.get_num_threads() == len(cores)
    # another process keeps one core busy for the next interval
    time.sleep(0.05)
    wall = time.monotonic() - governor._last_wall
    _write_stat(stat, cores, {cores[0]: int(wall * _CLOCK_TICKS * 1.5) + 10})
    expected = max(1, len(cores) - 1) if len(cores) > 1 else 1
    assert governor.tick() == expected
    assert torch.get_num_threads() == expected
    # the machine is quiet again: back to every core
    time.sleep(0.05)
    _write_stat(stat, cores, {cores[0]: int(wall * _CLOCK_TICKS * 1.5) + 10})
    assert governor.tick() == len(cores)
    assert torch.get_num_threads() == len(cores)
    assert governor.num_changes == (2 if expected != len(cores) else 0)


def test_governor_fixed_pool_never_changes(tmp_path):
    stat = tmp_path / "stat"
    cores = affinity_cores()
    _write_stat(stat, cores, {})
    governor = ThreadGovernor(max_threads=1, is_adaptive=False, stat_path=str(stat))
    _write_stat(stat, cores, {c: 10**9 for c in cores})
    assert governor.tick() == 1
    assert torch.get_num_threads() == 1


@pytest.mark.skipif(len(affinity_cores()) < 2, reason="needs two cores")
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs /proc/stat")
def test_governor_gives_a_core_to_a_live_busy_process():
    cores = affinity_cores()
    governor = ThreadGovernor(interval_s=0.3)
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, time; os.sched_setaffinity(0, {{{cores[0]}}}); "
            "end = time.time() + 30\nwhile time.time() < end: pass",
        ]
    )
    try:
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.35)
            seen.append(governor.tick())
            if seen[-1] < len(cores):
                break
        assert seen[-1] <= len(cores) - 1, seen
    finally:
        busy.kill()
        busy.wait()
