"""Server metrics through ``prometheus_client``, in one `CollectorRegistry` per app.

Names follow the ones vLLM users already scrape (``vllm:time_to_first_token_seconds``,
``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``...) with the prefix
``formcast:`` and the same suffixes, so existing dashboards and alerts carry over by changing
the prefix. Every series carries a ``model_name`` label (the served model name), as vLLM's do.

- gauges: ``num_requests_running``, ``num_requests_waiting``, ``kv_cache_usage_perc`` (0-1),
  ``kv_blocks_in_use``, ``kv_blocks_total``, ``num_grammar_compiles_running``;
- counters (exposed with ``_total``): ``prompt_tokens``, ``generation_tokens``,
  ``request_success`` (by ``finished_reason``: stop, length, abort), ``prefix_cache_queries``
  and ``prefix_cache_hits`` (prompt tokens looked up / found in the prefix cache, so
  ``hits / queries`` is the hit rate), ``num_preemptions``, ``grammar_compiles``,
  ``http_requests`` (by ``path`` and ``status``);
- histograms: ``time_to_first_token_seconds``, ``inter_token_latency_seconds``,
  ``request_time_per_output_token_seconds``, ``e2e_request_latency_seconds``,
  ``request_queue_time_seconds``, ``request_prefill_time_seconds``,
  ``request_decode_time_seconds``, ``request_inference_time_seconds``,
  ``request_prompt_tokens``, ``request_generation_tokens``, ``grammar_compile_seconds``.

Metrics are updated from the engine thread, the grammar threads and the event loop;
``prometheus_client`` makes each update thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

PREFIX = "formcast:"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# seconds: first token, end-to-end and phase times of a request
REQUEST_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0,
)  # fmt: skip
# seconds between tokens (one decode step, usually milliseconds)
TOKEN_TIME_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
    0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# seconds to compile one grammar
COMPILE_TIME_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class _WithoutCreated:
    """A view of a registry without the ``_created`` timestamp series.

    ``prometheus_client`` adds a ``<name>_created`` gauge beside every counter and histogram;
    vLLM-style dashboards never read them and they double the exposition, so scrapes leave them
    out (without the process-wide ``disable_created_metrics`` switch).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


def token_count_buckets(max_model_len: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... below ``max_model_len``, then ``max_model_len`` itself."""
    buckets: list[float] = []
    scale = 1
    while not buckets or buckets[-1] < max_model_len:
        buckets.extend(float(step * scale) for step in (1, 2, 5))
        scale *= 10
    return (*(b for b in buckets if b < max_model_len), float(max_model_len))


class ServerMetrics:
    """Every metric the server exports, in its own registry (names start with ``formcast:``).

    Parameters
    ----------
    model_name : str
        Value of the ``model_name`` label on every series.
    max_model_len : int
        Upper end of the per-request token-count histograms.
    registry : CollectorRegistry, optional
        Where to register; default a new registry (so several servers in one process, as in
        tests, never share or clash).

    The metric attributes (``time_to_first_token``, ``prompt_tokens``, ``requests_waiting``...)
    are ``prometheus_client`` metrics already bound to ``model_name``: call ``.inc()``,
    ``.set()`` or ``.observe()`` on them. The two metrics with more labels are updated
    through `count_http_request` and `count_finished`.
    """

    def __init__(
        self,
        model_name: str = "",
        max_model_len: int = 8192,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.model_name = model_name
        self.registry = registry if registry is not None else CollectorRegistry()
        self._exported = _WithoutCreated(self.registry)
        labels = ("model_name",)

        def counter(name: str, help_text: str) -> Counter:
            metric = Counter(PREFIX + name, help_text, labels, registry=self.registry)
            return metric.labels(model_name)

        def gauge(name: str, help_text: str) -> Gauge:
            metric = Gauge(PREFIX + name, help_text, labels, registry=self.registry)
            return metric.labels(model_name)

        def histogram(name: str, help_text: str, buckets: tuple[float, ...]) -> Histogram:
            metric = Histogram(
                PREFIX + name, help_text, labels, registry=self.registry, buckets=buckets
            )
            return metric.labels(model_name)

        # -- scheduler and cache state (gauges, set by the engine thread) ----------------------
        self.requests_running = gauge(
            "num_requests_running", "Sequences in the running batch (computed each step)."
        )
        self.requests_waiting = gauge(
            "num_requests_waiting", "Sequences queued for admission to the running batch."
        )
        self.kv_cache_usage = gauge(
            "kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1)."
        )
        self.kv_blocks_in_use = gauge(
            "kv_blocks_in_use", "KV cache blocks referenced by sequences."
        )
        self.kv_blocks_total = gauge("kv_blocks_total", "KV cache blocks.")
        self.grammar_compiles_running = gauge(
            "num_grammar_compiles_running", "Grammar compilations running in the grammar threads."
        )
        # -- counters -------------------------------------------------------------------------
        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens of finished requests.")
        self.generation_tokens = counter(
            "generation_tokens", "Tokens generated by finished requests (all completions)."
        )
        self.prefix_cache_queries = counter(
            "prefix_cache_queries", "Prompt tokens looked up in the prefix cache on admission."
        )
        self.prefix_cache_hits = counter(
            "prefix_cache_hits", "Prompt tokens found in the prefix cache on admission."
        )
        self.num_preemptions = counter(
            "num_preemptions", "Sequences preempted (blocks freed, recomputed later)."
        )
        self.grammar_compiles = counter(
            "grammar_compiles", "Grammar compilations run (cache misses)."
        )
        self._request_success = Counter(
            PREFIX + "request_success",
            "Engine requests finished, by the finish reason of their first completion.",
            ("model_name", "finished_reason"),
            registry=self.registry,
        )
        self._http_requests = Counter(
            PREFIX + "http_requests",
            "HTTP requests answered, by path and status.",
            ("model_name", "path", "status"),
            registry=self.registry,
        )
        # -- per-request histograms -----------------------------------------------------------
        self.time_to_first_token = histogram(
            "time_to_first_token_seconds",
            "Time from submission to the first generated token.",
            REQUEST_TIME_BUCKETS,
        )
        self.inter_token_latency = histogram(
            "inter_token_latency_seconds",
            "Time between consecutive outputs of a completion, per token.",
            TOKEN_TIME_BUCKETS,
        )
        self.time_per_output_token = histogram(
            "request_time_per_output_token_seconds",
            "Decode time of a request divided by its generated tokens after the first.",
            TOKEN_TIME_BUCKETS,
        )
        self.request_latency = histogram(
            "e2e_request_latency_seconds",
            "Time from submission to finish.",
            REQUEST_TIME_BUCKETS,
        )
        self.queue_time = histogram(
            "request_queue_time_seconds",
            "Time from submission to the first step that computed the request.",
            REQUEST_TIME_BUCKETS,
        )
        self.prefill_time = histogram(
            "request_prefill_time_seconds",
            "Time from the first step that computed the request to its first token.",
            REQUEST_TIME_BUCKETS,
        )
        self.decode_time = histogram(
            "request_decode_time_seconds",
            "Time from the first token to the finish.",
            REQUEST_TIME_BUCKETS,
        )
        self.inference_time = histogram(
            "request_inference_time_seconds",
            "Time from the first step that computed the request to its finish.",
            REQUEST_TIME_BUCKETS,
        )
        token_buckets = token_count_buckets(max_model_len)
        self.request_prompt_tokens = histogram(
            "request_prompt_tokens", "Prompt tokens per finished request.", token_buckets
        )
        self.request_generation_tokens = histogram(
            "request_generation_tokens",
            "Generated tokens per finished request (all completions).",
            token_buckets,
        )
        self.grammar_compile_time = histogram(
            "grammar_compile_seconds", "Wall time of one grammar compilation.", COMPILE_TIME_BUCKETS
        )

    def count_http_request(self, path: str, status: int | str) -> None:
        """Count one answered HTTP request."""
        self._http_requests.labels(self.model_name, path, str(status)).inc()

    def count_finished(self, finish_reason: str) -> None:
        """Count one finished engine request by the finish reason of its first completion."""
        self._request_success.labels(self.model_name, finish_reason).inc()

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of every metric.

        Always this format, whatever the scraper's ``Accept`` asks: ``prometheus_client``'s
        OpenMetrics writer escapes the ``:`` of sample names to ``_`` (but not of the
        ``# HELP`` / ``# TYPE`` names) unless the scraper allows UTF-8 names, which would
        break the ``formcast:`` names; every Prometheus reads format 0.0.4.
        """
        return generate_latest(self._exported).decode()
