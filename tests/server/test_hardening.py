"""Server hardening: body size limit (413), waiting-queue limit (429), stalled-engine health,
graceful drain on shutdown, and /metrics through prometheus_client.

Most tests share one small server (``limited``) whose engine comes from `gated_engine`: a
test-only subclass whose steps wait on an event the test holds, so a "stalled" or "busy" engine is a
real engine thread blocked inside a real step, not a mocked status. The drain test runs its
own server, since it shuts it down.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time

import openai
import pytest
from server_helpers import MODEL, get, metric, parse_metrics, post, wait_until

CHAT = "/v1/chat/completions"
JSON = {"Content-Type": "application/json"}
WORDS = "[a-z ]{1,300}"
MAX_BODY_BYTES = 8192
MAX_WAITING = 2
STALL_TIMEOUT_S = 1.0


def gated_engine(step_delay_s: float = 0.0, **engine_config):
    """An AsyncEngine (test-only subclass) whose steps run only while its ``gate`` event is
    set, each after ``step_delay_s`` seconds (a slower model: request lengths in steps stay
    apart from a drain timeout in seconds however fast or busy the machine is). ``is_held``
    is set while a step waits at the closed gate."""
    from formcast.engine.llm_engine import LLM
    from formcast.server import AsyncEngine

    class GatedEngine(AsyncEngine):
        def __init__(self, llm):
            super().__init__(llm)
            self.gate = threading.Event()
            self.gate.set()
            self.is_held = threading.Event()

        def _step(self, events):
            if not self.gate.is_set():
                self.is_held.set()
                self.gate.wait()
                self.is_held.clear()
            time.sleep(step_delay_s)
            super()._step(events)

    return GatedEngine(LLM(MODEL, **engine_config))


@pytest.fixture(scope="module")
def limited():
    from formcast.server import BackgroundServer, ServerLimits

    engine = gated_engine(max_num_seqs=4, max_model_len=512, num_kv_blocks=128)
    limits = ServerLimits(
        max_body_bytes=MAX_BODY_BYTES,
        max_waiting_requests=MAX_WAITING,
        drain_timeout_s=5.0,
        stall_timeout_s=STALL_TIMEOUT_S,
    )
    with BackgroundServer(engine, MODEL, limits=limits) as running:
        yield running
        running.engine.gate.set()  # never leave a test's closed gate behind


def _chat(**fields):
    messages = [{"role": "user", "content": "Count from one to ten."}]
    return {"model": MODEL, "messages": messages, "max_tokens": 4, **fields}


def _error(body, status, expected_status, code=None, error_type=None):
    assert status == expected_status, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code
    if error_type is not None:
        assert error["type"] == error_type
    return error


def _read_response(sock: socket.socket) -> tuple[int, str | None, bytes]:
    """(status, content type, body) of the HTTP response read from ``sock``."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.getheader("Content-Type"), response.read()


class _Background:
    """A blocking call run in a thread; ``result()`` re-raises its exception."""

    def __init__(self, call, *args, **kwargs):
        self.value = self.error = None
        self.thread = threading.Thread(target=self._run, args=(call, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, call, args, kwargs):
        try:
            self.value = call(*args, **kwargs)
        except BaseException as exc:  # handed to the test thread by result()
            self.error = exc

    def result(self, timeout: float = 120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the background call did not finish"
        if self.error is not None:
            raise self.error
        return self.value


# -- body size ----------------------------------------------------------------------------------


def test_declared_body_over_limit_is_413_before_the_body_is_read(limited):
    sock = socket.create_connection((limited.host, limited.port), timeout=30)
    try:
        head = (
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {10 * MAX_BODY_BYTES}\r\n\r\n"
        )
        sock.sendall(head.encode())  # no body: the answer must come without it
        status, content_type, raw = _read_response(sock)
    finally:
        sock.close()
    error = _error(json.loads(raw), status, 413, "request_too_large", "invalid_request_error")
    assert f"Content-Length is {10 * MAX_BODY_BYTES} bytes" in error["message"]
    assert str(MAX_BODY_BYTES) in error["message"]
    assert content_type == "application/json"


def test_sent_body_over_limit_is_413(limited):
    """A whole oversized body sent with its length: refused, and the client reads the 413
    (the server discards the rest of the body instead of resetting the connection)."""
    body = _chat(messages=[{"role": "user", "content": "x" * (2 * MAX_BODY_BYTES)}])
    status, reply = post(limited, CHAT, body)
    _error(reply, status, 413, "request_too_large")


def test_chunked_body_over_limit_is_413(limited):
    """No Content-Length to trust: the limit holds on the bytes as they arrive."""
    pieces = [b'{"model": "smollm2-135m", "messages": [{"role": "user", "content": "']
    pieces += [b"y" * 1024] * (3 * MAX_BODY_BYTES // 1024)
    pieces += [b'"}]}']
    conn = http.client.HTTPConnection(limited.host, limited.port, timeout=60)
    try:
        conn.request("POST", CHAT, iter(pieces), JSON)
        response = conn.getresponse()
        status, raw = response.status, response.read()
    finally:
        conn.close()
    error = _error(json.loads(raw), status, 413, "request_too_large")
    assert f"more than {MAX_BODY_BYTES} bytes were sent" in error["message"]


def test_chunked_body_within_limit_is_served(limited):
    data = json.dumps(_chat()).encode()
    conn = http.client.HTTPConnection(limited.host, limited.port, timeout=120)
    try:
        conn.request("POST", CHAT, iter([data[:10], data[10:]]), JSON)
        response = conn.getresponse()
        status, reply = response.status, json.loads(response.read())
    finally:
        conn.close()
    assert status == 200 and reply["choices"][0]["finish_reason"] in ("stop", "length")


def test_short_content_length_cannot_smuggle_a_longer_body(limited):
    """A Content-Length below the limit with a longer body behind it: the app sees only the
    declared bytes (a truncated JSON: 400), the rest is not read as this request's body."""
    data = json.dumps(_chat(messages=[{"role": "user", "content": "z" * 20000}])).encode()
    sock = socket.create_connection((limited.host, limited.port), timeout=60)
    try:
        head = (
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: 4000\r\n\r\n"
        )
        sock.sendall(head.encode() + data)
        status, _, raw = _read_response(sock)
    finally:
        sock.close()
    error = _error(json.loads(raw), status, 400, error_type="invalid_request_error")
    assert "parse the JSON body" in error["message"]
    assert get(limited, "/health")[0] == 200


# -- waiting queue ------------------------------------------------------------------------------


def test_full_waiting_queue_is_429_before_any_engine_work(limited):
    engine, gate = limited.engine, limited.gate
    llm = engine.llm
    choices = ["alpha-429", "beta-429"]  # a grammar never compiled before
    engine.gate.clear()
    try:
        waiting = [_Background(post, limited, CHAT, _chat())]
        assert wait_until(engine.is_held.is_set)  # the first one is inside a held step
        waiting.append(_Background(post, limited, CHAT, _chat()))
        assert wait_until(lambda: gate.num_waiting >= MAX_WAITING)
        before = parse_metrics(get(limited, "/metrics")[2])
        num_engine_requests = len(llm.requests)

        conn = http.client.HTTPConnection(limited.host, limited.port, timeout=30)
        conn.request("POST", CHAT, json.dumps(_chat(choice=choices)), JSON)
        response = conn.getresponse()
        status, retry_after, reply = (
            response.status,
            response.getheader("Retry-After"),
            json.loads(response.read()),
        )
        conn.close()
        error = _error(reply, status, 429, "rate_limit_exceeded", "requests")
        assert retry_after == "1" and "retry after 1 s" in error["message"]
        assert f"(limit {MAX_WAITING})" in error["message"]
        client = openai.OpenAI(base_url=limited.base_url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model=MODEL, messages=_chat()["messages"], stream=True)

        after = parse_metrics(get(limited, "/metrics")[2])
        assert len(llm.requests) == num_engine_requests  # nothing reached the engine
        compiles = "formcast:grammar_compiles_total"
        assert metric(after, compiles) == metric(before, compiles)  # nor the grammar threads
        rejected = "formcast:http_requests_total"
        assert (
            metric(after, rejected, path=CHAT, status="429")
            - metric(before, rejected, path=CHAT, status="429")
            == 2
        )
    finally:
        engine.gate.set()
    for call in waiting:  # the admitted ones are served once the engine moves again
        status, reply = call.result()
        assert status == 200 and reply["choices"][0]["finish_reason"] in ("stop", "length")
    assert wait_until(lambda: gate.num_waiting == 0 and gate.num_in_flight == 0)
    status, reply = post(limited, CHAT, _chat(choice=choices, max_tokens=16))
    assert status == 200 and reply["choices"][0]["message"]["content"] in choices


# -- stalled engine -----------------------------------------------------------------------------


def test_health_reports_a_stalled_engine(limited):
    engine = limited.engine
    assert get(limited, "/health")[0] == 200  # idle for a long time is not a stall
    engine.gate.clear()
    try:
        held = _Background(post, limited, CHAT, _chat())
        assert wait_until(engine.is_held.is_set)
        assert wait_until(lambda: (engine.busy_seconds or 0.0) > STALL_TIMEOUT_S + 0.2)
        status, content_type, text = get(limited, "/health")
        error = _error(json.loads(text), status, 503, "engine_stalled", "server_error")
        assert error["message"].startswith("the engine is stalled: its current step has run for")
        assert (
            f"(stall timeout {STALL_TIMEOUT_S:g} s) with 1 requests in flight" in error["message"]
        )
        seconds = float(error["message"].split("run for ")[1].split(" s ")[0])
        assert seconds > STALL_TIMEOUT_S
    finally:
        engine.gate.set()
    status, reply = held.result()
    assert status == 200
    assert wait_until(lambda: get(limited, "/health")[0] == 200)


def test_draining_gate_refuses_generation_and_fails_health(limited):
    """While the gate drains: 503 for new generation requests (before any engine work) and
    for /health, so a load balancer stops sending; models and metrics still answer."""
    gate = limited.gate
    gate.is_draining = True
    try:
        status, reply = post(limited, CHAT, _chat())
        error = _error(reply, status, 503, error_type="server_error")
        assert "shutting down" in error["message"]
        status, _, text = get(limited, "/health")
        assert status == 503 and "shutting down" in json.loads(text)["error"]["message"]
        assert get(limited, "/v1/models")[0] == 200 and get(limited, "/metrics")[0] == 200
    finally:
        gate.is_draining = False
    assert gate.num_in_flight == 0


# -- /metrics -----------------------------------------------------------------------------------


def _families(server):
    from prometheus_client.parser import text_string_to_metric_families

    status, content_type, text = get(server, "/metrics")
    assert status == 200 and content_type == "text/plain; version=0.0.4; charset=utf-8"
    return {family.name: family for family in text_string_to_metric_families(text)}, text


VLLM_STYLE_FAMILIES = {
    "formcast:time_to_first_token_seconds": "histogram",
    "formcast:inter_token_latency_seconds": "histogram",
    "formcast:request_time_per_output_token_seconds": "histogram",
    "formcast:e2e_request_latency_seconds": "histogram",
    "formcast:request_queue_time_seconds": "histogram",
    "formcast:request_prefill_time_seconds": "histogram",
    "formcast:request_decode_time_seconds": "histogram",
    "formcast:request_inference_time_seconds": "histogram",
    "formcast:request_prompt_tokens": "histogram",
    "formcast:request_generation_tokens": "histogram",
    "formcast:num_requests_running": "gauge",
    "formcast:num_requests_waiting": "gauge",
    "formcast:kv_cache_usage_perc": "gauge",
    "formcast:prefix_cache_queries": "counter",
    "formcast:prefix_cache_hits": "counter",
    "formcast:prompt_tokens": "counter",
    "formcast:generation_tokens": "counter",
    "formcast:request_success": "counter",
    "formcast:num_preemptions": "counter",
    "formcast:grammar_compile_seconds": "histogram",
    "formcast:grammar_compiles": "counter",
    "formcast:http_requests": "counter",
}


def test_metrics_names_types_and_values_move(limited):
    families, _ = _families(limited)
    for name, kind in VLLM_STYLE_FAMILIES.items():
        assert families[name].type == kind, name
    before = parse_metrics(_families(limited)[1])
    # a long shared prefix (several full KV blocks): the second request hits the prefix cache
    prompt = "Here is a list of fruits: " + ", ".join(["apple", "banana", "cherry"] * 30)
    messages = [{"role": "user", "content": prompt}]
    for _ in range(2):
        status, reply = post(limited, CHAT, _chat(messages=messages, max_tokens=6, ignore_eos=True))
        assert status == 200
    status, reply = post(limited, CHAT, _chat(choice=["metrics-yes", "metrics-no"]))
    assert status == 200
    # mid-stream: the running gauge and the cache usage show the live request
    conn = http.client.HTTPConnection(limited.host, limited.port, timeout=120)
    conn.request(
        "POST", CHAT, json.dumps(_chat(max_tokens=300, ignore_eos=True, stream=True)), JSON
    )
    response = conn.getresponse()
    assert response.readline().startswith(b"data: ")
    assert wait_until(
        lambda: (
            metric(parse_metrics(get(limited, "/metrics")[2]), "formcast:num_requests_running") == 1
        )
    )
    during = parse_metrics(get(limited, "/metrics")[2])
    assert 0 < metric(during, "formcast:kv_cache_usage_perc") < 1
    response.close()
    conn.close()
    assert wait_until(lambda: limited.engine.num_unfinished == 0)
    after = parse_metrics(get(limited, "/metrics")[2])

    def grew(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    for histogram in (
        "formcast:time_to_first_token_seconds",
        "formcast:e2e_request_latency_seconds",
        "formcast:request_queue_time_seconds",
        "formcast:request_prefill_time_seconds",
        "formcast:request_inference_time_seconds",
        "formcast:request_prompt_tokens",
    ):
        assert grew(histogram + "_count") == 4, histogram
    assert grew("formcast:inter_token_latency_seconds_count") >= 2 * 5
    assert grew("formcast:request_time_per_output_token_seconds_count") >= 2
    assert grew("formcast:request_success_total", finished_reason="length") >= 2
    assert grew("formcast:request_success_total", finished_reason="abort") == 1
    assert grew("formcast:prompt_tokens_total") > 2 * 90
    assert grew("formcast:generation_tokens_total") >= 12
    assert grew("formcast:prefix_cache_queries_total") == grew("formcast:prompt_tokens_total")
    assert grew("formcast:prefix_cache_hits_total") >= 16  # at least one full block reused
    assert grew("formcast:grammar_compiles_total") == 1
    assert grew("formcast:grammar_compile_seconds_count") == 1
    assert grew("formcast:http_requests_total", path=CHAT, status="200") == 4
    for gauge in ("formcast:num_requests_running", "formcast:kv_cache_usage_perc"):
        assert metric(after, gauge) == 0
    # every series carries the served model name
    assert {dict(labels)["model_name"] for _, labels in after} == {MODEL}


# -- graceful shutdown --------------------------------------------------------------------------


def _stream_lines(server, body) -> tuple[int, list[str]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    try:
        conn.request("POST", CHAT, json.dumps(body), JSON)
        response = conn.getresponse()
        lines = [line.decode().strip() for line in response if line.strip()]
        return response.status, lines
    finally:
        conn.close()


def test_shutdown_drains_in_flight_requests_then_aborts_the_rest():
    """SIGTERM's path (uvicorn's should_exit): no new connections; a short request finishes
    within the drain timeout; a long stream ends with an error event and [DONE]; a long
    non-streaming request gets a 503; then the engine thread, the grammar threads and the
    mask thread are gone and every KV block is free."""
    from formcast.server import BackgroundServer, ServerLimits

    drain_timeout_s = 8.0
    threads_before = set(threading.enumerate())
    # >= 0.05 s a step: the long requests need >= 45 s, the short one 4 steps
    engine = gated_engine(step_delay_s=0.05, max_num_seqs=4, max_model_len=1024, num_kv_blocks=256)
    server = BackgroundServer(engine, MODEL, limits=ServerLimits(drain_timeout_s=drain_timeout_s))
    server.start()
    try:
        long_body = {"max_tokens": 900, "ignore_eos": True}
        stream = _Background(_stream_lines, server, _chat(stream=True, **long_body))
        blocking = _Background(post, server, CHAT, _chat(**long_body))
        assert wait_until(lambda: engine.num_unfinished == 2, timeout=60)
        short = _Background(post, server, CHAT, _chat(max_tokens=4, ignore_eos=True, regex=WORDS))
        assert wait_until(lambda: engine.num_unfinished == 3, timeout=60)

        began = time.monotonic()
        stopping = _Background(server.stop)
        assert wait_until(lambda: server.gate.is_draining)
        with pytest.raises(OSError):  # the listener is closed: a new client cannot connect
            socket.create_connection((server.host, server.port), timeout=5).close()
        stopping.result(timeout=drain_timeout_s + 60)
    finally:
        server.stop()  # a no-op once stopped; a failed test must not leave the engine running
    # liveness only: the drain timeout, the abort, and a generous margin for a slow machine
    assert time.monotonic() - began < drain_timeout_s + 30

    status, reply = short.result()
    assert status == 200 and reply["choices"][0]["finish_reason"] in ("stop", "length")
    assert re.fullmatch(WORDS, reply["choices"][0]["message"]["content"])
    status, reply = blocking.result()
    error = _error(reply, status, 503, error_type="server_error")
    assert f"drain timeout of {drain_timeout_s:g} s" in error["message"]
    status, lines = stream.result()
    assert status == 200 and lines[-1] == "data: [DONE]"
    last_event = json.loads(lines[-2].removeprefix("data: "))
    assert "drain timeout" in last_event["error"]["message"]
    assert len(lines) > 3  # it did stream tokens before the abort

    assert not engine.is_alive and not server.thread.is_alive()
    block_manager = engine.llm.block_manager
    assert block_manager.num_free_blocks == block_manager.num_blocks
    assert not engine.llm.requests and not engine.llm.has_unfinished_requests()
    assert engine.num_grammar_compiles_running == 0
    assert wait_until(lambda: not (set(threading.enumerate()) - threads_before), timeout=30), [
        t.name for t in set(threading.enumerate()) - threads_before
    ]
