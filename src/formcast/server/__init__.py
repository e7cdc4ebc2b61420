"""OpenAI-compatible HTTP server over the formcast engine.

``formcast serve --model smollm2-135m --port 8000`` runs it; `create_app` builds the FastAPI
app around an `AsyncEngine`; `BackgroundServer` runs one in a thread (tests, benchmarks).
"""

from formcast.server.app import create_app
from formcast.server.async_engine import AsyncEngine
from formcast.server.launcher import BackgroundServer, build_engine, serve
from formcast.server.limits import ServerLimits

__all__ = [
    "AsyncEngine",
    "BackgroundServer",
    "ServerLimits",
    "build_engine",
    "create_app",
    "serve",
]
