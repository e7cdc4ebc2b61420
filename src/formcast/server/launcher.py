"""Start the server: blocking (``formcast serve``) or in a background thread (tests, benchmarks).

Both load the model into an `LLM`, wrap it in an `AsyncEngine` and run uvicorn on the app.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from formcast.engine.llm_engine import LLM
from formcast.server.app import create_app
from formcast.server.async_engine import AsyncEngine

# idle keep-alive connections are closed by the server after this many seconds: longer than
# clients keep them (httpx, under the openai client: 5 s), so a client never reuses a
# connection the server is closing at the same moment (uvicorn's default is also 5 s: a
# race that surfaced as ReadError under load, when a pooled connection sat idle ~5 s)
KEEP_ALIVE_S = 30


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
    **engine_config: Any,
) -> None:
    """Serve ``model`` on ``host:port`` until interrupted (Ctrl-C / SIGTERM); with
    ``api_key``, ``/v1/`` requests need ``Authorization: Bearer <api_key>``."""
    engine = build_engine(model, **engine_config)
    app = create_app(engine, served_model_name or str(model), api_key=api_key)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


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
    ) -> None:
        self.engine = engine
        self.app = create_app(engine, model_name, api_key=api_key)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, 0))
        self.host, self.port = self.socket.getsockname()[:2]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            timeout_graceful_shutdown=5,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self.server = uvicorn.Server(config)
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
        """Stop uvicorn (the app's shutdown stops the engine thread)."""
        self.server.should_exit = True
        self.thread.join(30)
        self.socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
