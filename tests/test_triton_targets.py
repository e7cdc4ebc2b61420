"""Every Triton kernel compiles to PTX and a cubin for sm_80 and sm_90, without a GPU.

The suite runs Triton in the interpreter (conftest.py), which never lowers a kernel. Here a
subprocess without it calls the real launch sites on CPU tensors with each kernel replaced by
a recorder, specialises every recorded launch as ``JITFunction.run`` would, and compiles it
with ``triton.compile`` (ptxas included) for both targets: within the shared-memory limits,
and with the attention kernels' products on tensor cores (mma / wgmma) for 16-bit caches.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# not imported here: this process runs triton in the interpreter (conftest.py)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed"),
]

ROOT = Path(__file__).resolve().parents[1]
ARCHS = (80, 90)
# opt-in shared memory per block: A100 (sm_80) 163 KiB, H100 (sm_90) 227 KiB
MAX_SHARED_BYTES = {80: 163 * 1024, 90: 227 * 1024}
SUBPROCESS_TIMEOUT_S = 1500

# The files holding @triton.jit functions, and the device helpers that are not launched.
KERNEL_FILES = (
    "engine/attention/triton_backend.py",
    "samplers/triton_logits.py",
    "samplers/triton_race.py",
    "src/formcast/bitmask.py",
)
# (_max_combine / _sum_combine are triton.language.standard's combine functions, aliased)
DEVICE_HELPERS = {
    "_max_combine",
    "_sum_combine",
    "_mma",
    "_attend_tile",
    "_online_softmax_step",
}

MODEL_DTYPES = ("float32", "bfloat16", "float16")  # EngineConfig.dtype
HEAD_DIMS = (64, 128)  # SmolLM2 (9 / 3 heads); Llama / Qwen sizes (32 / 8 heads)
ATTENTION_LAUNCHES = (
    "_store_kv_kernel",
    "_paged_decode_kernel[SPLIT_KV=False][UPCAST=False]",
    "_paged_decode_kernel[SPLIT_KV=True][UPCAST=False]",
    "_split_kv_reduce_kernel",
    "_paged_span_kernel[IS_TREE=False][UPCAST=False]",
    "_paged_span_kernel[IS_TREE=True][UPCAST=False]",
)
# kernels whose QK^T and PV must run on tensor cores (mma / wgmma) with 16-bit caches
TENSOR_CORE_KERNELS = ("_paged_decode_kernel", "_paged_span_kernel")
VOCAB_SIZE = 49152  # SmolLM2
NUM_CANDIDATES = 256  # Sampler default: the race over top candidates

# case id -> (launch labels the case must record, pointer dtype of the kernel's first argument)
CASES: dict[str, tuple[tuple[str, ...], str]] = {
    **{
        f"attention-{dtype}-d{head_dim}": (ATTENTION_LAUNCHES, dtype)
        for dtype in MODEL_DTYPES
        for head_dim in HEAD_DIMS
    },
    # the sampler always hands the kernel its float32 work copy of the logits
    "mask_scale-bitmask": (("_mask_scale_kernel[HAS_BITMASK=True]",), "float32"),
    "mask_scale-nobitmask": (("_mask_scale_kernel[HAS_BITMASK=False]",), "float32"),
    "race-vocab": (("_race_kernel",), "float32"),
    "race-candidates": (("_race_kernel",), "float32"),
    # logits straight from a model (transformers / vLLM integrations): any float dtype
    **{
        f"bitmask-{dtype}-{rows}": (
            (f"apply_token_bitmask_kernel[HAS_INDICES={rows == 'indices'}]",),
            dtype,
        )
        for dtype in MODEL_DTYPES
        for rows in ("all", "indices")
    },
}
TRITON_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


# --- subprocess side: runs without TRITON_INTERPRET, so @triton.jit yields JITFunctions ---


class _Recorder:
    """Stands in for a kernel: ``kernel[grid](*args, **kwargs)`` records the launch."""

    def __init__(self, kernel: Any, launches: list[tuple[str, Any, tuple, dict]]) -> None:
        self.kernel = kernel
        self.launches = launches

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            flags = "".join(f"[{k}={v}]" for k, v in kwargs.items() if isinstance(v, bool))
            self.launches.append((self.kernel.__name__ + flags, self.kernel, args, kwargs))

        return launch


@contextmanager
def _recording(
    module: Any, names: tuple[str, ...], kernels: dict[str, Any] | None = None
) -> Iterator[list[tuple[str, Any, tuple, dict]]]:
    launches: list[tuple[str, Any, tuple, dict]] = []
    saved = {name: getattr(module, name) for name in names}
    try:
        for name in names:
            kernel = (kernels or {}).get(name, saved[name])
            setattr(module, name, _Recorder(kernel, launches))
        yield launches
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _attention_launches(dtype_name: str, head_dim: int) -> list[tuple[str, Any, tuple, dict]]:
    import torch

    from formcast.engine.attention import triton_backend
    from formcast.engine.attention.metadata import AttentionMetadata

    dtype = getattr(torch, dtype_name)
    num_q_heads, num_kv_heads = (9, 3) if head_dim == 64 else (32, 8)
    block_size, num_blocks = 16, 24  # EngineConfig.block_size default
    # two decodes, then a 6-token span on a cached prefix ending with a 4-node token tree
    ancestors = torch.tensor(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool
    )
    # (the step, decode programs to aim for)
    steps = [
        (
            AttentionMetadata.build(
                block_tables=[[0, 1], [2, 3, 4], [5, 6, 7]],
                context_lens=[20, 33, 40],
                query_lens=[1, 1, 6],
                block_size=block_size,
                device="cpu",
                for_torch_path=False,
                trees=[(2, ancestors)],
            ),
            # 2 decodes x KV heads fill this machine: one program each, no split-KV
            2 * num_kv_heads,
        ),
        # one long decode alone (the latency case): split-KV and its reduce kernel
        (
            AttentionMetadata.build(
                block_tables=[list(range(8, 24))],
                context_lens=[250],
                query_lens=[1],
                block_size=block_size,
                device="cpu",
                for_torch_path=False,
            ),
            triton_backend.DEFAULT_TARGET_PROGRAMS,
        ),
    ]
    k_cache = torch.zeros(num_kv_heads, num_blocks, block_size, head_dim, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    names = (
        "_store_kv_kernel",
        "_paged_decode_kernel",
        "_split_kv_reduce_kernel",
        "_paged_span_kernel",
    )
    with _recording(triton_backend, names) as launches:
        for meta, target_programs in steps:
            num_tokens = int(meta.query_start_loc[-1])
            q = torch.zeros(num_tokens, num_q_heads, head_dim, dtype=dtype)
            k = torch.zeros(num_tokens, num_kv_heads, head_dim, dtype=dtype)
            v = torch.zeros_like(k)
            attention = triton_backend.TritonAttention(target_programs)
            attention.forward(q, k, v, k_cache, v_cache, meta, head_dim**-0.5)
    return launches


def _mask_scale_launches(has_bitmask: bool) -> list[tuple[str, Any, tuple, dict]]:
    import torch

    from formcast.bitmask import allocate_token_bitmask
    from formcast.samplers import triton_logits

    logits = torch.zeros(4, VOCAB_SIZE, dtype=torch.float32)
    bitmask = allocate_token_bitmask(4, VOCAB_SIZE) if has_bitmask else None
    temperature = torch.full((4,), 0.7)
    with _recording(triton_logits, ("_mask_scale_kernel",)) as launches:
        triton_logits.mask_scale_logits_inplace_triton(logits, bitmask, temperature)
    return launches


def _race_launches(width: int) -> list[tuple[str, Any, tuple, dict]]:
    import torch

    from formcast.samplers import triton_race

    logits = torch.zeros(4, width, dtype=torch.float32)
    noise = torch.ones(4, width, dtype=torch.float32)  # samplers.noise draws float32
    with _recording(triton_race, ("_race_kernel",)) as launches:
        triton_race.race_argmax_triton(logits, noise)
    return launches


def _bitmask_launches(dtype_name: str, has_indices: bool) -> list[tuple[str, Any, tuple, dict]]:
    import torch

    from formcast import bitmask as module

    logits = torch.zeros(4, VOCAB_SIZE, dtype=getattr(torch, dtype_name))
    bitmask = module.allocate_token_bitmask(4, VOCAB_SIZE)
    indices = torch.tensor([0, 2], dtype=torch.int64) if has_indices else None
    kernel = module._triton_kernel()  # the launch site builds it lazily into _KERNEL
    with _recording(module, ("_KERNEL",), {"_KERNEL": kernel}) as launches:
        module.apply_token_bitmask_inplace_triton(logits, bitmask, indices)
    return launches


def _case_launches(case: str) -> list[tuple[str, Any, tuple, dict]]:
    kind, *params = case.split("-")
    if kind == "attention":
        return _attention_launches(params[0], int(params[1].removeprefix("d")))
    if kind == "mask_scale":
        return _mask_scale_launches(params[0] == "bitmask")
    if kind == "race":
        return _race_launches(VOCAB_SIZE if params[0] == "vocab" else NUM_CANDIDATES)
    if kind == "bitmask":
        return _bitmask_launches(params[0], params[1] == "indices")
    raise ValueError(f"unknown case {case!r}")


def _compile(kernel: Any, args: tuple, kwargs: dict, arch: int) -> dict[str, Any]:
    """Specialise one recorded launch as ``JITFunction.run`` does, then compile it."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(
        backend, kwargs, bound_args, specialization, options
    )
    record: dict[str, Any] = {"signature": signature}
    try:
        compiled = triton.compile(
            ASTSource(kernel, signature, constexprs, attrs), target=target, options=options.__dict__
        )
    except Exception as exc:  # reported per launch and target, the test names it
        record["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        return record
    ptx = compiled.asm.get("ptx", "")
    cubin = compiled.asm.get("cubin", b"")
    ptx_target = re.search(r"^\.target\s+(\S+)", ptx, re.MULTILINE)
    record.update(
        ptx_chars=len(ptx),
        ptx_target=ptx_target.group(1) if ptx_target else None,
        ptx_entry=f".entry {kernel.__name__}" in ptx,
        cubin_bytes=len(cubin),
        cubin_is_elf=cubin[:4] == b"\x7fELF",
        shared=compiled.metadata.shared,
        tensor_cores="mma" in ptx,  # mma.sync (sm_80) or wgmma (sm_90)
        num_warps=compiled.metadata.num_warps,
    )
    return record


def _module_kernels() -> dict[str, str]:
    """Every JITFunction the kernel modules define: name -> module."""
    from triton.runtime.jit import JITFunction

    from formcast import bitmask
    from formcast.engine.attention import triton_backend
    from formcast.samplers import triton_logits, triton_race

    found = {bitmask._triton_kernel().__name__: bitmask.__name__}
    for module in (triton_backend, triton_logits, triton_race, bitmask):
        for name, value in vars(module).items():
            if isinstance(value, JITFunction):
                found[name] = module.__name__
    return found


def _main(out_path: str) -> None:
    from triton.runtime.jit import JITFunction

    from formcast.samplers import triton_race

    if not isinstance(triton_race._race_kernel, JITFunction):
        raise RuntimeError("@triton.jit is in interpreter mode: unset TRITON_INTERPRET")
    results: dict[str, Any] = {"kernels": _module_kernels(), "launches": {}}
    for case in CASES:
        for label, kernel, args, kwargs in _case_launches(case):
            for arch in ARCHS:
                results["launches"][f"{case}/{label}/sm_{arch}"] = _compile(
                    kernel, args, kwargs, arch
                )
    Path(out_path).write_text(json.dumps(results, indent=1))


# --- pytest side ---


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Compile every recorded launch for every target once, in a subprocess."""
    tmp = tmp_path_factory.mktemp("triton_targets")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp / "cache")  # a fresh cache: every kernel really compiles
    out_path = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, __file__, str(out_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"compile subprocess failed:\n{proc.stderr[-6000:]}"
    return json.loads(out_path.read_text())


def test_kernel_files_are_the_known_ones() -> None:
    """A new @triton.jit file must be added here (and its launch site to CASES)."""
    found = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "tests")]
        for file in files:
            path = Path(folder, file)
            if file.endswith(".py") and "@triton.jit" in path.read_text(errors="replace"):
                found.add(path.relative_to(ROOT).as_posix())
    assert found == set(KERNEL_FILES)


def test_every_kernel_is_compiled(compiled: dict[str, Any]) -> None:
    launched = {key.split("/")[1].split("[")[0] for key in compiled["launches"]}
    kernels = set(compiled["kernels"]) - DEVICE_HELPERS
    assert kernels == launched, f"not compiled: {kernels - launched}"


@pytest.mark.parametrize("arch", ARCHS, ids=lambda arch: f"sm_{arch}")
@pytest.mark.parametrize(
    ("case", "label"), [(case, label) for case, (labels, _) in CASES.items() for label in labels]
)
def test_compiles_for_target(compiled: dict[str, Any], case: str, label: str, arch: int) -> None:
    key = f"{case}/{label}/sm_{arch}"
    recorded = [k for k in compiled["launches"] if k.startswith(f"{case}/")]
    assert key in compiled["launches"], f"launch not recorded; the case recorded {recorded}"
    result = compiled["launches"][key]
    assert "error" not in result, f"{key} failed to compile:\n{result['error']}"
    first_pointer = next(iter(result["signature"].values()))
    assert first_pointer == "*" + TRITON_DTYPES[CASES[case][1]]
    assert result["ptx_chars"] > 0 and result["ptx_entry"]
    assert re.fullmatch(rf"sm_{arch}a?", result["ptx_target"] or "")
    assert result["cubin_bytes"] > 0 and result["cubin_is_elf"]
    assert result["shared"] <= MAX_SHARED_BYTES[arch]
    if label.split("[")[0] in TENSOR_CORE_KERNELS and CASES[case][1] != "float32":
        assert result["tensor_cores"], f"{key}: no mma / wgmma in the PTX"


if __name__ == "__main__":
    _main(sys.argv[1])
