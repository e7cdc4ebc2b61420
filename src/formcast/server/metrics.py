"""Server metrics in the Prometheus text exposition format (version 0.0.4), written by hand.

Counters, gauges and histograms are updated from the engine thread, the grammar threads and
the event loop, so every update takes one lock. Histograms keep cumulative ``_bucket``
counts with ``le`` labels ending in ``+Inf``, plus ``_sum`` and ``_count``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
    0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

Labels = tuple[tuple[str, str], ...]


def _format_labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _escape(value: str) -> str:
    """A label value escaped as the format requires (backslash, newline, double quote)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, lock: threading.Lock) -> None:
        self.name = name
        self.help_text = help_text
        self._lock = lock

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help_text}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    """A monotonically increasing value per label set."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, lock: threading.Lock) -> None:
        super().__init__(name, help_text, lock)
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` (>= 0) to the series of ``labels``."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """Current value of one series (0 if never incremented)."""
        return self.values.get(tuple(sorted(labels.items())), 0.0)

    def header(self) -> list[str]:
        name = self.name + "_total"
        return [f"# HELP {name} {self.help_text}", f"# TYPE {name} counter"]

    def lines(self) -> list[str]:
        out = self.header()
        for labels, value in sorted(self.values.items()) or [((), 0.0)]:
            out.append(f"{self.name}_total{_format_labels(labels)} {_format_value(value)}")
        return out


class Gauge(_Metric):
    """A value that goes up and down (set from a snapshot)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, lock: threading.Lock) -> None:
        super().__init__(name, help_text, lock)
        self.current = 0.0

    def set(self, value: float) -> None:
        """Set the value."""
        self.current = float(value)

    def lines(self) -> list[str]:
        return self.header() + [f"{self.name} {_format_value(self.current)}"]


class Histogram(_Metric):
    """Observations counted into cumulative buckets."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        lock: threading.Lock,
        buckets: Iterable[float] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help_text, lock)
        self.buckets = tuple(sorted(buckets))
        self.counts = [0] * (len(self.buckets) + 1)  # last: above every bound (+Inf only)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Count one observation."""
        index = next((i for i, b in enumerate(self.buckets) if value <= b), len(self.buckets))
        with self._lock:
            self.counts[index] += 1
            self.total += value
            self.count += 1

    def lines(self) -> list[str]:
        out = self.header()
        cumulative = 0
        for bound, count in zip((*self.buckets, math.inf), self.counts, strict=True):
            cumulative += count
            le = (("le", _format_value(bound)),)
            out.append(f"{self.name}_bucket{_format_labels((), le)} {cumulative}")
        out.append(f"{self.name}_sum {_format_value(self.total)}")
        out.append(f"{self.name}_count {self.count}")
        return out


class ServerMetrics:
    """Every metric the server exports (names start with ``formcast_``)."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self.http_requests = Counter(
            "formcast_http_requests", "HTTP requests answered, by path and status.", lock
        )
        self.requests_finished = Counter(
            "formcast_requests_finished",
            "Engine requests finished, by finish reason of their first completion.",
            lock,
        )
        self.prompt_tokens = Counter("formcast_prompt_tokens", "Prompt tokens processed.", lock)
        self.generation_tokens = Counter(
            "formcast_generation_tokens", "Tokens generated (all completions).", lock
        )
        self.grammar_compiles = Counter(
            "formcast_grammar_compiles", "Grammar compilations run (cache misses).", lock
        )
        self.time_to_first_token = Histogram(
            "formcast_time_to_first_token_seconds",
            "Time from request arrival to its first generated token.",
            lock,
        )
        self.inter_token_latency = Histogram(
            "formcast_inter_token_latency_seconds",
            "Time between consecutive outputs of a completion, per token.",
            lock,
        )
        self.request_latency = Histogram(
            "formcast_e2e_request_latency_seconds", "Time from arrival to finish.", lock
        )
        self.grammar_compile_time = Histogram(
            "formcast_grammar_compile_seconds", "Wall time of one grammar compilation.", lock
        )
        self.requests_running = Gauge(
            "formcast_num_requests_running", "Sequences in the running batch.", lock
        )
        self.requests_waiting = Gauge(
            "formcast_num_requests_waiting", "Sequences queued for admission.", lock
        )
        self.kv_blocks_in_use = Gauge(
            "formcast_kv_blocks_in_use", "KV cache blocks referenced by sequences.", lock
        )
        self.kv_blocks_total = Gauge("formcast_kv_blocks_total", "KV cache blocks.", lock)

    def all(self) -> list[_Metric]:
        """Every metric, in exposition order."""
        return [value for value in vars(self).values() if isinstance(value, _Metric)]

    def render(self) -> str:
        """The exposition text."""
        lines: list[str] = []
        for metric in self.all():
            lines.extend(metric.lines())
        return "\n".join(lines) + "\n"
