"""Build one of our models from a Hugging Face style folder and load its safetensors weights.

Checkpoint names (``model.layers.3.self_attn.q_proj.weight``) map onto our modules; separate
Q/K/V and gate/up matrices are copied into slices of our fused ones. A tied LM head reuses the
embedding. Every parameter must be written exactly once, or loading fails with the names.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from formcast.engine.models.config import ModelConfig
from formcast.engine.models.llama import LlamaForCausalLM
from formcast.engine.models.qwen import Qwen2ForCausalLM, Qwen3ForCausalLM
from formcast.errors import ModelLoadError

MODEL_CLASSES: dict[str, type[LlamaForCausalLM]] = {
    "llama": LlamaForCausalLM,
    "mistral": LlamaForCausalLM,
    "qwen2": Qwen2ForCausalLM,
    "qwen3": Qwen3ForCausalLM,
}


def safetensors_files(folder: Path) -> list[Path]:
    """The weight files of a folder (single file or sharded with an index)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / name for name in shards]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(f"{folder} has no .safetensors weights")
    return files


def build_model(
    folder: str | Path,
    config: ModelConfig,
    dtype: torch.dtype,
    device: torch.device | str,
    max_positions: int,
) -> LlamaForCausalLM:
    """Instantiate the model class for ``config.model_type`` and load the folder's weights."""
    folder = Path(folder)
    with torch.device("meta"):
        model = MODEL_CLASSES[config.model_type](config)
    model = model.to_empty(device=device).to(dtype)
    load_weights(model, safetensors_files(folder))
    model.init_rotary(max_positions, device)
    return model.eval().requires_grad_(False)


def load_weights(model: LlamaForCausalLM, files: list[Path]) -> None:
    """Copy checkpoint tensors into ``model``'s parameters (fused slices included)."""
    params = dict(model.named_parameters())
    written: set[str] = set()
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                if name.startswith("lm_head.") and model.lm_head is None:
                    continue  # tied embeddings: the embedding matrix is the head
                if "rotary_emb" in name:
                    continue
                target, rows = _target(model, name)
                if target not in params:
                    raise ModelLoadError(f"{path.name}: unexpected weight {name!r}")
                tensor = handle.get_tensor(name)
                param = params[target]
                view = param.data if rows is None else param.data[rows[0] : rows[1]]
                if view.shape != tensor.shape:
                    raise ModelLoadError(
                        f"{path.name}: weight {name!r} has shape {tuple(tensor.shape)}, "
                        f"expected {tuple(view.shape)}"
                    )
                view.copy_(tensor)
                written.add(name if rows is None else f"{target}[{rows[0]}:{rows[1]}]")
    missing = []
    for target in params:
        fused = next((f for f, _ in model.packed_modules.values() if f"{f}." in target), None)
        if fused is None:
            if target not in written:
                missing.append(target)
            continue
        offset = 0
        for size in model.shard_sizes(fused):
            if f"{target}[{offset}:{offset + size}]" not in written:
                missing.append(f"{target}[{offset}:{offset + size}]")
            offset += size
    if missing:
        raise ModelLoadError(f"checkpoint is missing weights: {missing[:8]} ({len(missing)} total)")


def _target(model: LlamaForCausalLM, name: str) -> tuple[str, tuple[int, int] | None]:
    # "model.layers.0.self_attn.k_proj.weight" -> ("model.layers.0.self_attn.qkv_proj.weight",
    # rows of the K slice)
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part in model.packed_modules:
            fused, shard = model.packed_modules[part]
            sizes = model.shard_sizes(fused)
            start = sum(sizes[:shard])
            return ".".join(parts[:i] + [fused] + parts[i + 1 :]), (start, start + sizes[shard])
    return name, None
