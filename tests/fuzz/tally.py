"""Counting what a fuzzer tried and what came of it, reported as one ``FUZZ {...}`` JSON line.

`FuzzTally` counts inputs by outcome (``ok``, a typed error by class name, ``crash``) and,
apart, the extra checks made on them (outputs validated by an oracle, ...); a fuzz test
records every example, checks ``crashes == 0`` and its leak checks, and `report` prints the
counts (``pytest -s`` shows them) for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings

from formcast.errors import FormcastError


def fuzz_settings(max_examples: int) -> settings:
    """Hypothesis settings of a fuzz test: reproducible, no example database, no deadline.

    ``FORMCAST_FUZZ_SCALE=k`` runs ``k`` times the examples; ``FORMCAST_FUZZ_RANDOM=1`` draws
    fresh examples instead of the derandomized ones (for a longer campaign by hand; CI runs
    neither).
    """
    scale = float(os.environ.get("FORMCAST_FUZZ_SCALE", "1"))
    return settings(
        max_examples=max(1, round(max_examples * scale)),
        derandomize=not os.environ.get("FORMCAST_FUZZ_RANDOM"),
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def is_typed_input_error(exc: BaseException) -> bool:
    """True for what bad input may raise: a `FormcastError` that is also a `ValueError`."""
    return isinstance(exc, FormcastError) and isinstance(exc, ValueError)


@dataclass
class FuzzTally:
    """Outcome counts of one fuzz test.

    Parameters
    ----------
    name : str
        The fuzzer's name in the report.
    """

    name: str
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    checks: collections.Counter = field(default_factory=collections.Counter)
    crashes: list[str] = field(default_factory=list)
    num_leaks: int = 0
    max_seconds: float = 0.0
    began: float = field(default_factory=time.monotonic)

    @property
    def num_tried(self) -> int:
        """Inputs tried so far (every recorded outcome)."""
        return sum(self.outcomes.values())

    def record(self, outcome: str, seconds: float = 0.0) -> None:
        """Count one input's ``outcome`` (``"ok"``, an error class name, ...)."""
        self.outcomes[outcome] += 1
        self.max_seconds = max(self.max_seconds, seconds)

    def crash(self, what: str) -> None:
        """Count one crash; ``what`` describes the input and the failure."""
        self.outcomes["crash"] += 1
        self.crashes.append(what)

    def report(self, **extra: Any) -> dict[str, Any]:
        """Print the ``FUZZ {...}`` line and return its content."""
        line = {
            "fuzzer": self.name,
            "inputs_tried": self.num_tried,
            "outcomes": dict(sorted(self.outcomes.items())),
            "checks": dict(sorted(self.checks.items())),
            "crashes": len(self.crashes),
            "leaks": self.num_leaks,
            "max_seconds_per_input": round(self.max_seconds, 2),
            "seconds": round(time.monotonic() - self.began, 1),
            **extra,
        }
        print("FUZZ " + json.dumps(line, ensure_ascii=False), flush=True)
        return line


@dataclass(frozen=True)
class ProcessSnapshot:
    """Process resources a compile could leak: threads, open file descriptors, the recursion
    limit (the deep-compile path raises it while it runs)."""

    thread_names: tuple[str, ...]
    num_fds: int
    recursion_limit: int

    @classmethod
    def take(cls) -> ProcessSnapshot:
        import sys

        from formcast.grammar.index.background_indexer import BACKGROUND_INDEXER

        # masks built ahead of use are not a leak: wait for the indexer thread to run out of jobs
        # (it ends then); a thread still running after that is reported
        BACKGROUND_INDEXER.wait_idle(timeout=120)
        names = tuple(sorted(thread.name for thread in threading.enumerate()))
        return cls(names, len(os.listdir("/proc/self/fd")), sys.getrecursionlimit())

    def leaks_since(self, before: ProcessSnapshot) -> list[str]:
        """What grew or changed since ``before``, in words (empty if nothing)."""
        leaks = []
        new_threads = collections.Counter(self.thread_names) - collections.Counter(
            before.thread_names
        )
        if new_threads:
            leaks.append(f"threads left running: {dict(new_threads)}")
        if self.num_fds > before.num_fds:
            leaks.append(f"file descriptors: {before.num_fds} -> {self.num_fds}")
        if self.recursion_limit != before.recursion_limit:
            leaks.append(f"recursion limit {before.recursion_limit} -> {self.recursion_limit}")
        return leaks
