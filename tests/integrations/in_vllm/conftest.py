"""vLLM's CPU build with formcast's plugin (registered by the package's entry point), on the
real SmolLM2; run in the ``.venv-vllm`` environment (``make vllm``)."""

from __future__ import annotations

import os

# vLLM reserves 92% of memory for KV by default; 1 GiB is plenty for SmolLM2 here. Its engine
# runs in a spawned process: a forked one would inherit numba's llvmlite, which vLLM's CPU
# worker cannot scan at start-up.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def vllm_folder():
    """The converted SmolLM2 folder (its config.json names the architecture vLLM needs)."""
    from formcast.engine.models.loader import resolve_model_path

    return str(resolve_model_path("smollm2-135m"))


@pytest.fixture(scope="session")
def vllm_llm(vllm_folder):
    from vllm import LLM

    return LLM(
        vllm_folder,
        dtype="float32",
        enforce_eager=True,
        max_model_len=1024,
        max_num_seqs=16,
        seed=0,
    )
