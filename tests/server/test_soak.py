"""A bounded soak test of the server on loopback: mixed traffic from many concurrent clients.

``NUM_CLIENTS`` clients send requests back to back for ``SOAK_SECONDS`` (default 40 s,
``FORMCAST_SOAK_SECONDS`` overrides): chat and text completions, streaming and not,
grammar requests (choice, regex, JSON schema), ``n=2``, clients that hang up mid-stream or
while a non-streaming request runs, and bad requests (malformed JSON, invalid schema, wrong
types, unknown fields and models, a prompt past the context, a body over the size limit).

Asserted: every good request is answered completely (a 200 whose every choice finished, a
stream that ends with ``[DONE]``, grammar outputs that match) unless its own client hung up;
every bad request is a 4xx with an OpenAI error body; no 5xx, no client exception. After the
soak: no engine request left, every KV block free, no grammar compile running, the gate
empty, and the process RSS back within `RSS_TOLERANCE_BYTES` of its level after a warm-up
round (see there). The counts are printed as one ``SOAK {...}`` JSON line (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import gc
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
from server_helpers import MODEL, is_server_quiet, wait_until

SOAK_SECONDS = float(os.environ.get("FORMCAST_SOAK_SECONDS", "40"))
NUM_ROUNDS = 2  # the soak runs in rounds of SOAK_SECONDS / NUM_ROUNDS; RSS read after each
# The warm-up runs every kind many times and reaches peak concurrency (48 clients, a full
# batch of the longest prompts): allocator arenas, torch's CPU buffers, numba's kernels and
# the LM head's weight copy are in place before the first RSS reading.
WARMUP_SECONDS = 20.0
NUM_CLIENTS = 48
REQUEST_TIMEOUT_S = 180.0  # liveness: a request that hangs this long is a failure
MAX_BODY_BYTES = 64 * 1024
# RSS may end above its post-warm-up level by this much. The one-time +100 MiB step that came
# late (stop 31, once in the second round of a `make test` run) was the LM head's transposed
# weight copy (49,152 x 576 fp32 = 108 MiB), built when a step first had exactly one row, which
# 48 busy clients reach whenever traffic thins; it is now built on the first call
# (`engine/models/linear.py`). After that, rounds of 20 s (1,600 requests after a 20 s warm-up)
# read 1482 -> 1494, 1494, 1489, 1487, 1497 MiB: the engine thread's malloc arena moves by
# +-15 MiB with the attention buffers of the step. 48 MiB is three times that spread; a leak of
# 80 KiB per request over ~600 requests fails.
RSS_TOLERANCE_BYTES = 48 * 1024 * 1024

CHOICES = ["sunny", "cloudy", "rainy"]
PHONE = r"\d{3}-\d{4}"
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
TOPICS = ["the sea", "a cat", "winter", "a robot", "music", "a train", "bread", "stars"]

GOOD_KINDS = {
    "chat": 6,
    "chat_stream": 6,
    "completion": 2,
    "completion_stream": 2,
    "choice": 2,
    "regex": 2,
    "json_schema": 2,
    "n2_stream": 1,
}
DISCONNECT_KINDS = {"stream_hang_up": 3, "hang_up": 2}
BAD_KINDS = {
    "malformed_json": 1,
    "invalid_schema": 1,
    "wrong_type": 1,
    "unknown_field": 1,
    "unknown_model": 1,
    "prompt_too_long": 1,
    "body_too_large": 1,
}
ALL_KINDS = {**GOOD_KINDS, **DISCONNECT_KINDS, **BAD_KINDS}


class RawResponse:
    """An HTTP/1.1 response read from an asyncio stream (one connection per request)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.status = 0
        self.headers: dict[str, str] = {}

    async def begin(self) -> None:
        status_line = await self.reader.readline()
        self.status = int(status_line.split()[1])
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (chunked or Content-Length)."""
        if self.headers.get("transfer-encoding") == "chunked":
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                yield await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            await self.reader.readline()
        else:
            yield await self.reader.readexactly(int(self.headers.get("content-length", "0")))

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def lines(self) -> AsyncIterator[str]:
        pending = b""
        async for chunk in self.chunks():
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.decode().rstrip("\r")

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def open_request(host: str, port: int, path: str, content: bytes) -> RawResponse:
    """POST ``content`` as JSON on a new connection; return the response, headers read."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(content)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + content)
    response = RawResponse(reader, writer)
    try:
        await writer.drain()
        await response.begin()
    except BaseException:
        await response.close()
        raise
    return response


def rss_bytes() -> int:
    """This process's resident set size, after a GC and returning free heap pages to the OS
    (so allocator slack is not read as a leak)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: measure as is
        pass
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _messages(rng: random.Random) -> list[dict]:
    return [{"role": "user", "content": f"Write one sentence about {rng.choice(TOPICS)}."}]


def _request(kind: str, rng: random.Random) -> tuple[str, bytes | dict]:
    """(path, body) of one request of ``kind``."""
    chat = {"model": MODEL, "messages": _messages(rng), "max_tokens": rng.randint(2, 12)}
    chat["temperature"] = rng.choice([0.0, 0.8])
    chat["seed"] = rng.randrange(1000)
    completion = {"model": MODEL, "prompt": f"Once upon a time, {rng.choice(TOPICS)}"}
    completion["max_tokens"] = rng.randint(2, 12)
    chat_path, completion_path = "/v1/chat/completions", "/v1/completions"
    if kind == "chat":
        return chat_path, chat
    if kind in ("chat_stream", "stream_hang_up"):
        return chat_path, {**chat, "stream": True, "max_tokens": 16, "ignore_eos": True}
    if kind == "hang_up":
        return chat_path, {**chat, "max_tokens": 48, "ignore_eos": True}
    if kind == "completion":
        return completion_path, completion
    if kind == "completion_stream":
        return completion_path, {**completion, "stream": True}
    if kind == "choice":
        return chat_path, {
            **chat,
            "choice": CHOICES,
            "max_tokens": 16,
            "stream": rng.random() < 0.5,
        }
    if kind == "regex":
        return chat_path, {**chat, "regex": PHONE, "max_tokens": 24}
    if kind == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {"name": "status", "schema": SCHEMA}}
        return chat_path, {**chat, "response_format": fmt, "max_tokens": 32}
    if kind == "n2_stream":
        return chat_path, {**chat, "n": 2, "stream": True}
    if kind == "malformed_json":
        return chat_path, b'{"model": "smollm2-135m", "messages": [{"role": '
    if kind == "invalid_schema":
        fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": 5}}}
        return chat_path, {**chat, "response_format": fmt}
    if kind == "wrong_type":
        return chat_path, {**chat, "max_tokens": rng.choice(["ten", -3, 1.5, [1]])}
    if kind == "unknown_field":
        return chat_path, {**chat, "frobnicate": True}
    if kind == "unknown_model":
        return chat_path, {**chat, "model": "gpt-soak"}
    if kind == "prompt_too_long":
        return chat_path, {**chat, "messages": [{"role": "user", "content": "word " * 700}]}
    if kind == "body_too_large":
        return chat_path, {**chat, "messages": [{"role": "user", "content": "x" * MAX_BODY_BYTES}]}
    raise AssertionError(f"unknown request kind {kind}")


def _check_grammar(kind: str, text: str, finish_reason: str) -> str | None:
    """What is wrong with a grammar request's output (None: nothing)."""
    if finish_reason != "stop":
        return None  # cut by max_tokens: an unfinished string of the grammar
    if kind == "choice" and text not in CHOICES:
        return f"choice output {text!r}"
    if kind == "regex" and not re.fullmatch(PHONE, text):
        return f"regex output {text!r}"
    if kind == "json_schema":
        value = json.loads(text)
        if set(value) != {"ok", "n"} or not isinstance(value["ok"], bool):
            return f"json_schema output {text!r}"
    return None


class Soak:
    """Runs the clients and tallies outcomes; ``failures`` lists what went wrong."""

    def __init__(self, host: str, port: int, seed: int) -> None:
        self.host = host
        self.port = port
        self.rng = random.Random(seed)
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.by_kind: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []

    def fail(self, kind: str, what: str) -> None:
        self.outcomes["failed"] += 1
        if len(self.failures) < 20:
            self.failures.append(f"{kind}: {what}")

    async def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(self._client(deadline, i) for i in range(NUM_CLIENTS)))

    async def _client(self, deadline: float, index: int) -> None:
        rng = random.Random(self.rng.random() + index)
        kinds, weights = zip(*ALL_KINDS.items(), strict=True)
        while time.monotonic() < deadline:
            kind = rng.choices(kinds, weights)[0]
            self.by_kind[kind] += 1
            try:
                await asyncio.wait_for(self._one(kind, rng), REQUEST_TIMEOUT_S)
            except Exception as exc:  # a client-side exception is a failure, with its name
                self.fail(kind, f"{type(exc).__name__}: {exc}")

    async def _one(self, kind: str, rng: random.Random) -> None:
        path, body = _request(kind, rng)
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        if kind == "hang_up":  # the client gives up while the request generates
            try:
                await asyncio.wait_for(self._post(kind, path, content), rng.uniform(0.05, 0.5))
            except asyncio.TimeoutError:  # the connection is closed: the server sees it go
                self.outcomes["aborted_by_client"] += 1
            return
        if isinstance(body, dict) and body.get("stream", False):
            await self._stream(kind, path, content, rng)
            return
        await self._post(kind, path, content)

    async def _post(self, kind: str, path: str, content: bytes) -> None:
        response = await open_request(self.host, self.port, path, content)
        try:
            raw = await response.read()
        finally:
            await response.close()
        self._check_body(kind, response.status, raw)

    def _check_body(self, kind: str, status: int, raw: bytes) -> None:
        if kind in BAD_KINDS:
            self._check_refusal(kind, status, raw)
            return
        if status != 200:
            self.fail(kind, f"status {status}: {raw[:200]!r}")
            return
        reply = json.loads(raw)
        for choice in reply["choices"]:
            if choice["finish_reason"] not in ("stop", "length"):
                self.fail(kind, f"finish_reason {choice['finish_reason']}")
                return
            text = choice["message"]["content"] if "message" in choice else choice["text"]
            problem = _check_grammar(kind, text, choice["finish_reason"])
            if problem:
                self.fail(kind, problem)
                return
        if reply["usage"]["completion_tokens"] < 1:
            self.fail(kind, "no completion tokens")
            return
        self.outcomes["completed"] += 1

    def _check_refusal(self, kind: str, status: int, raw: bytes) -> None:
        if not 400 <= status < 500:
            self.fail(kind, f"status {status} for a bad request: {raw[:200]!r}")
            return
        error = json.loads(raw).get("error", {})
        if set(error) != {"message", "type", "param", "code"} or not error["message"]:
            self.fail(kind, f"error body {raw[:200]!r}")
            return
        self.outcomes[f"refused_{status}"] += 1

    async def _stream(self, kind: str, path: str, content: bytes, rng: random.Random) -> None:
        hang_up_after = rng.randint(1, 4) if kind == "stream_hang_up" else None
        finished: dict[int, str] = {}
        texts: collections.defaultdict[int, str] = collections.defaultdict(str)
        num_events = 0
        is_done = False
        response = await open_request(self.host, self.port, path, content)
        try:
            if response.status != 200:
                self._check_body(kind, response.status, await response.read())
                return
            async for line in response.lines():
                if not line.startswith("data: "):
                    continue
                num_events += 1
                if hang_up_after is not None and num_events >= hang_up_after:
                    self.outcomes["aborted_by_client"] += 1
                    return  # the connection closes mid-stream (finally)
                data = line.removeprefix("data: ")
                if data == "[DONE]":
                    is_done = True
                    continue
                event = json.loads(data)
                if "error" in event:
                    self.fail(kind, f"error event {data[:200]}")
                    return
                for choice in event["choices"]:
                    delta = choice.get("delta", {})
                    texts[choice["index"]] += delta.get("content") or choice.get("text") or ""
                    if choice.get("finish_reason"):
                        finished[choice["index"]] = choice["finish_reason"]
        finally:
            await response.close()
        num_choices = json.loads(content).get("n") or 1
        if hang_up_after is not None:
            self.outcomes["completed"] += 1  # shorter than the hang-up point
        elif not is_done or sorted(finished) != list(range(num_choices)):
            self.fail(kind, f"stream ended without [DONE] or finish reasons: {finished}")
        elif any(_check_grammar(kind, texts[i], finished[i]) for i in finished):
            self.fail(kind, f"grammar output {dict(texts)}")
        else:
            self.outcomes["completed"] += 1


def run_soak() -> dict:
    """Warm-up round, soak round, quiet check and RSS: the report (in this process)."""
    from formcast.server import BackgroundServer, ServerLimits, build_engine

    engine = build_engine(MODEL, max_num_seqs=32, max_model_len=512, num_kv_blocks=320)
    limits = ServerLimits(max_body_bytes=MAX_BODY_BYTES)
    with BackgroundServer(engine, MODEL, limits=limits) as server:
        warmup = Soak(server.host, server.port, seed=1)
        asyncio.run(warmup.run(WARMUP_SECONDS))
        assert warmup.failures == []
        assert wait_until(lambda: is_server_quiet(server), timeout=60)
        rss_before = rss_bytes()

        soak = Soak(server.host, server.port, seed=2)
        began = time.monotonic()
        rss_rounds = []
        is_quiet = True
        for _ in range(NUM_ROUNDS):  # one tally; a quiet check and an RSS reading per round
            asyncio.run(soak.run(SOAK_SECONDS / NUM_ROUNDS))
            is_quiet = wait_until(lambda: is_server_quiet(server), timeout=60) and is_quiet
            rss_rounds.append(rss_bytes())
        seconds = time.monotonic() - began
        rss_after = rss_rounds[-1]

    num_tried = sum(soak.by_kind.values())
    growth = rss_after - rss_before
    report = {
        "seconds": round(seconds, 1),
        "clients": NUM_CLIENTS,
        "requests_tried": num_tried,
        "outcomes": dict(sorted(soak.outcomes.items())),
        "by_kind": dict(sorted(soak.by_kind.items())),
        "crashes": soak.outcomes["failed"],
        "leaks": int(not is_quiet) + int(growth > RSS_TOLERANCE_BYTES),
        "rss_before_mib": round(rss_before / 2**20, 1),
        "rss_after_mib": round(rss_after / 2**20, 1),
        "rss_growth_mib": round(growth / 2**20, 1),
        "rss_rounds_mib": [round(rss / 2**20, 1) for rss in rss_rounds],
        "failures": soak.failures[:20],
        "warmup_failures": warmup.failures[:20],
        "is_quiet": is_quiet,
        "rss_growth_bytes": growth,
    }
    return report


@pytest.mark.slow
def test_soak_mixed_traffic():
    # in a process of its own: RSS is process-wide, and in the suite's process earlier tests'
    # threads and freed memory move it (one full-suite run read +126 MiB that the soak alone,
    # run the same way, never shows: +3..9 MiB)
    completed = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, timeout=1200, check=False
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("SOAK ")]
    assert completed.returncode == 0 and lines, completed.stderr[-4000:]
    report = json.loads(lines[-1][len("SOAK ") :])
    soak_failures, warmup_failures = report.pop("failures"), report.pop("warmup_failures")
    is_quiet, growth = report.pop("is_quiet"), report.pop("rss_growth_bytes")
    num_tried = report["requests_tried"]
    outcomes = collections.Counter(report["outcomes"])
    print("SOAK " + json.dumps(report))
    assert warmup_failures == [], warmup_failures
    assert soak_failures == [], soak_failures
    assert is_quiet, "engine requests, KV blocks, grammar compiles or gate counts left over"
    assert growth <= RSS_TOLERANCE_BYTES, report
    # every kind ran, and the tallies account for every request
    assert set(report["by_kind"]) == set(ALL_KINDS)
    assert sum(outcomes.values()) == num_tried
    assert outcomes["aborted_by_client"] > 0 and outcomes["completed"] > 0
    assert not any(key.startswith("refused_5") for key in outcomes)
    assert {"refused_400", "refused_404", "refused_413"} <= set(outcomes)


if __name__ == "__main__":  # the test's subprocess
    print("SOAK " + json.dumps(run_soak()), flush=True)
