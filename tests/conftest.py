"""Shared test setup: offline hubs, and the real SmolLM2 tokenizer loaded once per session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No GPU in CI: Triton kernels run in the interpreter, and must be set up so before any
# module imports triton in compiled mode.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The real SmolLM2-135M-Instruct tokenizer (converted from the embedded GGUF once)."""
    from formcast.engine.loader import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer):
    """The exact-bytes vocabulary of the real SmolLM2 tokenizer."""
    from formcast.grammar.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(smollm2_tokenizer)
