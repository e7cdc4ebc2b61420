"""Raw HTTP and Prometheus-text helpers for the server tests (stdlib, prometheus_client parser)."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

MODEL = "smollm2-135m"


def post(server: Any, path: str, body: bytes | dict, timeout: float = 120) -> tuple[int, Any]:
    """POST ``body`` (a dict is sent as JSON); return (status, decoded JSON body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def get(server: Any, path: str) -> tuple[int, str, str]:
    """GET ``path``; return (status, content type, text)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("content-type"), response.read().decode()
    finally:
        conn.close()


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples of a Prometheus text exposition, parsed by ``prometheus_client``'s parser.

    Keys are ``(sample name, sorted label pairs)``. Checks: every family is a counter, gauge
    or histogram; histogram buckets are cumulative per series and end with ``le="+Inf"``
    equal to ``_count``; no ``_created`` series.
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        assert family.type in ("counter", "gauge", "histogram"), (family.name, family.type)
        buckets: dict[tuple, list[tuple[float, float]]] = {}
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name
            labels = tuple(sorted(sample.labels.items()))
            samples[(sample.name, labels)] = sample.value
            if sample.name.endswith("_bucket"):
                series = tuple(pair for pair in labels if pair[0] != "le")
                buckets.setdefault(series, []).append((float(sample.labels["le"]), sample.value))
        for series, bounds in buckets.items():
            counts = [count for _, count in bounds]
            assert counts == sorted(counts), f"{family.name} buckets are not cumulative"
            assert bounds[-1][0] == float("inf")
            assert bounds[-1][1] == samples[(family.name + "_count", series)]
    return samples


def metric(samples: dict, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels`` (0 if none)."""
    wanted = set(labels.items())
    return sum(
        value
        for (sample_name, sample_labels), value in samples.items()
        if sample_name == name and wanted <= set(sample_labels)
    )


def wait_until(condition: Any, timeout: float = 30.0) -> bool:
    """Poll ``condition()`` until true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def is_server_quiet(server: Any) -> bool:
    """No engine request, KV block, grammar compile or gate count left in a ``BackgroundServer``."""
    engine, gate = server.engine, server.gate
    block_manager = engine.llm.block_manager
    return (
        engine.num_active == 0
        and engine.num_unfinished == 0
        and not engine.llm.requests
        and block_manager.num_free_blocks == block_manager.num_blocks
        and engine.num_grammar_compiles_running == 0
        and gate.num_in_flight == 0
        and gate.num_admitting == 0
    )
