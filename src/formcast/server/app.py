"""The FastAPI application: routes, OpenAI-style error handlers, request counting, disconnects,
and the protective limits wired in.

Endpoints: ``GET /health``, ``GET /metrics``, ``GET /v1/models``, ``GET /v1/models/{id}``,
``POST /v1/completions``, ``POST /v1/chat/completions``.

Limits (body size, waiting queue, drain, stall) are `formcast.server.limits`'s; this module
wires them in: `LimitRequestBody` as a middleware, the `RequestGate` around every
generation request, the stall check in ``/health``.

Errors: every error body is ``{"error": {"message", "type", "param", "code"}}``. FastAPI's
422 for invalid bodies becomes OpenAI's 400 (malformed JSON, wrong types, unknown fields);
unknown paths are 404s, unexpected exceptions 500s ``server_error``.

Disconnects: a streaming response aborts its unfinished engine requests when it stops for
any reason (client gone, server shutting down); a non-streaming request watches its
connection (``http.disconnect``) while it waits and aborts on disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope, Send

from formcast.errors import FormcastError
from formcast.server.async_engine import AsyncEngine
from formcast.server.chat_completion import ChatCompletion
from formcast.server.errors import (
    INVALID_REQUEST,
    NOT_FOUND,
    SERVER_ERROR,
    APIError,
    api_error_from,
)
from formcast.server.generation import Generation
from formcast.server.limits import (
    LimitRequestBody,
    RequestGate,
    ServerLimits,
    error_response,
)
from formcast.server.metrics import CONTENT_TYPE, ServerMetrics
from formcast.server.protocol import ChatCompletionRequest, CompletionRequest
from formcast.server.responses import now
from formcast.server.serving_context import ServingContext
from formcast.server.text_completion import TextCompletion

logger = logging.getLogger("formcast.server")


def _validation_error(exc: RequestValidationError) -> APIError:
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid" or (
        first.get("type") == "model_attributes_type" and tuple(first.get("loc", ())) == ("body",)
    ):
        return APIError(
            400,
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)",
            INVALID_REQUEST,
        )
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location) or None
    if first.get("type") == "missing" and param:
        return APIError(400, f"Missing required parameter: '{param}'.", INVALID_REQUEST, param)
    if first.get("type") == "extra_forbidden" and param:
        return APIError(
            400, f"Unrecognized request argument supplied: {param}", INVALID_REQUEST, param
        )
    message = f"Invalid value for '{param}': {first.get('msg', 'invalid')}"
    return APIError(400, message, INVALID_REQUEST, param, "invalid_value")


class CountRequests:
    """ASGI middleware: count answered HTTP requests by route and status."""

    def __init__(self, app: Any, metrics: ServerMetrics, paths: set[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in self.paths else "other"

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.count_http_request(path, message["status"])
            await send(message)

        await self.app(scope, receive, counting_send)


class RequireApiKey:
    """ASGI middleware: every ``/v1/`` request must carry ``Authorization: Bearer <api_key>``.

    Others get 401 with an OpenAI-shaped error (``invalid_api_key``) before any handler runs;
    ``/health`` and ``/metrics`` stay open (probes and scrapers). Keys are compared in
    constant time.
    """

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        what = "no API key given" if not given else "the API key is not valid"
        error = APIError(
            401,
            f"{what}: send 'Authorization: Bearer <key>' with the key the server was started with",
            INVALID_REQUEST,
            code="invalid_api_key",
        )
        await error_response(error)(scope, receive, send)


class EventStreamResponse(StreamingResponse):
    """Server-sent events whose generation is aborted when the response stops early."""

    def __init__(
        self,
        content: AsyncIterator[str],
        generation: Generation,
        on_close: Callable[[], None],
    ) -> None:
        super().__init__(content, media_type="text/event-stream")
        self.generation = generation
        self.on_close = on_close
        self.headers["Cache-Control"] = "no-cache"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.generation.abort_unfinished()
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()
            self.on_close()


async def _respond(
    http_request: Request, run: ChatCompletion | TextCompletion, gate: RequestGate
) -> Response:
    gate.enter()
    is_stream_started = False
    try:
        with gate.admitting():
            generation = await run.start()
        if run.body.stream:
            is_stream_started = True
            return EventStreamResponse(run.stream(), generation, gate.leave)
        return await _answer(http_request, run, generation)
    finally:
        if not is_stream_started:
            gate.leave()


async def _answer(
    http_request: Request, run: ChatCompletion | TextCompletion, generation: Generation
) -> Response:
    answer = asyncio.ensure_future(run.response())
    disconnect = asyncio.ensure_future(_wait_for_disconnect(http_request))
    is_client_gone = True
    try:
        await asyncio.wait({answer, disconnect}, return_when=asyncio.FIRST_COMPLETED)
        is_client_gone = not answer.done()
    finally:
        disconnect.cancel()
        if is_client_gone:
            # cancel() only requests cancellation: the task is not done yet, never read it
            answer.cancel()
            generation.abort_unfinished()
    if is_client_gone:
        return Response(status_code=499)  # nobody reads this
    return JSONResponse(answer.result())


async def _wait_for_disconnect(http_request: Request) -> None:
    while True:
        message = await http_request.receive()
        if message["type"] == "http.disconnect":
            return


def create_app(
    engine: AsyncEngine,
    model_name: str,
    api_key: str | None = None,
    limits: ServerLimits | None = None,
    reasoning_tags: str | None = "auto",
    tool_call_format: str = "auto",
) -> FastAPI:
    """The FastAPI app serving ``engine`` as model ``model_name``.

    Parameters
    ----------
    engine : AsyncEngine
        The engine; its thread starts with the app (lifespan) and stops with it, after the
        drain.
    model_name : str
        The name clients use (and the ``model_name`` label of the metrics).
    api_key : str, optional
        Every ``/v1/`` request needs ``Authorization: Bearer <api_key>`` (401 otherwise).
    limits : ServerLimits, optional
        Body size, waiting queue, drain and stall limits (defaults: `ServerLimits()`).
    reasoning_tags : str, optional
        ``"auto"`` (``<think>``/``</think>`` if the chat template has them), ``"none"`` or
        ``"START,END"``: chat answers split into ``reasoning_content`` and ``content``.
    tool_call_format : str
        ``"auto"`` (from the chat template), ``"hermes"``, ``"llama3_json"`` or ``"mistral"``
        (see :mod:`formcast.server.tool_formats`).

    The app's ``state`` holds ``engine``, ``context``, ``limits`` and ``gate`` (the
    `RequestGate` whose `RequestGate.drain` a server runs when it starts shutting down).
    Metrics go to a new `ServerMetrics` (its own registry) given to the engine.
    """
    limits = limits if limits is not None else ServerLimits()
    engine.use_metrics(ServerMetrics(model_name, engine.llm.config.max_model_len))
    context = ServingContext.of(engine, model_name, reasoning_tags, tool_call_format)
    gate = RequestGate(engine, limits)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not engine.is_alive:
            engine.start()
        yield
        await gate.drain()
        engine.shutdown()

    app = FastAPI(title="formcast", lifespan=lifespan)
    app.state.engine = engine
    app.state.context = context
    app.state.limits = limits
    app.state.gate = gate

    @app.exception_handler(APIError)
    async def on_api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(FormcastError)
    async def on_formcast_error(request: Request, exc: FormcastError) -> JSONResponse:
        return error_response(api_error_from(exc))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = NOT_FOUND if exc.status_code == 404 else INVALID_REQUEST
        return error_response(APIError(exc.status_code, str(exc.detail), kind))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error serving %s", request.url.path)
        return error_response(APIError(500, f"{type(exc).__name__}: {exc}", SERVER_ERROR))

    def model_card() -> dict[str, Any]:
        return {
            "id": model_name,
            "object": "model",
            "created": created,
            "owned_by": "formcast",
            "max_model_len": engine.llm.config.max_model_len,
        }

    created = now()

    @app.get("/health")
    async def health() -> Response:
        if not engine.is_alive:
            return error_response(APIError(503, "the engine thread is not running", SERVER_ERROR))
        if gate.is_draining:
            return error_response(APIError(503, "the server is shutting down", SERVER_ERROR))
        busy_seconds = engine.busy_seconds
        num_active = engine.num_active
        if busy_seconds is not None and busy_seconds > limits.stall_timeout_s and num_active:
            message = (
                f"the engine is stalled: its current step has run for {busy_seconds:.1f} s "
                f"(stall timeout {limits.stall_timeout_s:g} s) with {num_active} requests "
                "in flight"
            )
            return error_response(APIError(503, message, SERVER_ERROR, code="engine_stalled"))
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(engine.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> dict[str, Any]:
        context.check_model(model_id)
        return model_card()

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        return await _respond(request, ChatCompletion(context, body), gate)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        return await _respond(request, TextCompletion(context, body), gate)

    paths = {"/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions"}
    # the last added is the outermost: count everything, check the key before reading a body
    app.add_middleware(LimitRequestBody, max_body_bytes=limits.max_body_bytes)
    if api_key:
        app.add_middleware(RequireApiKey, api_key=api_key)
    app.add_middleware(CountRequests, metrics=engine.metrics, paths=paths)
    return app
