"""The server's protective limits: body size, waiting queue, graceful drain, engine stall.

`ServerLimits` holds them:

- body size: a body larger than ``max_body_bytes`` is a 413 before anything parses it; the
  limit is checked on the declared ``Content-Length`` and again on the bytes as they arrive
  (a chunked body has no length to trust);
- waiting queue: a generation request that arrives while ``max_waiting_requests`` requests
  wait (admitted but not yet computed by a step: compiling their grammar, queued for the
  engine thread, or in the scheduler's waiting queue) is a 429 ``rate_limit_exceeded`` with
  ``Retry-After``, refused before any grammar compile or engine work;
- drain: on shutdown (`RequestGate.drain`, run by the launcher's uvicorn server when it
  starts shutting down, and again at the end of the lifespan) new generation requests are
  503s, in-flight ones get ``drain_timeout_s`` seconds to finish, then every one left is
  aborted (a stream ends with an error event and ``[DONE]``, a non-streaming request gets a
  503);
- stall: ``/health`` is a 503 naming the stall when the engine thread has requests and its
  current step has run for more than ``stall_timeout_s`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from formcast.errors import FormcastError
from formcast.server.async_engine import AsyncEngine
from formcast.server.errors import INVALID_REQUEST, SERVER_ERROR, APIError

logger = logging.getLogger("formcast.server")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_WAITING_REQUESTS = 512
# below Kubernetes' default 30 s termination grace period, so the abort still runs in time
DEFAULT_DRAIN_TIMEOUT_S = 20.0
DEFAULT_STALL_TIMEOUT_S = 60.0
RETRY_AFTER_S = 1  # what a 429 tells the client to wait before retrying
_DRAIN_POLL_S = 0.05


class ServerConfigError(FormcastError, ValueError):
    """A server limit with an unusable value."""


@dataclass(frozen=True)
class ServerLimits:
    """The server's protective limits (see the module docstring).

    Parameters
    ----------
    max_body_bytes : int
        Largest request body accepted (413 above).
    max_waiting_requests : int
        Most generation requests waiting to be computed at once (429 above).
    drain_timeout_s : float
        On shutdown, how long in-flight requests may still run before they are aborted.
    stall_timeout_s : float
        ``/health`` reports a stall when an engine step with requests has run this long.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_waiting_requests: int = DEFAULT_MAX_WAITING_REQUESTS
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ServerConfigError(f"max_body_bytes must be at least 1, got {self.max_body_bytes}")
        if self.max_waiting_requests < 1:
            raise ServerConfigError(
                f"max_waiting_requests must be at least 1, got {self.max_waiting_requests}"
            )
        if self.drain_timeout_s < 0:
            raise ServerConfigError(f"drain_timeout_s must be >= 0, got {self.drain_timeout_s}")
        if self.stall_timeout_s <= 0:
            raise ServerConfigError(f"stall_timeout_s must be > 0, got {self.stall_timeout_s}")


class QueueFullError(APIError):
    """The 429 of a request refused because too many requests wait (with ``Retry-After``)."""

    def __init__(self, num_waiting: int, max_waiting: int) -> None:
        super().__init__(
            429,
            f"the server is overloaded: {num_waiting} requests are waiting to be computed "
            f"(limit {max_waiting}); retry after {RETRY_AFTER_S} s",
            "requests",
            code="rate_limit_exceeded",
        )
        self.headers = {"Retry-After": str(RETRY_AFTER_S)}


def error_response(error: APIError) -> JSONResponse:
    """The JSON response of an `APIError` (with its ``headers``, if it has any)."""
    return JSONResponse(
        error.body(), status_code=error.status, headers=getattr(error, "headers", None)
    )


def shutting_down_error() -> APIError:
    """The 503 of a generation request that arrives while the server drains."""
    return APIError(503, "the server is shutting down and takes no new requests", SERVER_ERROR)


class LimitRequestBody:
    """ASGI middleware: a body over ``max_body_bytes`` is a 413 before the app reads it.

    A declared ``Content-Length`` over the limit is refused at once (nothing is read); other
    bodies are read here as they arrive and refused as soon as they pass the limit (a chunked
    body declares no length). A body within the limit is handed to the app in one message;
    later ``receive`` calls (disconnect watches) reach the server as before. The server
    (uvicorn) reads and discards the rest of a refused body, so the client gets the 413.
    """

    def __init__(self, app: Any, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _too_large(self, what: str) -> JSONResponse:
        return error_response(
            APIError(
                413,
                f"the request body is too large: {what}, and this server accepts at most "
                f"{self.max_body_bytes} bytes",
                INVALID_REQUEST,
                code="request_too_large",
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            too_large = self._too_large(f"Content-Length is {int(declared)} bytes")
            await too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        num_bytes = 0
        is_more = True
        while is_more:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending it all
                return
            chunk = message.get("body", b"")
            num_bytes += len(chunk)
            if num_bytes > self.max_body_bytes:
                too_large = self._too_large(f"more than {self.max_body_bytes} bytes were sent")
                await too_large(scope, receive, send)
                return
            chunks.append(chunk)
            is_more = message.get("more_body", False)
        body: bytes | None = b"".join(chunks)

        async def replay() -> Message:
            nonlocal body
            if body is None:
                return await receive()
            message = {"type": "http.request", "body": body, "more_body": False}
            body = None
            return message

        await self.app(scope, replay, send)


class RequestGate:
    """Admission of generation requests: the waiting-queue limit and the shutdown drain.

    Lives on the event loop (no locks): ``num_admitting`` counts requests between admission
    and the engine's acceptance (grammar compile, command queue); after that the engine
    thread's ``num_waiting`` snapshot counts them while they wait. ``num_in_flight`` counts
    admitted requests until their response is fully sent.
    """

    def __init__(self, engine: AsyncEngine, limits: ServerLimits) -> None:
        self.engine = engine
        self.limits = limits
        self.is_draining = False
        self.num_admitting = 0
        self.num_in_flight = 0

    @property
    def num_waiting(self) -> int:
        """Requests admitted and not yet computed by an engine step."""
        return self.num_admitting + self.engine.num_waiting

    def enter(self) -> None:
        """Admit one request (it must call `leave` once answered).

        Raises
        ------
        APIError
            503 while draining; `QueueFullError` (429) when the waiting queue is full.
        """
        if self.is_draining:
            raise shutting_down_error()
        num_waiting = self.num_waiting
        if num_waiting >= self.limits.max_waiting_requests:
            raise QueueFullError(num_waiting, self.limits.max_waiting_requests)
        self.num_in_flight += 1

    def leave(self) -> None:
        """The admitted request has been answered (or abandoned)."""
        self.num_in_flight -= 1

    @contextlib.contextmanager
    def admitting(self) -> Iterator[None]:
        """Count the request as waiting while the body of the ``with`` runs."""
        self.num_admitting += 1
        try:
            yield
        finally:
            self.num_admitting -= 1

    async def drain(self) -> None:
        """Refuse new requests; give in-flight ones ``drain_timeout_s`` to finish; then fail
        the rest (streams end with an error event, others get a 503). Safe to call twice."""
        self.is_draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.drain_timeout_s
        while self.num_in_flight and loop.time() < deadline:
            await asyncio.sleep(_DRAIN_POLL_S)
        if self.num_in_flight:
            logger.warning(
                "drain timeout (%g s): aborting %d requests in flight",
                self.limits.drain_timeout_s,
                self.num_in_flight,
            )
            self.engine.abort_all(
                APIError(
                    503,
                    "the server is shutting down: the request did not finish within the "
                    f"drain timeout of {self.limits.drain_timeout_s:g} s",
                    SERVER_ERROR,
                )
            )
