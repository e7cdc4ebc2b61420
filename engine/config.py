"""EngineConfig: the knobs of the paged-KV engine, validated on construction.

KV cache size is given either as a number of blocks (``num_kv_blocks``) or as a memory budget
(``kv_cache_memory_bytes``); when neither is set it is sized by the device: on CUDA from a
memory profile after a warm-up step, ``gpu_memory_utilization * total - peak`` (see
``formcast.engine.memory_profile``); on CPU ``max_num_seqs`` full-length sequences' worth of
blocks, capped at 2 GiB and at half the RAM available.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.errors import EngineConfigError
from formcast.grammar.limits import GrammarLimits

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


AUTO_DTYPE_ENV = "FORMCAST_DTYPE"  # what dtype="auto" means when set (the test suite: float32)


def runs_bf16_natively(device: str | torch.device) -> bool:
    """True where bfloat16 matmuls run in hardware: CUDA devices with bf16 (Ampere and later),
    CPUs with AVX512-BF16 or AMX-BF16 (``torch.cpu.get_capabilities``)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def resolve_dtype(dtype: str | torch.dtype, device: str | torch.device = "cpu") -> torch.dtype:
    """Map a dtype name (``"float32"``, ``"bfloat16"``, ``"auto"``, ...) or a torch dtype to a
    torch dtype; ``"auto"`` is ``$FORMCAST_DTYPE`` when set, else bfloat16 where ``device`` runs
    it natively (`runs_bf16_natively`) and float32 elsewhere."""
    if isinstance(dtype, str) and dtype == "auto":
        override = os.environ.get(AUTO_DTYPE_ENV)
        if override:
            if override not in _DTYPES:
                raise EngineConfigError(
                    f"${AUTO_DTYPE_ENV}={override!r} is not a dtype; use one of {sorted(_DTYPES)}"
                )
            return _DTYPES[override]
        return torch.bfloat16 if runs_bf16_natively(device) else torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES.values():
            raise EngineConfigError(f"EngineConfig.dtype={dtype} is not supported")
        return dtype
    if dtype not in _DTYPES:
        raise EngineConfigError(
            f"EngineConfig.dtype={dtype!r} is not supported; use 'auto' or one of {sorted(_DTYPES)}"
        )
    return _DTYPES[dtype]


_MIN_TRITON_BLOCK_SIZE = 16


def _resolve_device(device: str | torch.device | None) -> str:
    """A device string (``"cpu"``, ``"cuda:1"``) that exists here; ``None``: CUDA if any."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise EngineConfigError(f"EngineConfig.device={device!r} is not a device: {exc}") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise EngineConfigError(f"EngineConfig.device={device!r}: CUDA is not available")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise EngineConfigError(
                f"EngineConfig.device={device!r}: only {torch.cuda.device_count()} CUDA "
                "device(s) exist"
            )
    elif resolved.type != "cpu":
        raise EngineConfigError(f"EngineConfig.device={device!r}: use 'cpu' or 'cuda[:N]'")
    return str(resolved)


@dataclass
class EngineConfig:
    """Engine configuration.

    Parameters
    ----------
    max_num_seqs : int
        Most sequences in one step (the decode batch size).
    max_num_batched_tokens : int
        Token budget of one step (prefill chunks + decodes).
    max_model_len : int or None
        Longest sequence (prompt + output); ``None`` means the model's context length.
    block_size : int
        Tokens per KV block: a power of two, at least 16 with the Triton backend.
    num_kv_blocks : int or None
        KV cache size in blocks; overrides ``kv_cache_memory_bytes``.
    kv_cache_memory_bytes : int or None
        KV cache budget in bytes (all layers, K and V); overrides ``gpu_memory_utilization``.
    gpu_memory_utilization : float
        In (0, 1]: the share of the CUDA device's memory this engine may use (weights,
        activations and KV cache). With neither ``num_kv_blocks`` nor ``kv_cache_memory_bytes``
        set, the KV cache gets ``gpu_memory_utilization * total`` minus the peak of a warm-up
        step of ``max_num_batched_tokens`` tokens (``LLM.runner.kv_budget`` says how it was
        derived). Ignored on CPU.
    enable_prefix_caching : bool
        Reuse full KV blocks whose token prefix was already computed.
    enable_chunked_prefill : bool
        Split long prompts across steps so decodes keep flowing.
    watermark : float
        Fraction of blocks kept free when admitting new sequences, so running ones can grow.
    dtype : str or torch.dtype
        Weights and KV cache dtype: ``"auto"`` (bfloat16 where the device runs it natively:
        CUDA with bf16, CPUs with AVX512-BF16 or AMX; float32 elsewhere; ``$FORMCAST_DTYPE``
        overrides), ``"float32"``, ``"bfloat16"`` or ``"float16"``. Greedy outputs that must
        match a float32 reference need ``"float32"``.
    compile_decode : bool or None
        Run decode steps of up to ``max_num_seqs`` sequences through a forward prepared per
        batch-size bucket (`formcast.engine.decode_graphs`): CUDA graphs replayed with the
        Triton backend, ``torch.compile`` (inductor) with the torch backend. Prepared at engine
        start (``runner.decode_graphs.warm_up_seconds``: 15-20 s on 2 CPU cores for 6 buckets
        with inductor's disk cache warm, about a minute cold). None: on for CUDA, off on CPU
        to keep the start fast; on CPU it serves 1.2x the decode rate at batch 1 and 1.05x at
        batch 32 (benchmarks/RESULTS.md, "GPU-grade step"), the configuration to serve with.
    num_threads : int or None
        CPU: most torch threads of the forward pass (None: every core this process may use).
    adaptive_threads : bool
        CPU: shrink the forward's thread pool to the cores other work leaves free, re-read
        every half second (`formcast.engine.threads.ThreadGovernor`); False keeps
        ``num_threads`` fixed.
    device : str, torch.device or None
        ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device``; ``None`` picks CUDA when
        available. Kept as the device's string; a CUDA device that does not exist is refused.
    attention_backend : str or None
        ``"torch"`` or ``"triton"``; ``None`` chooses by device (CUDA -> Triton).
    jump_forward : bool or None
        Default for grammar requests: append text the grammar forces without sampling it
        (per-request override: ``add_request(..., jump_forward=...)``). ``None`` (default):
        on, except where decode steps replay CUDA graphs: a forced span is a multi-token step
        that runs the eager forward, which costs 10-40 replayed steps there (H200, RESULTS.md
        "First GPU run"), while jump-forward saves one step per forced token at most.
    overlap_masks : bool
        Fill grammar bitmasks in a worker thread while the forward pass runs (False: inline
        after the forward, for measurements).
    num_grammar_threads : int
        Threads compiling grammar specs asynchronously.
    num_grammar_workers : int
        Worker processes the grammar threads hand compiles to, under the time and memory
        budgets of ``grammar_limits`` (0: compile in the threads; ``formcast serve`` uses
        workers, see :mod:`formcast.engine.grammar_workers`).
    grammar_limits : GrammarLimits or None
        Size limits on grammar requests, checked before compiling, and the compile budgets
        (None: the defaults of `GrammarLimits`).
    speculative : SpeculativeConfig, dict or None
        Speculative decoding (n-gram, self-draft, draft model); None = off.
    """

    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int | None = None
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory_bytes: int | None = None
    gpu_memory_utilization: float = 0.9
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    watermark: float = 0.01
    dtype: str | torch.dtype = "auto"
    compile_decode: bool | None = None
    num_threads: int | None = None
    adaptive_threads: bool = True
    device: str | torch.device | None = None
    attention_backend: str | None = None
    jump_forward: bool | None = None
    overlap_masks: bool = True
    num_grammar_threads: int = 2
    num_grammar_workers: int = 0
    grammar_limits: GrammarLimits | None = None
    speculative: SpeculativeConfig | None = None

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_grammar_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise EngineConfigError(f"EngineConfig.{name}={value!r} must be an int >= 1")
        if (
            not isinstance(self.num_grammar_workers, int)
            or isinstance(self.num_grammar_workers, bool)
            or self.num_grammar_workers < 0
        ):
            raise EngineConfigError(
                f"EngineConfig.num_grammar_workers={self.num_grammar_workers!r} must be an int >= 0"
            )
        if self.grammar_limits is None:
            self.grammar_limits = GrammarLimits()
        elif not isinstance(self.grammar_limits, GrammarLimits):
            raise EngineConfigError(
                f"EngineConfig.grammar_limits must be a GrammarLimits or None, "
                f"got {type(self.grammar_limits).__name__}"
            )
        for name in ("max_model_len", "num_kv_blocks", "kv_cache_memory_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise EngineConfigError(
                    f"EngineConfig.{name}={value!r} must be None or an int >= 1"
                )
        if self.num_threads is not None and (
            not isinstance(self.num_threads, int)
            or isinstance(self.num_threads, bool)
            or self.num_threads < 1
        ):
            raise EngineConfigError(
                f"EngineConfig.num_threads={self.num_threads!r} must be None or an int >= 1"
            )
        for name in ("overlap_masks", "adaptive_threads"):
            if not isinstance(getattr(self, name), bool):
                raise EngineConfigError(
                    f"EngineConfig.{name}={getattr(self, name)!r} must be a bool"
                )
        if self.jump_forward is not None and not isinstance(self.jump_forward, bool):
            raise EngineConfigError(
                f"EngineConfig.jump_forward={self.jump_forward!r} must be None or a bool"
            )
        utilization = self.gpu_memory_utilization
        if (
            isinstance(utilization, bool)
            or not isinstance(utilization, (int, float))
            or not 0.0 < utilization <= 1.0
        ):
            raise EngineConfigError(
                f"EngineConfig.gpu_memory_utilization={utilization!r} must be a number in (0, 1]"
            )
        if not 0.0 <= self.watermark < 1.0:
            raise EngineConfigError(f"EngineConfig.watermark={self.watermark!r} must be in [0, 1)")
        if self.attention_backend not in (None, "torch", "triton"):
            raise EngineConfigError(
                f"EngineConfig.attention_backend={self.attention_backend!r}: "
                "use None, 'torch' or 'triton'"
            )
        self.speculative = SpeculativeConfig.coerce(self.speculative)
        self.device = _resolve_device(self.device)
        self.torch_dtype = resolve_dtype(self.dtype, self.device)
        if self.attention_backend is None:
            self.attention_backend = "triton" if self.device.startswith("cuda") else "torch"
        if self.compile_decode is None:
            self.compile_decode = self.device.startswith("cuda")
        elif not isinstance(self.compile_decode, bool):
            raise EngineConfigError(
                f"EngineConfig.compile_decode={self.compile_decode!r} must be None or a bool"
            )
        if self.block_size & (self.block_size - 1):
            raise EngineConfigError(
                f"EngineConfig.block_size={self.block_size} must be a power of two "
                "(KV blocks are tiled by powers of two)"
            )
        if self.attention_backend == "triton" and self.block_size < _MIN_TRITON_BLOCK_SIZE:
            raise EngineConfigError(
                f"EngineConfig.block_size={self.block_size} must be >= "
                f"{_MIN_TRITON_BLOCK_SIZE} with the Triton attention backend (its tl.dot "
                "tiles need K >= 16)"
            )

    @classmethod
    def field_names(cls) -> set[str]:
        """Names accepted as keyword arguments of ``LLM(model, **config)``."""
        return set(cls.__dataclass_fields__)
