"""Fuzzing the server: generated request bodies into ``/v1/chat/completions`` and
``/v1/completions`` of the session server (real SmolLM2).

Bodies come from `tests.fuzz.strategies` (valid-looking and broken: wrong types, missing and
extra fields, huge values, junk nested in ``messages`` / ``tools`` / ``response_format``,
fuzzed schemas, regexes and Lark grammars), sent as JSON or as damaged bytes (truncated,
invalid UTF-8, nested 50,000 deep, not an object). Asserted for every body:

- the answer is a 2xx, or a 4xx whose body is an OpenAI error
  ``{"error": {"message", "type", "param", "code"}}`` with a non-empty message and a type
  other than ``server_error``; never a 5xx;
- a 200 is complete: a JSON completion with its choices, or an event stream of JSON chunks
  ending with ``[DONE]`` (an error event in the stream must be a client error too);
- it comes within `REQUEST_TIMEOUT_S` (liveness: a client timeout is a hang).

After the run the server is quiet (no engine request, every KV block free, no compile
running, the request gate empty: anything else is a leak) and ``/health`` is ok. Each test
prints ``FUZZ {...}`` (``pytest -s``).
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from server_helpers import get, is_server_quiet, wait_until

from tests.fuzz.strategies import RAW_DAMAGE, chat_bodies, completion_bodies, raw_body
from tests.fuzz.tally import FuzzTally, fuzz_settings

# liveness: above the grammar compile budget (GrammarLimits.compile_timeout_s, 60 s)
REQUEST_TIMEOUT_S = 150.0
ERROR_FIELDS = {"message", "type", "param", "code"}


def _error_problem(body: Any) -> str | None:
    """What is wrong with an error body (None if it is a well-formed client error)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != ERROR_FIELDS:
        return f"not an OpenAI error body: {body!r:.300}"
    if not isinstance(error["message"], str) or not error["message"]:
        return f"error without a message: {body!r:.300}"
    if error["type"] == "server_error":
        return f"server error: {error['message']!r:.300}"
    return None


def _stream_problem(text: str) -> str | None:
    """What is wrong with an event stream (None if every event is JSON and it ends [DONE])."""
    # SSE lines end with \n (or \r\n); not str.splitlines(), which also splits the JSON at
    # U+0085 / U+2028 characters a completion may hold
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    events = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        return f"stream does not end with [DONE]: {text[-300:]!r}"
    for event in events[:-1]:
        chunk = json.loads(event)
        if "error" in chunk:
            return _error_problem(chunk)
        if not isinstance(chunk.get("choices"), list):
            return f"chunk without choices: {event[:300]!r}"
    return None


def send(server: Any, path: str, data: bytes) -> tuple[str, str | None]:
    """POST ``data``; return (outcome, problem): the outcome names the status (for a 200
    whether it streamed, for a 4xx the error code), the problem is None for an acceptable
    answer."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        status = response.status
        content_type = response.getheader("content-type") or ""
        text = response.read().decode()
    except TimeoutError:
        return "hang", f"no complete answer within {REQUEST_TIMEOUT_S:g} s"
    finally:
        conn.close()
    if status >= 500:
        return f"http_{status}", f"{status}: {text[:300]!r}"
    if content_type.startswith("text/event-stream"):
        return f"http_{status}_stream", _stream_problem(text)
    try:
        body = json.loads(text)
    except ValueError:
        return f"http_{status}", f"{status} with a body that is not JSON: {text[:300]!r}"
    if 400 <= status < 500:
        problem = _error_problem(body)
        code = None if problem else body["error"]["code"]
        return f"http_{status}" + (f"_{code}" if code else ""), problem
    if status != 200 or not isinstance(body.get("choices"), list) or not body["choices"]:
        return f"http_{status}", f"{status} without choices: {text[:300]!r}"
    return "http_200", None


def fuzz_endpoint(server: Any, name: str, path: str, bodies: st.SearchStrategy, num: int) -> None:
    tally = FuzzTally(name)

    @fuzz_settings(num)
    @given(bodies, st.sampled_from(RAW_DAMAGE))
    def one(body: dict, damage: str) -> None:
        began = time.monotonic()
        outcome, problem = send(server, path, raw_body(body, damage))
        if problem is not None:
            tally.crash(f"{outcome}: {problem} for {damage} body {body!r:.500}")
            raise AssertionError(tally.crashes[-1])
        tally.record(outcome, time.monotonic() - began)
        tally.checks[f"body_{damage}"] += 1

    one()
    is_quiet = wait_until(lambda: is_server_quiet(server), timeout=60)
    status, _, health = get(server, "/health")
    tally.num_leaks = int(not is_quiet)
    tally.report()
    assert tally.crashes == []
    assert is_quiet, "engine requests, KV blocks, grammar compiles or gate counts left over"
    assert status == 200, health
    # both kinds of answer were exercised
    assert any(outcome.startswith("http_400") for outcome in tally.outcomes)
    assert tally.outcomes["http_200"] > 0 and tally.outcomes["http_200_stream"] > 0


@pytest.mark.slow
def test_fuzz_chat_completions(server):
    fuzz_endpoint(server, "server_chat_completions", "/v1/chat/completions", chat_bodies(), 150)


@pytest.mark.slow
def test_fuzz_text_completions(server):
    fuzz_endpoint(server, "server_completions", "/v1/completions", completion_bodies(), 120)
