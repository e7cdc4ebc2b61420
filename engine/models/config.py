"""ModelConfig: the architecture facts the engine needs, read from a folder's ``config.json``.

Handles both spellings of RoPE settings: transformers >= 5 writes ``rope_parameters``
(``rope_theta``, ``rope_type`` and scaling fields together); older configs write ``rope_theta``
and a separate ``rope_scaling`` dict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formcast.errors import ModelLoadError

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a decoder-only model of the Llama / Qwen family."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] = field(default_factory=dict)
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_proj_bias: bool = False
    qk_norm: bool = False
    eos_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelConfig:
        """Read ``config.json`` (and ``generation_config.json`` for EOS ids) from ``folder``."""
        folder = Path(folder)
        try:
            raw = json.loads((folder / "config.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelLoadError(f"cannot read {folder / 'config.json'}: {exc}") from exc
        generation: dict[str, Any] = {}
        if (folder / "generation_config.json").is_file():
            generation = json.loads((folder / "generation_config.json").read_text())
        return cls.from_dict(raw, generation)

    @classmethod
    def from_dict(
        cls, raw: dict[str, Any], generation: dict[str, Any] | None = None
    ) -> ModelConfig:
        """Build from the parsed ``config.json`` dict."""
        model_type = raw.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelLoadError(
                f"model_type {model_type!r} is not supported by formcast.engine; "
                f"supported: {SUPPORTED_MODEL_TYPES}"
            )
        if raw.get("use_sliding_window") and raw.get("sliding_window"):
            raise ModelLoadError(f"{model_type}: sliding-window attention is not supported")
        if raw.get("mlp_bias"):
            raise ModelLoadError(f"{model_type}: mlp_bias=True is not supported")
        rope = dict(raw.get("rope_parameters") or {})
        legacy_scaling = raw.get("rope_scaling") or {}
        rope.update({k: v for k, v in legacy_scaling.items() if k not in rope})
        rope_theta = float(rope.pop("rope_theta", raw.get("rope_theta", 10000.0)))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        rope["rope_type"] = rope_type
        num_heads = int(raw["num_attention_heads"])
        head_dim = raw.get("head_dim") or int(raw["hidden_size"]) // num_heads
        eos = _as_ids((generation or {}).get("eos_token_id")) or _as_ids(raw.get("eos_token_id"))
        return cls(
            model_type=model_type,
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            intermediate_size=int(raw["intermediate_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=num_heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or num_heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            rope_scaling=rope,
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(raw.get("attention_bias", False)),
            o_proj_bias=model_type != "qwen2" and bool(raw.get("attention_bias", False)),
            qk_norm=model_type == "qwen3",
            eos_token_ids=eos,
        )


def _as_ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)
