"""Error bodies and statuses, disconnects, a bounded load test, /health and /metrics."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket

import openai
import pytest
from server_helpers import MODEL, get, metric, parse_metrics, post, wait_until

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Count from one to ten."}]


def _chat(**fields):
    return {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, **fields}


def _assert_error(status, body, expected_status, param=None, code=None, error_type=None):
    assert status == expected_status, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    if error_type is not None:
        assert error["type"] == error_type
    return error


def _is_idle(server) -> bool:
    engine = server.engine
    return (
        engine.num_unfinished == 0 and engine.num_free_blocks == engine.llm.block_manager.num_blocks
    )


def test_malformed_json_is_400(server):
    status, body = post(server, CHAT, b'{"model": "smollm2-135m", "messages": [')
    error = _assert_error(status, body, 400, error_type="invalid_request_error")
    assert "parse the JSON body" in error["message"]


def test_unknown_model_is_404(server):
    status, body = post(server, CHAT, _chat(model="gpt-17"))
    _assert_error(status, body, 404, param="model", code="model_not_found")
    status, body = post(server, "/v1/completions", {"model": "gpt-17", "prompt": "hi"})
    _assert_error(status, body, 404, code="model_not_found")


def test_malformed_schema_keyword_value_is_400_with_pointer(server):
    """Was a bare 500 (AttributeError / ValueError from inside the compiler)."""
    for schema, keyword, pointer in (
        ({"type": "object", "properties": "x"}, "properties", "#"),
        ({"type": "object", "properties": {"a": {"minimum": "zero"}}}, "minimum", "/properties/a"),
    ):
        fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
        status, body = post(server, CHAT, _chat(response_format=fmt))
        error = _assert_error(status, body, 400, param="response_format", code="invalid_schema")
        assert keyword in error["message"] and pointer in error["message"]


def test_oversized_grammars_are_400_before_compiling(server):
    """Were minutes of compiling (10,000 properties: 157 s, then a failure) or gigabytes held
    (``[0-9]{1,1000000}``) while other requests waited; now refused by size at once."""
    compiles_before = server.engine.compiler.num_compiles
    status, body = post(server, CHAT, _chat(regex="[0-9]{1,1000000}"))
    error = _assert_error(status, body, 400, param="regex", code="grammar_too_large")
    assert "max_repeat_count" in error["message"]
    properties = {f"p{i}": {"type": "integer"} for i in range(10_000)}
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
    status, body = post(server, CHAT, _chat(response_format=fmt, stream=True))
    error = _assert_error(status, body, 400, param="response_format", code="grammar_too_large")
    assert "max_object_properties" in error["message"] and "10,000" in error["message"]
    assert server.engine.compiler.num_compiles == compiles_before  # nothing was compiled


def test_unsupported_schema_keyword_names_pointer(server):
    schema = {
        "type": "object",
        # distinct arrays or integers: no item automaton, and not an open kind (integer
        # beside another type: "0" completes one way alone)
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": ["array", "integer"]},
                "uniqueItems": True,
            }
        },
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
    for stream in (False, True):  # a stream is refused before any event is sent
        status, body = post(server, CHAT, _chat(response_format=fmt, stream=stream))
        error = _assert_error(status, body, 400, param="response_format", code="invalid_schema")
        assert "uniqueItems" in error["message"] and "/properties/tags" in error["message"]


def test_prompt_too_long(server):
    long_messages = [{"role": "user", "content": "word " * 1200}]
    status, body = post(server, CHAT, _chat(messages=long_messages))
    _assert_error(status, body, 400, code="context_length_exceeded")
    status, body = post(server, CHAT, _chat(max_tokens=5000))
    _assert_error(status, body, 400, code="context_length_exceeded")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"n": 0}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"presence_penalty": 3}, "presence_penalty"),
        ({"logit_bias": {"5": 500}}, "logit_bias"),
        ({"logprobs": True, "top_logprobs": 50}, "top_logprobs"),
        ({"temperature": "hot"}, "temperature"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"frobnicate": 1}, "frobnicate"),
        ({"audio": {"voice": "x"}}, "audio"),
        ({"regex": "(unclosed"}, "regex"),
        ({"tool_choice": "required"}, "tool_choice"),
        # strict types: strings and numbers are not coerced (was: "10" -> 10, "yes" -> True)
        ({"n": "10"}, "n"),
        ({"max_tokens": "12"}, "max_tokens"),
        ({"temperature": "0.5"}, "temperature"),
        ({"stream": "yes"}, "stream"),
        ({"logprobs": 1}, "logprobs"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_invalid_values_are_400(server, fields, param):
    status, body = post(server, CHAT, _chat(**fields))
    _assert_error(status, body, 400, param=param, error_type="invalid_request_error")


def _post_raw(server, path: str, body: dict) -> tuple[int, str, bytes]:
    """POST ``body`` as JSON; return (status, content type, the raw response body)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("content-type"), response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", [CHAT, "/v1/completions"])
def test_n_above_max_num_seqs_is_400_before_any_chunk(server, path, stream):
    # the n completions run in the same steps: n > max_num_seqs could never be admitted
    limit = server.engine.llm.config.max_num_seqs
    if path == CHAT:
        body = _chat(n=limit + 1, stream=stream)
    else:
        body = {"model": MODEL, "prompt": "Count", "max_tokens": 4, "n": limit + 1}
        body["stream"] = stream
    status, content_type, raw = _post_raw(server, path, body)
    assert status == 400 and content_type == "application/json", raw[:200]
    assert b"data:" not in raw  # no event-stream chunk went out
    error = _assert_error(
        status, json.loads(raw), 400, param="n", error_type="invalid_request_error"
    )
    assert error["message"].startswith(f"n={limit + 1} is more than max_num_seqs={limit}")
    assert wait_until(lambda: _is_idle(server))


@pytest.mark.parametrize("stream", [False, True])
def test_openai_client_sees_n_above_max_num_seqs_as_bad_request(server, client, stream):
    limit = server.engine.llm.config.max_num_seqs
    # a stream fails in create() on the status, before any chunk is read
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=2, n=limit + 1, stream=stream
        )
    assert info.value.status_code == 400 and info.value.body["param"] == "n"
    assert f"max_num_seqs={limit}" in info.value.body["message"]
    assert wait_until(lambda: _is_idle(server))


def test_openai_client_sees_status_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=MESSAGES, max_tokens=2)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, top_p=7)
    assert info.value.body["param"] == "top_p"


def test_unknown_path_and_health(server):
    status, body = post(server, "/v1/nothing", {})
    _assert_error(status, body, 404)
    status, content_type, text = get(server, "/health")
    assert status == 200 and json.loads(text) == {"status": "ok"}


def _open_stream(server, body: dict) -> socket.socket:
    """Send a request on a raw socket and read its response headers; return the socket."""
    data = json.dumps(body).encode()
    sock = socket.create_connection((server.host, server.port), timeout=60)
    head = (
        f"POST {CHAT} HTTP/1.1\r\nHost: {server.host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def test_client_disconnect_aborts_and_frees_blocks(server):
    before = parse_metrics(get(server, "/metrics")[2])
    # streaming: read the first events, then hang up
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    conn.request(
        "POST",
        CHAT,
        json.dumps(_chat(max_tokens=400, stream=True, ignore_eos=True)),
        {"Content-Type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"data: ")
    response.close()
    conn.close()
    # the stream's abort lands first, so the next wait sees only the non-streaming request
    assert wait_until(lambda: _is_idle(server))
    # non-streaming: send, then hang up while it generates
    sock = _open_stream(server, _chat(max_tokens=400, ignore_eos=True))
    assert wait_until(lambda: server.engine.num_unfinished == 1)
    sock.close()
    assert wait_until(lambda: _is_idle(server))
    after = parse_metrics(get(server, "/metrics")[2])
    name = "formcast:request_success_total"
    assert (
        metric(after, name, finished_reason="abort") - metric(before, name, finished_reason="abort")
        == 2
    )
    # far fewer than the 2 * 400 tokens asked for were generated
    generated = metric(after, "formcast:generation_tokens_total") - metric(
        before, "formcast:generation_tokens_total"
    )
    assert generated < 400


def test_load_then_every_block_free_and_metrics_add_up(server):
    client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    num_requests, num_rounds = 64, 2
    before = parse_metrics(get(server, "/metrics")[2])

    async def one(i: int):
        extra = {"choice": ["yes", "no", "maybe"]} if i % 4 == 0 else {}
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"Request {i}: say something."}],
            max_tokens=8,
            temperature=1.0,
            seed=i,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
        reasons, usage, text = [], None, ""
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                if choice.finish_reason:
                    reasons.append(choice.finish_reason)
        if extra:
            assert text in extra["choice"]
        return reasons, usage

    async def rounds():
        results = []
        for _ in range(num_rounds):
            results += await asyncio.gather(*(one(i) for i in range(num_requests)))
        await client.close()
        return results

    results = asyncio.run(rounds())
    total = num_requests * num_rounds
    assert len(results) == total
    assert all(reasons in (["stop"], ["length"]) for reasons, _ in results)
    assert wait_until(lambda: _is_idle(server))
    after = parse_metrics(get(server, "/metrics")[2])

    def grew(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("formcast:http_requests_total", path=CHAT, status="200") == total
    assert grew("formcast:generation_tokens_total") == sum(u.completion_tokens for _, u in results)
    assert grew("formcast:prompt_tokens_total") == sum(u.prompt_tokens for _, u in results)
    assert grew("formcast:time_to_first_token_seconds_count") == total
    assert grew("formcast:e2e_request_latency_seconds_count") == total
    finished = sum(
        grew("formcast:request_success_total", finished_reason=r) for r in ("stop", "length")
    )
    assert finished == total
    for gauge in (
        "formcast:kv_blocks_in_use",
        "formcast:num_requests_running",
        "formcast:num_requests_waiting",
    ):
        assert metric(after, gauge) == 0
    assert metric(after, "formcast:kv_blocks_total") == server.engine.llm.block_manager.num_blocks


def test_metrics_exposition(server):
    status, content_type, text = get(server, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    samples = parse_metrics(text)
    names = {name for name, _ in samples}
    for expected in (
        "formcast:http_requests_total",
        "formcast:prompt_tokens_total",
        "formcast:generation_tokens_total",
        "formcast:time_to_first_token_seconds_count",
        "formcast:inter_token_latency_seconds_bucket",
        "formcast:grammar_compile_seconds_sum",
        "formcast:num_requests_waiting",
        "formcast:kv_blocks_in_use",
    ):
        assert expected in names
    assert metric(samples, "formcast:grammar_compiles_total") >= 1
    assert metric(samples, "formcast:grammar_compile_seconds_count") == metric(
        samples, "formcast:grammar_compiles_total"
    )


def test_engine_failure_is_500_and_server_keeps_serving(server):
    llm = server.engine.llm
    real_step = llm.step

    def failing_step():
        del llm.step  # fail once, then the real method again
        raise RuntimeError("injected engine failure")

    llm.step = failing_step
    try:
        status, body = post(server, CHAT, _chat())
    finally:
        llm.__dict__.pop("step", None)
    error = _assert_error(status, body, 500, error_type="server_error")
    assert "injected engine failure" in error["message"]
    assert llm.step == real_step
    status, body = post(server, CHAT, _chat())
    assert status == 200 and body["choices"][0]["message"]["content"]
    assert wait_until(lambda: _is_idle(server))


def test_api_key_required_on_v1_when_configured():
    """``formcast serve --api-key`` (or $FORMCAST_API_KEY): 401 ``invalid_api_key`` without
    the key, served with it; ``/health`` stays open for probes."""
    from formcast.server import BackgroundServer, build_engine

    engine = build_engine(MODEL, max_num_seqs=2, max_model_len=256, num_kv_blocks=32)
    with BackgroundServer(engine, MODEL, api_key="s3cret-key") as running:
        base = running.base_url + "/v1"
        for key in ("wrong", ""):
            wrong = openai.OpenAI(base_url=base, api_key=key or "x", max_retries=0)
            with pytest.raises(openai.AuthenticationError) as info:
                wrong.models.list()
            assert info.value.status_code == 401
            assert info.value.body["code"] == "invalid_api_key"
        status, body = post(running, "/v1/chat/completions", {"model": MODEL, "messages": []})
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        assert "no API key given" in body["error"]["message"]
        assert get(running, "/health")[0] == 200
        right = openai.OpenAI(base_url=base, api_key="s3cret-key", max_retries=0)
        assert [m.id for m in right.models.list()] == [MODEL]
        reply = right.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
        assert reply.choices[0].finish_reason in ("length", "stop")
