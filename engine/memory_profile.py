"""KV cache sizing: from a memory profile after a warm-up step (CUDA), or a RAM-aware cap (CPU).

On CUDA, as vLLM does: once the weights are loaded, the runner runs one warm-up step of
``max_num_batched_tokens`` dummy tokens on a temporary KV cache (`warm_up_step`), reads the
peak memory it reached (`MemoryProfile`), and gives the KV cache what is left of the device's
``gpu_memory_utilization`` share::

    peak    = (torch peak allocated during the warm-up - torch allocated before the weights)
              - temporary KV cache bytes
              + non-torch increase (CUDA context, cuBLAS / Triton modules: the growth of the
                device's used memory not explained by torch's reserved pool)
    kv      = floor(utilization * total) - peak
    blocks  = kv // (bytes per block, the speculative draft's share included)

``peak`` therefore counts the weights, the step's activations, the logits and one sampler
pass; not counted: CUDA graph pools captured after sizing, memory of other engines built
later in the same process. Other processes' memory is not this engine's to use: when the
device had less free memory before the weights loaded than ``utilization * total``, sizing is
refused (lower ``gpu_memory_utilization`` or free the device), as vLLM refuses.

On CPU no profile is taken: the cache holds ``max_num_seqs`` full-length sequences, capped at
`DEFAULT_CPU_KV_BYTES` and at `CPU_KV_RAM_FRACTION` of the RAM available (``MemAvailable``)
once the weights are loaded.

The arithmetic (`profiled_kv_budget`, `cpu_kv_budget`, `engine_peak_bytes`) is pure, so it is
tested with fabricated numbers; `measure_cuda_profile` reads the device around `warm_up_step`,
which itself runs on any device.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from formcast.bitmask import allocate_token_bitmask
from formcast.engine.config import EngineConfig
from formcast.engine.models.config import ModelConfig
from formcast.engine.scheduler import ScheduledSeq
from formcast.engine.sequence import Sequence
from formcast.errors import EngineConfigError
from formcast.samplers import Sampler, SamplingBatch, SamplingParams

if TYPE_CHECKING:
    from formcast.engine.model_runner import ModelRunner

logger = logging.getLogger(__name__)

DEFAULT_CPU_KV_BYTES = 2 << 30
CPU_KV_RAM_FRACTION = 0.5
_GIB = float(1 << 30)


@dataclass(frozen=True)
class MemoryProfile:
    """What one warm-up step on a CUDA device measured.

    Parameters
    ----------
    total_bytes : int
        The device's memory.
    free_before_bytes : int
        Free device memory before the weights loaded (other processes, other engines and the
        CUDA context already subtracted).
    peak_bytes : int
        This engine's peak without its KV cache (see `engine_peak_bytes`).
    """

    total_bytes: int
    free_before_bytes: int
    peak_bytes: int


@dataclass(frozen=True)
class KVBudget:
    """How the KV cache size was chosen (``ModelRunner.kv_budget``).

    Parameters
    ----------
    source : str
        ``"num_kv_blocks"`` or ``"kv_cache_memory_bytes"`` (explicit), ``"profile"`` (CUDA
        memory profile) or ``"cpu_default"`` (CPU cap).
    num_blocks : int
        KV blocks in the cache.
    bytes_per_block : int
        Bytes one block costs (all layers, K and V; the speculative draft's share included).
    utilization : float or None
        ``gpu_memory_utilization`` (profile only).
    total_bytes : int or None
        Device memory (profile) or RAM available after the weights loaded (CPU default).
    peak_bytes : int or None
        The engine's peak usage without its KV cache (profile only).
    """

    source: str
    num_blocks: int
    bytes_per_block: int
    utilization: float | None = None
    total_bytes: int | None = None
    peak_bytes: int | None = None

    @property
    def kv_bytes(self) -> int:
        """Bytes the cache takes: ``num_blocks * bytes_per_block``."""
        return self.num_blocks * self.bytes_per_block

    def describe(self) -> str:
        """One line: the size chosen and how it was derived."""
        size = f"{self.num_blocks} KV blocks ({self.kv_bytes / _GIB:.2f} GiB)"
        if self.source == "profile":
            return (
                f"{size} = {self.utilization} x {self.total_bytes / _GIB:.2f} GiB device memory "
                f"- {self.peak_bytes / _GIB:.2f} GiB peak (weights + warm-up step), "
                f"{self.bytes_per_block} bytes per block"
            )
        if self.source == "cpu_default":
            available = (
                "unknown RAM available"
                if self.total_bytes is None
                else f"{self.total_bytes / _GIB:.2f} GiB RAM available"
            )
            return (
                f"{size}: max_num_seqs full-length sequences, capped at "
                f"{DEFAULT_CPU_KV_BYTES / _GIB:.0f} GiB and {CPU_KV_RAM_FRACTION} x {available}"
            )
        return f"{size} from EngineConfig.{self.source}"


def engine_peak_bytes(
    *,
    torch_peak_bytes: int,
    torch_before_bytes: int,
    temporary_bytes: int,
    used_before_bytes: int,
    used_after_bytes: int,
    reserved_before_bytes: int,
    reserved_after_bytes: int,
) -> int:
    """The engine's peak device usage without its KV cache.

    Parameters
    ----------
    torch_peak_bytes : int
        ``torch.cuda.max_memory_allocated`` over the warm-up (stats reset after the weights
        loaded, so the transient copies of loading do not count; the weights stay allocated
        and do).
    torch_before_bytes : int
        ``torch.cuda.memory_allocated`` before the weights loaded (other engines' tensors).
    temporary_bytes : int
        The temporary KV cache of the warm-up, allocated during it and freed after.
    used_before_bytes, used_after_bytes : int
        ``total - free`` from ``torch.cuda.mem_get_info`` before the weights and after the
        warm-up.
    reserved_before_bytes, reserved_after_bytes : int
        ``torch.cuda.memory_reserved`` at the same two moments.

    Returns
    -------
    int
        torch's peak increase minus the temporary cache, plus the non-torch increase (used
        memory that grew beyond torch's reserved pool: context, library workspaces, modules).
    """
    torch_increase = torch_peak_bytes - torch_before_bytes - temporary_bytes
    non_torch_increase = max(
        0, (used_after_bytes - used_before_bytes) - (reserved_after_bytes - reserved_before_bytes)
    )
    return max(0, torch_increase) + non_torch_increase


def profiled_kv_budget(
    profile: MemoryProfile,
    utilization: float,
    bytes_per_block: int,
    reserved_bytes: int = 0,
) -> KVBudget:
    """KV blocks from a CUDA memory profile: ``floor(utilization * total) - peak``.

    Parameters
    ----------
    profile : MemoryProfile
        The warm-up's measurement.
    utilization : float
        ``EngineConfig.gpu_memory_utilization``, in (0, 1].
    bytes_per_block : int
        Bytes one block costs (the speculative draft's share included).
    reserved_bytes : int
        Memory set aside before the cache (a separate draft model's weights).

    Raises
    ------
    EngineConfigError
        The device had less free memory before loading than the share asked for, or the
        share leaves no room for one block.
    """
    requested = int(utilization * profile.total_bytes)
    if profile.free_before_bytes < requested:
        raise EngineConfigError(
            f"EngineConfig.gpu_memory_utilization={utilization} asks for "
            f"{requested / _GIB:.2f} GiB of the device's {profile.total_bytes / _GIB:.2f} GiB, "
            f"but only {profile.free_before_bytes / _GIB:.2f} GiB were free before the weights "
            "loaded (other processes or engines hold the rest); lower gpu_memory_utilization "
            "or free the device"
        )
    kv_bytes = requested - profile.peak_bytes - reserved_bytes
    num_blocks = kv_bytes // bytes_per_block if kv_bytes > 0 else 0
    if num_blocks < 1:
        raise EngineConfigError(
            f"EngineConfig.gpu_memory_utilization={utilization} of "
            f"{profile.total_bytes / _GIB:.2f} GiB leaves no room for the KV cache: the weights "
            f"and a warm-up step peaked at {profile.peak_bytes / _GIB:.2f} GiB"
            + (f" (+{reserved_bytes / _GIB:.2f} GiB draft weights)" if reserved_bytes else "")
            + f" and one block needs {bytes_per_block} bytes; raise gpu_memory_utilization, "
            "lower max_num_batched_tokens, or set num_kv_blocks / kv_cache_memory_bytes"
        )
    return KVBudget(
        source="profile",
        num_blocks=int(num_blocks),
        bytes_per_block=bytes_per_block,
        utilization=utilization,
        total_bytes=profile.total_bytes,
        peak_bytes=profile.peak_bytes + reserved_bytes,
    )


def cpu_kv_budget(wanted_bytes: int, available_bytes: int | None, bytes_per_block: int) -> KVBudget:
    """The CPU default: ``min(wanted, DEFAULT_CPU_KV_BYTES, CPU_KV_RAM_FRACTION * available)``.

    Parameters
    ----------
    wanted_bytes : int
        ``max_num_seqs`` full-length sequences' worth of blocks.
    available_bytes : int or None
        RAM available now (None: unknown, only the fixed cap applies).
    bytes_per_block : int
        Bytes one block costs.

    Raises
    ------
    EngineConfigError
        The available RAM holds no block.
    """
    budget = min(wanted_bytes, DEFAULT_CPU_KV_BYTES)
    if available_bytes is not None:
        budget = min(budget, int(CPU_KV_RAM_FRACTION * available_bytes))
    num_blocks = budget // bytes_per_block
    if num_blocks < 1:
        raise EngineConfigError(
            f"only {available_bytes} bytes of RAM are available: the KV cache would hold no "
            f"block ({bytes_per_block} bytes each); set num_kv_blocks or free memory"
        )
    return KVBudget(
        source="cpu_default",
        num_blocks=int(num_blocks),
        bytes_per_block=bytes_per_block,
        total_bytes=available_bytes,
    )


def available_ram_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (Linux), else available pages; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def kv_bytes_per_token(model_config: ModelConfig, dtype: torch.dtype) -> int:
    """KV bytes of one token across all layers: ``layers * 2 * kv_heads * head_dim * size``."""
    element = torch.empty(0, dtype=dtype).element_size()
    mc = model_config
    return mc.num_hidden_layers * 2 * mc.num_key_value_heads * mc.head_dim * element


def draft_reservation(config: EngineConfig, model_config: ModelConfig) -> tuple[int, int]:
    """What a speculative draft adds: ``(KV bytes per block, weight bytes)``.

    The draft runners size their caches with the target's block count (one shadow block per
    target block): a self-draft's ``draft_num_layers`` layers share the target's weights; a
    draft model brings its own weights too (counted from its safetensors headers).
    """
    spec = config.speculative
    if spec is None or spec.method not in ("self_draft", "draft_model"):
        return 0, 0
    if spec.method == "self_draft":
        num_layers = spec.draft_num_layers or max(1, model_config.num_hidden_layers // 4)
        draft = dataclasses.replace(model_config, num_hidden_layers=num_layers)
        return kv_bytes_per_token(draft, config.torch_dtype) * config.block_size, 0
    from safetensors import safe_open

    from formcast.engine.models.loader import resolve_model_path
    from formcast.engine.models.weights import safetensors_files

    folder = Path(resolve_model_path(spec.draft_model))
    draft = ModelConfig.from_folder(folder)
    num_params = 0
    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                shape = handle.get_slice(name).get_shape()
                num_params += int(torch.Size(shape).numel())
    element = torch.empty(0, dtype=config.torch_dtype).element_size()
    return kv_bytes_per_token(draft, config.torch_dtype) * config.block_size, num_params * element


def warm_up_spans(
    num_tokens: int, num_seqs: int, max_model_len: int, logits_per_span: int
) -> list[tuple[int, int]]:
    """``(span length, logit rows)`` of the warm-up step: the largest step the scheduler makes.

    ``min(num_seqs, num_tokens)`` spans: one token each, the remaining tokens then filling
    spans up to ``max_model_len`` (a long prefill chunk: the largest attention), each span
    asking for ``min(length, logits_per_span)`` logit rows (verification spans ask
    ``num_draft_tokens + 1``), so the logits are as many as a full step's.
    """
    num_spans = min(num_seqs, num_tokens)
    lengths = [1] * num_spans
    remaining = num_tokens - num_spans
    for i in range(num_spans):
        extra = min(remaining, max_model_len - 1)
        lengths[i] += extra
        remaining -= extra
    return [(length, min(length, logits_per_span)) for length in lengths]


@torch.inference_mode()
def warm_up_step(runner: ModelRunner, spans: list[tuple[int, int]]) -> int:
    """Run one step of dummy spans on a temporary KV cache, then one sampler pass.

    The runner's cache binding is saved and restored, so this runs on a runner whose cache is
    already in use without touching it. The dummy tokens are id 0; the sampler pass
    (temperature, top-k, top-p, a penalty and a full bitmask) takes the logits' rows.

    Parameters
    ----------
    runner : ModelRunner
        The runner (its model and attention backend set up).
    spans : list of (length, logit rows)
        From `warm_up_spans`.

    Returns
    -------
    int
        Bytes of the temporary KV cache (freed on return).
    """
    mc = runner.model_config
    block_size = runner.block_size
    blocks_of = [-(-length // block_size) for length, _ in spans]  # ceil
    num_blocks = sum(blocks_of)
    layers = runner.model.model.layers
    saved = (
        getattr(runner, "kv_cache", None),
        getattr(runner, "num_kv_blocks", None),
        [(layer.self_attn.k_cache, layer.self_attn.v_cache) for layer in layers],
    )
    # (layers, K/V, Hkv, blocks, block_size, D), the layout of the runner's own cache
    temporary = torch.zeros(
        mc.num_hidden_layers,
        2,
        mc.num_key_value_heads,
        num_blocks,
        block_size,
        mc.head_dim,
        dtype=runner.dtype,
        device=runner.device,
    )
    runner.kv_cache, runner.num_kv_blocks = temporary, num_blocks
    for i, layer in enumerate(layers):
        layer.self_attn.k_cache = temporary[i, 0]
        layer.self_attn.v_cache = temporary[i, 1]
    try:
        scheduled = []
        first_block = 0
        for (length, num_logits), count in zip(spans, blocks_of, strict=True):
            seq = Sequence("warm-up", [0] * length, None)
            seq.block_table = list(range(first_block, first_block + count))
            first_block += count
            scheduled.append(ScheduledSeq(seq, length, num_logits))
        logits = runner.execute(scheduled)
        rows, vocab_size = logits.shape
        params = SamplingParams(temperature=0.8, top_k=50, top_p=0.9, repetition_penalty=1.1)
        batch = SamplingBatch.build(
            [params] * rows, [[0]] * rows, [[]] * rows, vocab_size, (), device=logits.device
        )
        bitmask = allocate_token_bitmask(rows, vocab_size).to(logits.device)
        Sampler()(logits, batch, bitmask)
    finally:
        runner.kv_cache, runner.num_kv_blocks = saved[0], saved[1]
        for layer, (k_cache, v_cache) in zip(layers, saved[2], strict=True):
            layer.self_attn.k_cache, layer.self_attn.v_cache = k_cache, v_cache
    runner.last_hidden = None
    return temporary.numel() * temporary.element_size()


@dataclass
class CudaReadings:
    """Device readings taken before the weights load (`start`), completed by `finish`."""

    device: torch.device
    total_bytes: int = 0
    free_before_bytes: int = 0
    torch_before_bytes: int = 0
    reserved_before_bytes: int = 0

    @classmethod
    def start(cls, device: torch.device) -> CudaReadings:
        """Read the device before the weights load."""
        torch.cuda.synchronize(device)
        free, total = torch.cuda.mem_get_info(device)
        return cls(
            device,
            total_bytes=int(total),
            free_before_bytes=int(free),
            torch_before_bytes=int(torch.cuda.memory_allocated(device)),
            reserved_before_bytes=int(torch.cuda.memory_reserved(device)),
        )

    def finish(self, torch_peak_bytes: int, temporary_bytes: int) -> MemoryProfile:
        """The profile, read after the warm-up (before its cached blocks are released)."""
        torch.cuda.synchronize(self.device)
        free, _ = torch.cuda.mem_get_info(self.device)
        peak = engine_peak_bytes(
            torch_peak_bytes=torch_peak_bytes,
            torch_before_bytes=self.torch_before_bytes,
            temporary_bytes=temporary_bytes,
            used_before_bytes=self.total_bytes - self.free_before_bytes,
            used_after_bytes=self.total_bytes - int(free),
            reserved_before_bytes=self.reserved_before_bytes,
            reserved_after_bytes=int(torch.cuda.memory_reserved(self.device)),
        )
        return MemoryProfile(self.total_bytes, self.free_before_bytes, peak)


def measure_cuda_profile(
    runner: ModelRunner, readings: CudaReadings, spans: list[tuple[int, int]]
) -> MemoryProfile:
    """Run `warm_up_step` on a CUDA runner and measure its peak (see the module docstring)."""
    device = runner.device
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    temporary_bytes = warm_up_step(runner, spans)
    torch.cuda.synchronize(device)
    profile = readings.finish(int(torch.cuda.max_memory_allocated(device)), temporary_bytes)
    torch.cuda.empty_cache()  # the temporary cache's and the step's blocks go back
    return profile


def choose_kv_budget(runner: ModelRunner, readings: CudaReadings | None) -> KVBudget:
    """The runner's KV cache size, and how it was derived (logged at INFO).

    Explicit ``num_kv_blocks``, then ``kv_cache_memory_bytes``; else on CUDA a profiled
    warm-up step (``readings`` taken before the weights loaded), on CPU `cpu_kv_budget`.

    Raises
    ------
    EngineConfigError
        A budget that holds no block (the message says which setting to change).
    """
    config = runner.config
    bytes_per_block = runner.bytes_per_block
    if config.num_kv_blocks is not None:
        budget = KVBudget("num_kv_blocks", config.num_kv_blocks, bytes_per_block)
    elif config.kv_cache_memory_bytes is not None:
        num_blocks = config.kv_cache_memory_bytes // bytes_per_block
        if num_blocks < 1:
            raise EngineConfigError(
                f"EngineConfig.kv_cache_memory_bytes={config.kv_cache_memory_bytes} holds no "
                f"block ({bytes_per_block} bytes each)"
            )
        budget = KVBudget("kv_cache_memory_bytes", int(num_blocks), bytes_per_block)
    elif readings is not None:
        spec = config.speculative
        logits_per_span = 1 if spec is None else spec.num_draft_tokens + 1
        spans = warm_up_spans(
            config.max_num_batched_tokens,
            config.max_num_seqs,
            config.max_model_len,
            logits_per_span,
        )
        profile = measure_cuda_profile(runner, readings, spans)
        draft_per_block, draft_weights = draft_reservation(config, runner.model_config)
        # a draft runner gets as many blocks as the target: each block is priced with both
        budget = profiled_kv_budget(
            profile, config.gpu_memory_utilization, bytes_per_block + draft_per_block, draft_weights
        )
    else:
        # max_num_seqs full-length sequences (+1 block for a partial one)
        wanted = config.max_num_seqs * config.max_model_len // runner.block_size + 1
        budget = cpu_kv_budget(wanted * bytes_per_block, available_ram_bytes(), bytes_per_block)
    logger.info("KV cache on %s: %s", runner.device, budget.describe())
    return budget
