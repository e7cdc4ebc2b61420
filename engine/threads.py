"""ThreadGovernor: size the forward pass's torch (OpenMP) thread pool to the cores left free.

An OpenMP parallel region ends at a barrier that waits for every thread of the pool. When
another process (or another thread of ours: a grammar compile, the server's event loop) holds
one of the cores, the pool thread scheduled behind it stalls every region of the step, and a
decode step runs ~1,000 regions (one per matmul, norm, ...). Measured on a 2-core machine with
one core busy: batch 1 fell from ~20 to 1.2-3 tok/s with two threads, and ran at ~18 tok/s
with one (benchmarks/RESULTS.md, "Threads that do not fight").

The governor reads how busy the cores we may run on were since its last look, subtracts our
own process's CPU time, and runs the pool on the cores the others left:

    others = (busy_jiffies(affinity cores) / HZ - our_cpu_seconds) / wall_seconds   (in cores)
    num_threads = clamp(num_cores - ceil(others - SLACK), 1, max_threads)

``SLACK`` (a quarter core) tolerates the background noise of an idle machine; anything above
it takes a whole core away, since a pool thread sharing a core costs far more than a missing
thread. It looks at most every ``interval_s`` (a ``/proc/stat`` read, ~20 us), so its cost per
step is negligible; between looks the thread count is fixed. Without ``/proc/stat`` (not
Linux) the pool keeps ``max_threads``.
"""

from __future__ import annotations

import math
import os
import time

import torch

SLACK_CORES = 0.25  # others' load below this is noise, above it costs a core
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def affinity_cores() -> list[int]:
    """The CPU ids this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def read_busy_seconds(cores: list[int], stat_path: str = "/proc/stat") -> float | None:
    """CPU-seconds the given cores spent busy since boot (all processes), or None if unknown.

    Busy = user + nice + system + irq + softirq + steal (``/proc/stat`` per-CPU lines, in
    clock ticks); idle and iowait are not busy.
    """
    wanted = {f"cpu{core}" for core in cores}
    busy_ticks = 0
    found = 0
    try:
        with open(stat_path, encoding="ascii") as handle:
            for line in handle:
                if not line.startswith("cpu"):
                    break
                fields = line.split()
                if fields[0] not in wanted:
                    continue
                values = [int(v) for v in fields[1:9]]
                # user nice system idle iowait irq softirq steal
                busy_ticks += sum(values) - values[3] - values[4]
                found += 1
    except OSError:
        return None
    if found != len(wanted):
        return None
    return busy_ticks / _CLOCK_TICKS


def threads_for_load(num_cores: int, others_cores: float, max_threads: int) -> int:
    """Pool size when other work keeps ``others_cores`` cores busy (see the module formula)."""
    taken = max(0, math.ceil(others_cores - SLACK_CORES))
    return max(1, min(max_threads, num_cores - taken))


class ThreadGovernor:
    """Keeps ``torch.get_num_threads()`` at the number of cores the rest of the machine left.

    Parameters
    ----------
    max_threads : int or None
        Upper bound of the pool; None: every core this process may run on.
    is_adaptive : bool
        Follow the machine's load (True) or keep ``max_threads`` fixed (False).
    interval_s : float
        Least time between two looks at the load.
    stat_path : str
        Where the per-CPU busy counters are read (``/proc/stat`` format).
    """

    def __init__(
        self,
        max_threads: int | None = None,
        is_adaptive: bool = True,
        interval_s: float = 0.5,
        stat_path: str = "/proc/stat",
    ) -> None:
        self.cores = affinity_cores()
        self.max_threads = max_threads if max_threads is not None else len(self.cores)
        self.is_adaptive = is_adaptive
        self.interval_s = interval_s
        self.stat_path = stat_path
        self.num_threads = self.max_threads
        self.num_changes = 0
        torch.set_num_threads(self.num_threads)
        self._last_wall = time.monotonic()
        self._last_busy = read_busy_seconds(self.cores, self.stat_path)
        self._last_ours = _own_cpu_seconds()

    def tick(self) -> int:
        """Called once per step: re-reads the load when ``interval_s`` has passed; returns the
        pool size in force."""
        if not self.is_adaptive or self._last_busy is None:
            return self.num_threads
        now = time.monotonic()
        wall = now - self._last_wall
        if wall < self.interval_s:
            return self.num_threads
        busy = read_busy_seconds(self.cores, self.stat_path)
        ours = _own_cpu_seconds()
        if busy is None:
            return self.num_threads
        others = max(0.0, (busy - self._last_busy) - (ours - self._last_ours)) / wall
        self._last_wall, self._last_busy, self._last_ours = now, busy, ours
        wanted = threads_for_load(len(self.cores), others, self.max_threads)
        if wanted != self.num_threads:
            torch.set_num_threads(wanted)
            self.num_threads = wanted
            self.num_changes += 1
        return self.num_threads


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system
