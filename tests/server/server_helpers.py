"""Raw HTTP and Prometheus-text helpers for the server tests (stdlib only)."""

from __future__ import annotations

import http.client
import json
import re
import time
from typing import Any

MODEL = "smollm2-135m"

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


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
    """Samples of a Prometheus text exposition; asserts every line is well-formed.

    Checks: ``# HELP`` / ``# TYPE`` lines precede their samples, sample names belong to the
    declared metric (``_bucket``/``_sum``/``_count`` for histograms), histogram buckets are
    cumulative and end with ``le="+Inf"`` equal to ``_count``.
    """
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    types: dict[str, str] = {}
    current = None
    assert text.endswith("\n")
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("# HELP "):
            current = line.split(" ")[2]
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name == current and kind in ("counter", "gauge", "histogram"), line
            types[name] = kind
            continue
        match = _SAMPLE.match(line)
        assert match, f"malformed sample line {line!r}"
        name = match["name"]
        allowed = {current}
        if types.get(current) == "histogram":
            allowed = {current + "_bucket", current + "_sum", current + "_count"}
        assert name in allowed, f"sample {name} outside its metric {current}"
        labels = tuple(_LABEL.findall(match["labels"] or ""))
        samples[(name, labels)] = float(match["value"])
    for name, kind in types.items():
        if kind != "histogram":
            continue
        buckets = [(labels, v) for (n, labels), v in samples.items() if n == name + "_bucket"]
        counts = [v for _, v in buckets]
        assert counts == sorted(counts), f"{name} buckets are not cumulative"
        assert buckets[-1][0] == (("le", "+Inf"),)
        assert buckets[-1][1] == samples[(name + "_count", ())]
    return samples


def metric(samples: dict, name: str, **labels: str) -> float:
    """One sample's value (0 when absent)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_until(condition: Any, timeout: float = 30.0) -> bool:
    """Poll ``condition()`` until true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
