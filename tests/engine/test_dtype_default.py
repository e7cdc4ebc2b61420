"""EngineConfig(dtype="auto"): bfloat16 where the hardware runs it natively, float32 elsewhere;
the bf16 engine on the real SmolLM2 writes valid constrained output."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from formcast.engine.config import EngineConfig, resolve_dtype, runs_bf16_natively
from formcast.errors import EngineConfigError


@pytest.fixture
def no_dtype_override(monkeypatch):
    monkeypatch.delenv("FORMCAST_DTYPE", raising=False)


def test_auto_follows_the_cpu_capabilities(no_dtype_override):
    capabilities = torch.cpu.get_capabilities()
    is_native = bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    assert runs_bf16_natively("cpu") is is_native
    expected = torch.bfloat16 if is_native else torch.float32
    assert resolve_dtype("auto", "cpu") == expected
    assert EngineConfig(device="cpu").torch_dtype == expected  # "auto" is the default


def test_auto_without_native_bf16_is_float32(no_dtype_override, monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True})
    assert resolve_dtype("auto", "cpu") == torch.float32


def test_explicit_dtypes_and_the_override(monkeypatch):
    assert EngineConfig(device="cpu", dtype="float32").torch_dtype == torch.float32
    assert EngineConfig(device="cpu", dtype=torch.bfloat16).torch_dtype == torch.bfloat16
    monkeypatch.setenv("FORMCAST_DTYPE", "bfloat16")
    assert EngineConfig(device="cpu").torch_dtype == torch.bfloat16
    monkeypatch.setenv("FORMCAST_DTYPE", "int8")
    with pytest.raises(EngineConfigError, match="FORMCAST_DTYPE"):
        EngineConfig(device="cpu")
    with pytest.raises(EngineConfigError, match="'auto'"):
        EngineConfig(device="cpu", dtype="double")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_num_threads_is_checked(bad):
    with pytest.raises(EngineConfigError, match="num_threads"):
        EngineConfig(device="cpu", num_threads=bad)


@pytest.mark.skipif(not runs_bf16_natively("cpu"), reason="bf16 is not the default here")
def test_default_engine_is_bf16_and_its_json_is_valid(no_dtype_override, smollm2_vocab):
    from formcast.engine.llm_engine import LLM
    from formcast.grammar.json_schema.compile import compile_json_schema
    from formcast.samplers import SamplingParams

    llm = LLM("smollm2-135m", device="cpu", num_kv_blocks=256, max_num_seqs=8)
    assert llm.runner.dtype == torch.bfloat16
    assert llm.runner.kv_cache.dtype == torch.bfloat16
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    }
    grammar = compile_json_schema(schema, smollm2_vocab)
    prompts = [f"Describe person {i} as JSON." for i in range(6)]
    params = SamplingParams(temperature=0.8, seed=3, max_tokens=96)
    outputs = llm.generate(prompts, params, grammar=grammar)
    for out in outputs:
        jsonschema.validate(json.loads(out.outputs[0].text), schema)
