"""Server tests: one formcast server (real SmolLM2) on a loopback port for the whole session."""

from __future__ import annotations

import pytest
from server_helpers import MODEL


@pytest.fixture(scope="session")
def server():
    """A running server: ``base_url``, ``engine`` (the AsyncEngine) and ``port``."""
    from formcast.server import BackgroundServer, build_engine

    engine = build_engine(
        MODEL, max_num_seqs=64, max_model_len=1024, num_kv_blocks=512, num_grammar_workers=1
    )
    with BackgroundServer(engine, MODEL) as running:
        yield running


@pytest.fixture(scope="session")
def client(server):
    """The official OpenAI client pointed at the server."""
    import openai

    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
