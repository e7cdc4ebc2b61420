"""Generation: the engine requests of one HTTP request, started together and read as one stream.

A chat request is one engine request (``n`` completions); a text completion with a batch of
prompts is one engine request per prompt, sharing one event queue. `start` submits them and
waits until the engine accepted all (or raises the first refusal as an `APIError` after
aborting the others); `events` yields deltas and outputs until every request is done;
`abort_unfinished` is what a client disconnect calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from formcast.server.async_engine import AsyncEngine, EngineRequest
from formcast.server.errors import APIError


class Generation:
    """The engine requests serving one HTTP request.

    Parameters
    ----------
    engine : AsyncEngine
        The engine to submit to.
    requests : list[EngineRequest]
        Requests built on one shared ``events`` queue (see `new_queue`).
    """

    def __init__(self, engine: AsyncEngine, requests: list[EngineRequest]) -> None:
        self.engine = engine
        self.requests = requests
        self.events_queue = requests[0].events
        self._backlog: list[tuple[str, EngineRequest, Any]] = []
        self._done: set[str] = set()

    async def start(self) -> None:
        """Submit every request; return once all are accepted.

        Raises
        ------
        APIError
            The first refusal (prompt too long, invalid grammar for this vocabulary...).
        """
        if not self.engine.is_alive:
            raise APIError(503, "the engine is not running", "server_error")
        for request in self.requests:
            self.engine.submit(request)
        accepted: set[str] = set()
        error: APIError | None = None
        while len(accepted) + len(self._done) < len(self.requests):
            kind, request, payload = await self.events_queue.get()
            if kind == "accepted":
                accepted.add(request.request_id)
            elif kind == "error":
                self._done.add(request.request_id)
                error = error or payload
            else:
                self._backlog.append((kind, request, payload))
        if error is not None:
            self.abort_unfinished()
            raise error

    async def events(self) -> AsyncIterator[tuple[str, EngineRequest, Any]]:
        """Yield ``("delta", request, StreamDelta)`` and ``("done", request, RequestOutput)``.

        Raises
        ------
        APIError
            The engine failed while generating.
        """
        backlog, self._backlog = self._backlog, []
        for event in backlog:
            if event[0] == "done":
                self._done.add(event[1].request_id)
            yield event
        while len(self._done) < len(self.requests):
            kind, request, payload = await self.events_queue.get()
            if kind in ("done", "error"):
                self._done.add(request.request_id)
            if kind == "error":
                self.abort_unfinished()
                raise payload
            yield kind, request, payload

    @property
    def is_finished(self) -> bool:
        """True once every request is done."""
        return len(self._done) == len(self.requests)

    def abort_unfinished(self) -> None:
        """Abort every request that is not done (client gone, or a sibling failed)."""
        for request in self.requests:
            if request.request_id not in self._done:
                self.engine.abort(request.request_id)
                self._done.add(request.request_id)

    async def outputs(self) -> dict[str, Any]:
        """Run to completion; the `RequestOutput` of each request by request id."""
        outputs = {}
        async for kind, request, payload in self.events():
            if kind == "done":
                outputs[request.request_id] = payload
        return outputs


def new_queue() -> asyncio.Queue:
    """An event queue for the requests of one `Generation`."""
    return asyncio.Queue()
