"""API tests: one real SmolLM2 model for the whole session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model():
    """The embedded SmolLM2-135M-Instruct behind the public API (small KV cache)."""
    import formcast

    return formcast.load("smollm2-135m", max_num_seqs=8, num_kv_blocks=384)
