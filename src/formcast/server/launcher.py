"""Start the server: blocking (``formcast serve``) or in a background thread (tests, benchmarks).

Both load the model into an `LLM`, wrap it in an `AsyncEngine` and run uvicorn on the app,
through `DrainingServer`: when uvicorn starts shutting down (SIGTERM, Ctrl-C, `stop`), the
app's `RequestGate.drain` runs beside uvicorn's own wait for open connections, so in-flight
requests get the drain timeout to finish and are then aborted cleanly; uvicorn's hard
cancel comes only ``_ABORT_GRACE_S`` later, as a backstop.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

from formcast.engine.llm_engine import LLM
from formcast.errors import FormcastError
from formcast.server.app import create_app
from formcast.server.async_engine import AsyncEngine
from formcast.server.limits import RequestGate, ServerLimits

# idle keep-alive connections are closed by the server after this many seconds: longer than
# clients keep them (httpx, under the openai client: 5 s), so a client never reuses a
# connection the server is closing at the same moment (uvicorn's default is also 5 s: a
# race that surfaced as ReadError under load, when a pooled connection sat idle ~5 s)
KEEP_ALIVE_S = 30
# after the drain aborted what was left, how long uvicorn still waits for those responses
# (error events, 503 bodies) to go out before it cancels their tasks
_ABORT_GRACE_S = 5.0


class ServerStartError(FormcastError, RuntimeError):
    """uvicorn did not start serving (port in use, bad host...)."""


class DrainingServer(uvicorn.Server):
    """A uvicorn server that drains the app's requests when it shuts down.

    Parameters
    ----------
    config : uvicorn.Config
        uvicorn's configuration (its ``timeout_graceful_shutdown`` is the backstop).
    gate : RequestGate
        The app's gate (``app.state.gate``); its `RequestGate.drain` starts with the shutdown.
    """

    def __init__(self, config: uvicorn.Config, gate: RequestGate) -> None:
        super().__init__(config)
        self.gate = gate

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Drain the app while uvicorn stops accepting and waits for connections."""
        drain = asyncio.ensure_future(self.gate.drain())
        try:
            await super().shutdown(sockets)
        finally:
            if not drain.done():
                drain.cancel()


def uvicorn_config(app: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for a formcast app (keep-alive and shutdown timeouts)."""
    return uvicorn.Config(
        app,
        timeout_graceful_shutdown=int(limits.drain_timeout_s + _ABORT_GRACE_S + 0.999),
        timeout_keep_alive=KEEP_ALIVE_S,
        **options,
    )


def build_engine(model: str, **engine_config: Any) -> AsyncEngine:
    """Load ``model`` (alias, HF folder or .gguf) with `EngineConfig` options."""
    return AsyncEngine(LLM(model, **engine_config))


def serve(
    model: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    log_level: str = "info",
    api_key: str | None = None,
    limits: ServerLimits | None = None,
    reasoning_tags: str | None = "auto",
    tool_call_format: str = "auto",
    **engine_config: Any,
) -> None:
    """Serve ``model`` on ``host:port`` until interrupted (Ctrl-C / SIGTERM: drain, then stop).

    With ``api_key``, ``/v1/`` requests need ``Authorization: Bearer <api_key>``;
    ``limits`` sets the body, queue, drain and stall limits (`ServerLimits`);
    ``reasoning_tags`` and ``tool_call_format`` as `create_app` reads them.

    Raises
    ------
    ServerStartError
        uvicorn could not start (the reason is in its log).
    """
    limits = limits if limits is not None else ServerLimits()
    engine = build_engine(model, **engine_config)
    app = create_app(
        engine,
        served_model_name or str(model),
        api_key=api_key,
        limits=limits,
        reasoning_tags=reasoning_tags,
        tool_call_format=tool_call_format,
    )
    config = uvicorn_config(app, limits, host=host, port=port, log_level=log_level)
    server = DrainingServer(config, app.state.gate)
    server.run()
    if not server.started:
        raise ServerStartError(f"the server did not start on {host}:{port} (see the log above)")


class BackgroundServer:
    """A server on a free loopback port, run by uvicorn in a daemon thread.

    Parameters
    ----------
    engine : AsyncEngine
        The engine to serve (its thread starts with the app).
    model_name : str
        The name clients use.
    host : str
        Interface to bind (port chosen by the OS).
    api_key : str, optional
        Require ``Authorization: Bearer <api_key>`` on ``/v1/`` requests.
    limits : ServerLimits, optional
        Body size, waiting queue, drain and stall limits.
    reasoning_tags : str, optional
        As `create_app` reads them (``"auto"``, ``"none"``, ``"START,END"``).
    tool_call_format : str, optional
        As `create_app` reads it (``"auto"``, ``"hermes"``, ``"llama3_json"``, ``"mistral"``).

    Examples
    --------
    >>> with BackgroundServer(build_engine("smollm2-135m"), "smollm2-135m") as server:
    ...     client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="none")
    """

    def __init__(
        self,
        engine: AsyncEngine,
        model_name: str,
        host: str = "127.0.0.1",
        api_key: str | None = None,
        limits: ServerLimits | None = None,
        reasoning_tags: str | None = "auto",
        tool_call_format: str = "auto",
    ) -> None:
        self.engine = engine
        self.limits = limits if limits is not None else ServerLimits()
        self.app = create_app(
            engine,
            model_name,
            api_key=api_key,
            limits=self.limits,
            reasoning_tags=reasoning_tags,
            tool_call_format=tool_call_format,
        )
        self.gate: RequestGate = self.app.state.gate
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, 0))
        self.host, self.port = self.socket.getsockname()[:2]
        self.server = DrainingServer(
            uvicorn_config(self.app, self.limits, log_level="warning"), self.gate
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> BackgroundServer:
        """Start serving; returns once uvicorn accepts connections."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the formcast server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop uvicorn as SIGTERM would: drain (up to the drain timeout), abort what is left,
        stop the engine thread; returns once all of that is done."""
        self.server.should_exit = True
        self.thread.join(self.limits.drain_timeout_s + _ABORT_GRACE_S + 30)
        self.socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
