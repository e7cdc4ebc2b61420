"""One prepared GPU check of the engine: kernels, parity, throughput, grammar and speculative
overhead, KV sizing, syncs and launches per step (DESIGN.md, "GPU checks").

It carries only config and tokenizer files: the weights are seeded random ones, made on the
device by transformers' own initialisation and saved to a scratch folder that both our engine
and the transformers reference read. Models: SmolLM2-135M's shape (from the config of the
converted embedded model, or ``--model-dir``) and a 1B-class Llama shape (Llama 3.2 1B's
layer sizes over SmolLM2's vocabulary, so the same tokenizer serves both).

Sections (each reports ``passed``: true, false, or ``"skipped"`` with a reason):

- ``kernels``: every Triton kernel against its torch reference, fp32 and bf16 caches (store,
  paged decode, ragged prefill, tree attention, mask+scale, race argmax, bitmask apply);
- ``parity``: greedy tokens of our engine equal transformers' in fp32 (a divergence counts
  only if transformers' top-2 logit gap there exceeds ``TIE_GAP``); in bf16, teacher-forced on
  our bf16 outputs, our tokens agree with transformers' fp32 argmax about as often as
  transformers' own bf16 argmax does (within ``BF16_SLACK``);
- ``kv_budget``: the engine's default KV sizing (the CUDA memory profile) and how it was derived;
- ``throughput``: output tokens/s at batch 1 / 32 / 256, bf16, both shapes;
- ``constrained``: 32 JSON-schema requests (jump-forward on and off) and 32 reasoning + JSON
  requests, each against the same prompts unconstrained with the same output lengths
  (tokens/s ratio; every complete answer validates with ``jsonschema``);
- ``speculative``: n-gram (with and without a grammar), self-draft and Medusa in fp32: tokens
  per forward, wall speedup, greedy tokens identical to plain decoding;
- ``step_costs``: host-device syncs per decode step (``torch.cuda.set_sync_debug_mode``, with
  the frames that asked for them), device kernels and host launch calls per decode step
  (``torch.profiler``; a CUDA graph replay is one launch call); on CPU, aten ops per step;
- ``host_profile``: host milliseconds per decode step at the largest batch (plain, JSON
  schema) and at the constrained section's batch (plain, JSON schema, reasoning + JSON), with
  and without cProfile, the mask thread's fill and wait, and the functions that take them;
- ``breakages``: the device breakages of issue 22 on this device (seeded tree verification
  with a device generator, the transformers adapter with device scores, an explicit device
  index, the ``block_size`` refusals).

On the GPU machine (under 8 minutes on an H200)::

    python benchmarks/gpu_check.py --model-dir gpu_check_model --out $OUT/gpu_check.json

where ``gpu_check_model`` was written here by ``--export-model-dir gpu_check_model`` (config
and tokenizer files only). ``--dry-run`` runs every section end to end on CPU with a tiny model
of the same vocabulary, small shapes, the torch attention path and the Triton kernels in the
interpreter (``TRITON_INTERPRET=1``), in well under a minute.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

if "--dry-run" in sys.argv:  # before anything imports triton: kernels built interpreted
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

# transformers' greedy token equals ours unless its top-2 logits are closer than this (fp32)
TIE_GAP = 1e-4
# our bf16 tokens may agree with transformers' fp32 argmax this much less often than
# transformers' own bf16 argmax does (teacher-forced on our tokens)
BF16_SLACK = 0.05
# attention kernels: max abs error vs the torch reference (bf16 rounds P before P V)
ATTENTION_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "maxLength": 40},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
    },
    "required": ["name", "age", "email", "tags"],
}
# Llama 3.2 1B's layer sizes; the vocabulary is SmolLM2's (one tokenizer for both shapes)
LLAMA_1B = dict(
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    tie_word_embeddings=True,
)
# the dry run's model: SmolLM2's vocabulary, tiny layers (as tests/conftest.py's TINY)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)


class Plan:
    """Sizes of one run: the GPU's, or the dry run's small ones."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.device = "cpu" if dry_run else "cuda"
        self.fast_dtype = "bfloat16"
        self.batch_sizes = (1, 4, 8) if dry_run else (1, 32, 256)
        self.prompt_len = 12 if dry_run else 64
        self.max_tokens = 8 if dry_run else 128
        self.parity_prompts = 2 if dry_run else 8
        self.parity_tokens = 8 if dry_run else 64
        self.constrained_requests = 4 if dry_run else 32
        self.constrained_tokens = 48 if dry_run else 256
        self.speculative_requests = 2 if dry_run else 8
        self.speculative_tokens = 16 if dry_run else 96
        self.num_kv_blocks = 256 if dry_run else 8192
        self.max_model_len = 512 if dry_run else 2048
        self.initializer_range = 0.2 if dry_run else 0.05  # spread logits: fewer near-ties


# -- models --------------------------------------------------------------------------------


def export_model_dir(target: Path) -> Path:
    """Copy the config and tokenizer files (no weights) of the embedded SmolLM2 to ``target``."""
    from formcast.engine.models.loader import resolve_model_path

    source = resolve_model_path("smollm2-135m")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", *TOKENIZER_FILES):
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    return target


def make_model(
    model_dir: Path,
    overrides: dict[str, Any],
    scratch: Path,
    name: str,
    plan: Plan,
    seed: int,
    dtype: torch.dtype = torch.float32,
) -> tuple[Path, Any]:
    """Seeded random weights of ``model_dir``'s config (with ``overrides``) made on the device,
    saved as a model folder with the tokenizer; returns the folder and the HF model."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    raw = json.loads((model_dir / "config.json").read_text())
    raw.update(overrides)
    raw["initializer_range"] = plan.initializer_range
    raw["architectures"] = ["LlamaForCausalLM"]
    raw.pop("torch_dtype", None)
    raw.pop("dtype", None)
    config = LlamaConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    torch.manual_seed(seed)  # seeds the CUDA generators too
    with torch.device(plan.device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.eval()
    folder = scratch / name
    model.save_pretrained(folder)
    for file in TOKENIZER_FILES:
        if (model_dir / file).is_file():
            shutil.copy2(model_dir / file, folder / file)
    return folder, model


def free_device() -> None:
    """Release what deleted engines and models held, before the next section sizes itself."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def random_prompts(num: int, length: int, seed: int, vocab: int = 49152) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(100, vocab - 100, size=(num, length)).tolist()


def build_llm(folder: Path, plan: Plan, **options: Any):
    from formcast.engine import LLM

    options.setdefault("device", plan.device)
    options.setdefault("max_model_len", plan.max_model_len)
    options.setdefault("num_kv_blocks", plan.num_kv_blocks)
    return LLM(folder, **options)


def greedy(max_tokens: int, **extra: Any):
    from formcast.samplers import SamplingParams

    return SamplingParams(temperature=0, max_tokens=max_tokens, **extra)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# -- kernels -------------------------------------------------------------------------------


def _paged_cache(shape, dtype, device, num_blocks, block_size, context_lens, generator):
    num_kv_heads, head_dim = shape
    size = (num_kv_heads, num_blocks, block_size, head_dim)
    k_cache = torch.randn(size, generator=generator).to(device=device, dtype=dtype)
    v_cache = torch.randn(size, generator=generator).to(device=device, dtype=dtype)
    free = torch.randperm(num_blocks, generator=generator).tolist()
    max_blocks = max(-(-c // block_size) for c in context_lens)
    tables = torch.zeros(len(context_lens), max_blocks, dtype=torch.int32)
    for i, c in enumerate(context_lens):
        for j in range(-(-c // block_size)):
            tables[i, j] = free.pop()
    return k_cache, v_cache, tables.to(device), torch.tensor(context_lens, dtype=torch.int32)


def check_kernels(plan: Plan) -> dict[str, Any]:
    from formcast.bitmask import (
        apply_token_bitmask_inplace_torch,
        apply_token_bitmask_inplace_triton,
    )
    from formcast.engine.attention import tree, triton_backend
    from formcast.engine.attention.torch_backend import (
        paged_decode_attention_torch,
        paged_prefill_attention_torch,
        store_kv_torch,
    )
    from formcast.samplers import triton_logits, triton_race

    device = plan.device
    if plan.dry_run:
        heads, group, head_dim, num_blocks, block_size = 2, 2, 16, 24, 16
        decode_ctx, prefill_q, prefill_ctx, tree_prefix = [1, 17, 40], [1, 5, 9], [3, 20, 30], 21
        vocab_rows = [(3, 1000)]
    else:
        heads, group, head_dim, num_blocks, block_size = 8, 4, 128, 2048, 16
        decode_ctx = [1, 15, 16, 17, 255, 1000, 2047, 4000] * 4
        prefill_q, prefill_ctx, tree_prefix = [1, 17, 128, 300], [1, 100, 128, 1500], 700
        vocab_rows = [(64, 49152), (7, 128257), (1, 262144)]
    scale = head_dim**-0.5
    results: dict[str, Any] = {}
    failures: list[str] = []

    def record(name: str, error: float, tolerance: float) -> None:
        results[name] = {"max_error": error, "tolerance": tolerance}
        if not error <= tolerance:  # NaN fails too
            failures.append(name)

    for dtype in (torch.float32, torch.bfloat16):
        tag = str(dtype).removeprefix("torch.")
        tolerance = ATTENTION_TOLERANCE[dtype]
        generator = torch.Generator().manual_seed(0)
        k_cache, v_cache, tables, ctx = _paged_cache(
            (heads, head_dim), dtype, device, num_blocks, block_size, decode_ctx, generator
        )
        # store: exact copies
        num_new = 37
        k = torch.randn(num_new, heads, head_dim, generator=generator).to(device, dtype)
        v = torch.randn(num_new, heads, head_dim, generator=generator).to(device, dtype)
        slots = torch.randperm(num_blocks * block_size, generator=generator)[:num_new].to(device)
        expected_k, expected_v = k_cache.clone(), v_cache.clone()
        store_kv_torch(k, v, expected_k, expected_v, slots)
        got_k, got_v = k_cache.clone(), v_cache.clone()
        triton_backend.store_kv(k, v, got_k, got_v, slots)
        exact = torch.equal(got_k, expected_k) and torch.equal(got_v, expected_v)
        record(f"store_kv/{tag}", 0.0 if exact else float("inf"), 0.0)
        # decode
        q = torch.randn(len(decode_ctx), heads * group, head_dim, generator=generator)
        q = q.to(device, dtype)
        ctx_device = ctx.to(device)
        expected = paged_decode_attention_torch(q, k_cache, v_cache, tables, ctx_device, scale)
        got = triton_backend.paged_decode_attention(q, k_cache, v_cache, tables, ctx_device, scale)
        record(f"decode/{tag}", (got.float() - expected.float()).abs().max().item(), tolerance)
        # ragged prefill
        kp, vp, ptables, pctx = _paged_cache(
            (heads, head_dim), dtype, device, num_blocks, block_size, prefill_ctx, generator
        )
        starts = torch.tensor(np.concatenate([[0], np.cumsum(prefill_q)]), dtype=torch.int32)
        q = torch.randn(int(starts[-1]), heads * group, head_dim, generator=generator)
        q = q.to(device, dtype)
        args = (q, kp, vp, ptables, starts.to(device), pctx.to(device), scale)
        expected = paged_prefill_attention_torch(*args)
        got = triton_backend.paged_prefill_attention(*args)
        record(f"prefill/{tag}", (got.float() - expected.float()).abs().max().item(), tolerance)
        # tree: 7 nodes, root 0 -> (1, 2), 1 -> (3, 4), 2 -> 5, 5 -> 6
        parents = [-1, 0, 0, 1, 1, 2, 5]
        num_nodes = len(parents)
        ancestors = torch.zeros(num_nodes, num_nodes, dtype=torch.bool)
        for node in range(num_nodes):
            walk = node
            while walk >= 0:
                ancestors[node, walk] = True
                walk = parents[walk]
        kt, vt, ttables, _ = _paged_cache(
            (heads, head_dim),
            dtype,
            device,
            num_blocks,
            block_size,
            [tree_prefix + num_nodes],
            generator,
        )
        q = torch.randn(num_nodes, heads * group, head_dim, generator=generator).to(device, dtype)
        args = (q, kt, vt, ttables[0], tree_prefix, ancestors.to(device), scale)
        expected = tree.paged_tree_attention_torch(*args)
        got = tree.paged_tree_attention(*args)
        record(f"tree/{tag}", (got.float() - expected.float()).abs().max().item(), tolerance)
    # sampler kernels (float32 logits)
    for num_rows, vocab_size in vocab_rows:
        generator = torch.Generator().manual_seed(vocab_size)
        logits = (torch.randn(num_rows, vocab_size, generator=generator) * 4).to(device)
        num_words = (vocab_size + 31) // 32
        bitmask = torch.randint(
            -(2**31), 2**31 - 1, (num_rows, num_words), generator=generator, dtype=torch.int64
        ).to(device=device, dtype=torch.int32)
        temperature = (torch.rand(num_rows, generator=generator) * 2 + 0.05).to(device)
        tag = f"{num_rows}x{vocab_size}"
        expected, got = logits.clone(), logits.clone()
        apply_token_bitmask_inplace_torch(expected, bitmask)
        apply_token_bitmask_inplace_triton(got, bitmask)
        record(f"bitmask/{tag}", 0.0 if torch.equal(expected, got) else float("inf"), 0.0)
        expected, got = logits.clone(), logits.clone()
        e_max, e_lse = triton_logits.mask_scale_logits_inplace_torch(expected, bitmask, temperature)
        g_max, g_lse = triton_logits.mask_scale_logits_inplace_triton(got, bitmask, temperature)
        same_inf = torch.equal(torch.isinf(expected), torch.isinf(got))
        finite = torch.isfinite(expected)
        # relative error: logits / temperature reach a few hundred
        error = max(
            ((a - b).abs() / b.abs().clamp(min=1.0)).max().item()
            for a, b in ((got[finite], expected[finite]), (g_max, e_max), (g_lse, e_lse))
        )
        record(f"mask_scale/{tag}", error if same_inf else float("inf"), 1e-5)
        noise = torch.empty(num_rows, vocab_size).exponential_(generator=generator).to(device)
        expected = triton_race.race_argmax_torch(got, noise.clone())
        chosen = triton_race.race_argmax_triton(got, noise)
        record(f"race/{tag}", 0.0 if torch.equal(expected, chosen) else float("inf"), 0.0)
    synchronize()
    return {"passed": not failures, "failures": failures, "checks": results}


# -- parity --------------------------------------------------------------------------------


@torch.inference_mode()
def _hf_greedy(hf, prompt: list[int], num_tokens: int, device: str) -> tuple[list[int], Any]:
    """transformers' own forward over the whole sequence at each step, greedy, EOS not
    special (as our ``ignore_eos``): the tokens and the logits each was chosen from."""
    tokens: list[int] = []
    rows = []
    for _ in range(num_tokens):
        row = hf(torch.tensor([prompt + tokens], device=device)).logits[0, -1].float()
        tokens.append(int(row.argmax()))
        rows.append(row)
    return tokens, torch.stack(rows)


def check_parity(plan: Plan, smol: tuple[Path, Any]) -> dict[str, Any]:
    folder, hf = smol
    prompts = random_prompts(plan.parity_prompts, plan.prompt_len, seed=1)
    llm = build_llm(folder, plan, dtype="float32", max_num_seqs=plan.parity_prompts)
    ours = [o.token_ids for o in llm.generate(prompts, greedy(plan.parity_tokens, ignore_eos=True))]
    del llm
    free_device()
    identical = ties = 0
    divergences = []
    for prompt, mine in zip(prompts, ours, strict=True):
        theirs, logits = _hf_greedy(hf, prompt, plan.parity_tokens, plan.device)
        if mine == theirs:
            identical += 1
            continue
        position = next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b)
        gap = float(logits[position, theirs[position]] - logits[position, mine[position]])
        divergences.append({"position": position, "hf_top2_gap": gap})
        ties += gap < TIE_GAP
    fp32_ok = identical + ties == len(prompts)
    # bf16: teacher-forced top-1 agreement of transformers on our bf16 greedy outputs
    llm = build_llm(folder, plan, dtype="bfloat16", max_num_seqs=plan.parity_prompts)
    ours_bf16 = [
        o.token_ids for o in llm.generate(prompts, greedy(plan.parity_tokens, ignore_eos=True))
    ]
    del llm
    free_device()
    # teacher-forced on our bf16 tokens: transformers' fp32 argmax is the reference; our bf16
    # tokens must agree with it about as often as transformers' own bf16 argmax does (random
    # weights put many near-ties within bf16's rounding, where any two bf16 stacks differ)
    sequences = [
        torch.tensor([p + m], device=plan.device) for p, m in zip(prompts, ours_bf16, strict=True)
    ]
    with torch.inference_mode():
        fp32_argmax = [
            hf(ids).logits[0, len(p) - 1 : -1].argmax(-1).cpu()
            for ids, p in zip(sequences, prompts, strict=True)
        ]
        hf_bf16 = hf.to(torch.bfloat16)
        bf16_argmax = [
            hf_bf16(ids).logits[0, len(p) - 1 : -1].argmax(-1).cpu()
            for ids, p in zip(sequences, prompts, strict=True)
        ]
    mine = torch.cat([torch.tensor(m) for m in ours_bf16])
    fp32_top1, bf16_top1 = torch.cat(fp32_argmax), torch.cat(bf16_argmax)
    agreement = float((bf16_top1 == mine).double().mean())
    ours_vs_fp32 = float((fp32_top1 == mine).double().mean())
    hf_bf16_vs_fp32 = float((fp32_top1 == bf16_top1).double().mean())
    return {
        "passed": fp32_ok and ours_vs_fp32 >= hf_bf16_vs_fp32 - BF16_SLACK,
        "fp32_identical": f"{identical}/{len(prompts)}",
        "fp32_divergences_at_ties": ties,
        "fp32_divergences": divergences,
        "bf16_top1_agreement_with_hf_bf16": round(agreement, 4),
        "bf16_ours_vs_hf_fp32": round(ours_vs_fp32, 4),
        "bf16_hf_vs_hf_fp32": round(hf_bf16_vs_fp32, 4),
        "bf16_slack": BF16_SLACK,
    }


# -- KV budget -----------------------------------------------------------------------------


def check_kv_budget(plan: Plan, folder: Path) -> dict[str, Any]:
    from formcast.engine import LLM

    llm = LLM(folder, device=plan.device, dtype=plan.fast_dtype, max_model_len=plan.max_model_len)
    budget = llm.runner.kv_budget
    out = llm.generate([[5, 6, 7]], greedy(4, ignore_eos=True))
    expected_source = "cpu_default" if plan.dry_run else "profile"
    report = {
        "passed": budget.source == expected_source and len(out[0].token_ids) == 4,
        "source": budget.source,
        "num_blocks": budget.num_blocks,
        "kv_gib": round(budget.kv_bytes / 2**30, 3),
        "peak_gib": None if budget.peak_bytes is None else round(budget.peak_bytes / 2**30, 3),
        "total_gib": None if budget.total_bytes is None else round(budget.total_bytes / 2**30, 3),
        "utilization": budget.utilization,
        "describe": budget.describe(),
    }
    del llm, out
    free_device()
    return report


# -- throughput ----------------------------------------------------------------------------


def _tokens_per_second(llm, prompts, params, **kwargs) -> tuple[float, list]:
    synchronize()
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, **kwargs)
    synchronize()
    wall = time.perf_counter() - started
    return sum(len(o.token_ids) for o in outputs) / wall, outputs


def check_throughput(plan: Plan, models: dict[str, Path]) -> dict[str, Any]:
    report: dict[str, Any] = {"dtype": plan.fast_dtype}
    for name, folder in models.items():
        biggest = max(plan.batch_sizes)
        llm = build_llm(folder, plan, dtype=plan.fast_dtype, max_num_seqs=biggest)
        rates = {}
        for batch in plan.batch_sizes:
            prompts = random_prompts(batch, plan.prompt_len, seed=batch)
            # untimed, the same shapes: Triton specialises kernels on lengths (a first 64-token
            # prefill compiles anew), and each batch size has its own graph bucket
            llm.generate(prompts, greedy(4, ignore_eos=True))
            rate, _ = _tokens_per_second(llm, prompts, greedy(plan.max_tokens, ignore_eos=True))
            rates[f"batch_{batch}"] = round(rate, 1)
        report[name] = rates
        del llm
        free_device()
    report["passed"] = all(rate > 0 for name in models for rate in report[name].values())
    return report


# -- constrained ---------------------------------------------------------------------------


def _same_length_rate(llm, prompts, outputs) -> float:
    """Output tokens/s of ``prompts`` unconstrained, each request as long as its output in
    ``outputs`` (a constrained request ends when its grammar does: comparing it with a
    fixed-length run would charge the grammar for a batch that drains early)."""
    from formcast.samplers import SamplingParams

    lengths = [len(o.token_ids) for o in outputs]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths]
    return _tokens_per_second(llm, prompts, params)[0]


def _count_valid(outputs, schema, reasoning=None) -> tuple[int, int]:
    """(complete, invalid) over ``outputs``; with ``reasoning`` (a ``ReasoningConfig``) the
    answer after its end tag is validated alone."""
    import jsonschema

    complete = invalid = 0
    for output in outputs:
        if not output.outputs[0].is_grammar_complete:
            continue
        complete += 1
        answer = output.text if reasoning is None else reasoning.split(output.text)[1]
        try:
            jsonschema.validate(json.loads(answer), schema)
        except (ValueError, jsonschema.ValidationError):
            invalid += 1
    return complete, invalid


def check_constrained(plan: Plan, folder: Path) -> dict[str, Any]:
    """Two workloads, each against the same prompts unconstrained with the same lengths
    (best of two alternating runs): a JSON schema (jump-forward on and off), and free
    reasoning bounded at 32 tokens then the JSON schema (issue 23's workload)."""
    from formcast.grammar import GrammarSpec
    from formcast.grammar.reasoning import ReasoningConfig

    llm = build_llm(folder, plan, dtype=plan.fast_dtype, max_num_seqs=plan.constrained_requests)
    prompts = random_prompts(plan.constrained_requests, plan.prompt_len, seed=7)
    json_spec = GrammarSpec.json_schema(SCHEMA)
    thinking = ReasoningConfig(max_tokens=32)
    reasoning_spec = GrammarSpec.reasoning(json_spec, thinking)
    params = greedy(plan.constrained_tokens)
    # the reasoning workload's budget: 32 thoughts and the end tag come before the answer
    reasoning_params = greedy(plan.constrained_tokens + 48)
    llm.generate(prompts[:1], greedy(2, ignore_eos=True))
    workloads = {
        "json_jump_forward": (params, dict(grammar=json_spec, jump_forward=True)),
        "json": (params, dict(grammar=json_spec, jump_forward=False)),
        "reasoning_json": (reasoning_params, dict(grammar=reasoning_spec, jump_forward=False)),
    }
    # one untimed pass of each workload first: every mask the timed runs need is then
    # computed (first visits are bench_first_visits.py's subject), so the runs compare steps
    for run_params, kwargs in workloads.values():
        llm.generate(prompts, run_params, **kwargs)
    report: dict[str, Any] = {"jump_forward_default": llm.jump_forward_default}
    passed = True
    for name, (run_params, kwargs) in workloads.items():
        constrained = unconstrained = 0.0
        for _ in range(2):
            rate, outputs = _tokens_per_second(llm, prompts, run_params, **kwargs)
            constrained = max(constrained, rate)
            unconstrained = max(unconstrained, _same_length_rate(llm, prompts, outputs))
        is_reasoning = kwargs["grammar"] is reasoning_spec
        complete, invalid = _count_valid(outputs, SCHEMA, thinking if is_reasoning else None)
        passed = passed and invalid == 0 and complete > 0
        report[name] = {
            "constrained_tok_s": round(constrained, 1),
            "unconstrained_same_lengths_tok_s": round(unconstrained, 1),
            "ratio": round(constrained / unconstrained, 3),
            "num_tokens": sum(len(o.token_ids) for o in outputs),
            "complete": f"{complete}/{len(outputs)}",
            "invalid": invalid,
        }
    # the engine's default mode (jump-forward off where decode steps replay CUDA graphs)
    default = "json_jump_forward" if llm.jump_forward_default else "json"
    report["ratio"] = report[default]["ratio"]
    report["passed"] = passed
    del llm
    free_device()
    return report


# -- speculative ---------------------------------------------------------------------------


def check_speculative(plan: Plan, folder: Path) -> dict[str, Any]:
    from formcast.engine.speculative.medusa_heads import assets_dir

    # repetitive prompts: something for the n-gram proposer to find
    base = random_prompts(plan.speculative_requests, 8, seed=11)
    prompts = [(p * (plan.prompt_len // 8 + 1))[: plan.prompt_len] for p in base]
    params = greedy(plan.speculative_tokens, ignore_eos=True)
    methods: dict[str, tuple[dict | None, bool]] = {
        "none": (None, False),
        "ngram": ({"method": "ngram", "num_draft_tokens": 4}, False),
        "self_draft": ({"method": "self_draft", "num_draft_tokens": 3}, False),
        "none+grammar": (None, True),
        "ngram+grammar": ({"method": "ngram", "num_draft_tokens": 4}, True),
    }
    heads = assets_dir() / "medusa-smollm2-135m.safetensors"
    skipped = {}
    if plan.dry_run:
        skipped["medusa"] = (
            "the shipped heads are SmolLM2-135M's (hidden 576), not the tiny model's"
        )
    else:
        methods["medusa"] = ({"method": "medusa", "medusa_heads": str(heads)}, False)
    results: dict[str, Any] = {}
    baseline: dict[bool, tuple[float, list]] = {}
    failures = []
    for name, (speculative, with_grammar) in methods.items():
        llm = build_llm(
            folder,
            plan,
            dtype="float32",
            max_num_seqs=plan.speculative_requests,
            speculative=speculative,
        )
        grammar = {"json_schema": SCHEMA} if with_grammar else None
        run_params = greedy(plan.speculative_tokens) if with_grammar else params
        # warm-up outside the timing: grammar compile, and the verification spans' kernels
        llm.generate(prompts[:2], greedy(12, ignore_eos=not with_grammar), grammar=grammar)
        steps_before = llm.stats.num_steps
        synchronize()
        started = time.perf_counter()
        outputs = llm.generate(prompts, run_params, grammar=grammar)
        synchronize()
        wall = time.perf_counter() - started
        num_forwards = llm.stats.num_steps - steps_before
        tokens = [o.token_ids for o in outputs]
        num_tokens = sum(len(t) for t in tokens)
        # per request: its output tokens over the forward passes that computed its spans
        request_forwards = sum(int(o.metrics["num_forward_passes"]) for o in outputs)
        entry = {
            "wall_s": round(wall, 3),
            "tokens": num_tokens,
            "steps": num_forwards,
            "tokens_per_forward": round(num_tokens / max(1, request_forwards), 3),
        }
        if llm.speculator is not None:
            stats = llm.speculator.stats
            entry["accepted_per_verification"] = round(
                stats.num_accepted_tokens / max(1, stats.num_verifications), 3
            )
        if speculative is None:
            baseline[with_grammar] = (wall, tokens)
        else:
            base_wall, base_tokens = baseline[with_grammar]
            entry["speedup"] = round(base_wall / wall, 3)
            entry["identical"] = tokens == base_tokens
            if not entry["identical"]:
                failures.append(name)
        results[name] = entry
        del llm
        free_device()
    return {"passed": not failures, "failures": failures, "skipped": skipped, **results}


# -- syncs and launches per step -----------------------------------------------------------


def check_step_costs(plan: Plan, folder: Path) -> dict[str, Any]:
    batch = plan.batch_sizes[1]
    llm = build_llm(folder, plan, dtype=plan.fast_dtype, max_num_seqs=batch)
    for prompt in random_prompts(batch, plan.prompt_len, seed=5):
        llm.add_request(prompt, greedy(10_000, ignore_eos=True))
    # prefill until every sequence has sampled a token: the steps after are pure decodes
    while llm.scheduler.waiting or any(seq.num_output_tokens == 0 for seq in llm.scheduler.running):
        llm.step()
    for _ in range(3):
        llm.step()  # warm decode steps
    num_steps = 8
    report: dict[str, Any] = {"batch": batch, "steps": num_steps}
    if torch.cuda.is_available():
        synchronize()
        stacks: list[str] = []
        in_step = [False]  # set_sync_debug_mode's own warning is not a step's sync

        def record(message, category, filename, lineno, file=None, line=None):
            if in_step[0] and "synchroniz" in str(message).lower():  # where the sync came from
                frames = traceback.extract_stack()[:-1]
                ours = [f for f in frames if "formcast" in f.filename or "triton" in f.filename]
                shown_frames = (ours or frames)[-4:][::-1]
                stacks.append(
                    f"[{threading.current_thread().name}] "
                    + " <- ".join(f"{f.filename}:{f.lineno}:{f.name}" for f in shown_frames)
                )

        with warnings.catch_warnings():  # restores showwarning on exit
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for _ in range(num_steps):
                    in_step[0] = True
                    llm.step()
                    in_step[0] = False
            finally:
                torch.cuda.set_sync_debug_mode("default")
        report["syncs_per_step"] = len(stacks) / num_steps
        report["sync_sites"] = sorted(set(stacks))[:20]
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    else:
        report["syncs_per_step"] = "skipped: no CUDA device (set_sync_debug_mode needs one)"
        activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(num_steps):
            llm.step()
        synchronize()
    events = profiler.events()
    if torch.cuda.is_available():
        device_type = torch.autograd.DeviceType.CUDA
        kernels = sum(1 for e in events if e.device_type == device_type)
        # host-side launch calls: one cudaGraphLaunch replays a whole captured forward
        launch_calls: dict[str, int] = {}
        for event in events:
            if event.device_type != device_type and "Launch" in event.name:
                launch_calls[event.name] = launch_calls.get(event.name, 0) + 1
        report["device_kernels_per_step"] = kernels / num_steps
        report["host_launch_calls_per_step"] = sum(launch_calls.values()) / num_steps
        report["host_launch_calls"] = {k: v / num_steps for k, v in launch_calls.items()}
        report["passed"] = report["syncs_per_step"] <= 1
        report["target"] = "syncs_per_step <= 1"
    else:
        ops = sum(1 for e in events if e.name.startswith("aten::"))
        report["aten_ops_per_step"] = ops / num_steps
        report["passed"] = ops > 0
    for request_id in list(llm.requests):
        llm.abort(request_id)
    del llm
    free_device()
    return report


# -- host profile --------------------------------------------------------------------------


def _profile_steps(llm, num_steps: int) -> dict[str, Any]:
    """Wall per step over ``num_steps`` engine steps without a profiler, the mask thread's
    fill and wait per step, then ``num_steps`` more under cProfile: the top functions by own
    time and formcast's by cumulative time (where the host spends a step once the device work
    is a graph replay)."""
    import cProfile
    import pstats

    stats_before = llm.stats
    synchronize()
    started = time.perf_counter()
    for _ in range(num_steps):
        llm.step()
    synchronize()
    plain_wall = time.perf_counter() - started
    stats_after = llm.stats
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(num_steps):
        llm.step()
    synchronize()
    profiler.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)

    def shown(rows) -> list[str]:
        return [
            f"{Path(file).name}:{line}({name}) own {own / num_steps * 1e3:.3f} ms, "
            f"cum {cum / num_steps * 1e3:.3f} ms, {calls / num_steps:.0f} calls"
            for (file, line, name), (_, calls, own, cum, _) in rows
        ]

    by_own = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]
    ours = [kv for kv in stats.stats.items() if "formcast" in kv[0][0]]
    by_cum = sorted(ours, key=lambda kv: kv[1][3], reverse=True)[:20]
    fill = stats_after.mask_fill_seconds - stats_before.mask_fill_seconds
    wait = stats_after.mask_wait_seconds - stats_before.mask_wait_seconds
    return {
        "ms_per_step_unprofiled": round(plain_wall / num_steps * 1e3, 3),
        "mask_fill_ms_per_step": round(fill / num_steps * 1e3, 3),
        "mask_wait_ms_per_step": round(wait / num_steps * 1e3, 3),
        "ms_per_step": round(wall / num_steps * 1e3, 3),
        "top_own_time_per_step": shown(by_own),
        "top_formcast_cumulative_per_step": shown(by_cum),
    }


def check_host_profile(plan: Plan, folder: Path) -> dict[str, Any]:
    """Host time per decode step, unconstrained and with a JSON schema at the largest batch,
    and at the constrained section's batch also with reasoning then the JSON schema (the
    constrained ratios' steps); cProfile inflates Python-heavy code about 1.5-2x, so each
    case also reports its steps unprofiled."""
    from formcast.grammar import GrammarSpec
    from formcast.grammar.reasoning import ReasoningConfig

    json_spec = GrammarSpec.json_schema(SCHEMA)
    reasoning_spec = GrammarSpec.reasoning(json_spec, ReasoningConfig(max_tokens=32))
    largest, constrained = max(plan.batch_sizes), plan.constrained_requests
    cases = [
        (largest, "plain", None),
        (largest, "json_schema", json_spec),
        (constrained, "plain", None),
        (constrained, "json_schema", json_spec),
        (constrained, "reasoning_json", reasoning_spec),
    ]
    report: dict[str, Any] = {}
    for batch, name, grammar in cases:
        llm = build_llm(folder, plan, dtype=plan.fast_dtype, max_num_seqs=batch)
        for prompt in random_prompts(batch, plan.prompt_len, seed=9):
            llm.add_request(prompt, greedy(10_000, ignore_eos=grammar is None), grammar=grammar)
        while llm.scheduler.waiting or any(
            seq.num_output_tokens == 0 for seq in llm.scheduler.running
        ):
            llm.step()
        for _ in range(3):
            llm.step()
        report[f"batch_{batch}_{name}"] = _profile_steps(llm, 8)
        for request_id in list(llm.requests):
            llm.abort(request_id)
        del llm
        free_device()
    report["passed"] = True
    return report


# -- breakages ------------------------------------------------------------------------------


def check_breakages(plan: Plan, folder: Path) -> dict[str, Any]:
    """Issue 22's device breakages on this device: the CPU-or-CUDA tests of
    ``tests/engine/test_device_breakages.py`` (their CUDA cases run only where CUDA exists),
    an engine on an explicit ``torch.device`` index, and the ``block_size`` refusals."""
    import subprocess

    from formcast.engine.config import EngineConfig
    from formcast.errors import EngineConfigError

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TRITON_INTERPRET": "1" if plan.dry_run else "0"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "tests/engine/test_device_breakages.py", "-k", "not explicit_device"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-500:]
    device = torch.device(plan.device, 0) if plan.device == "cuda" else torch.device("cpu")
    llm = build_llm(folder, plan, device=device, num_kv_blocks=64)
    out = llm.generate([[5, 6, 7]], greedy(4, ignore_eos=True))
    engine_ok = llm.runner.kv_cache.device == device and len(out[0].token_ids) == 4
    del llm
    free_device()
    refused = []
    for options in ({"block_size": 24}, {"block_size": 8, "attention_backend": "triton"}):
        try:
            EngineConfig(device=plan.device, **options)
        except EngineConfigError:
            refused.append(options)
    # on CUDA every case runs (none skipped); on CPU the CUDA halves skip
    skipped_ok = plan.dry_run or "skipped" not in summary
    return {
        "passed": run.returncode == 0 and skipped_ok and engine_ok and len(refused) == 2,
        "tests": summary,
        "explicit_device_engine": engine_ok,
        "block_size_refusals": len(refused),
    }


# -- the run -------------------------------------------------------------------------------


def run_section(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # one broken section must not hide the others' results
        result = {
            "passed": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8)[-3000:],
        }
    result["seconds"] = round(time.perf_counter() - started, 2)
    line = {k: v for k, v in result.items() if k not in ("checks", "traceback")}
    print(f"[{name}] {json.dumps(line, default=str)}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, small shapes, interpreter")
    parser.add_argument("--model-dir", type=Path, help="config + tokenizer files of SmolLM2")
    parser.add_argument("--export-model-dir", type=Path, help="write them there and exit")
    parser.add_argument("--out", type=Path, help="JSON report path")
    parser.add_argument(
        "--sections",
        default=(
            "kernels,parity,kv_budget,throughput,constrained,speculative,step_costs,"
            "host_profile,breakages"
        ),
    )
    args = parser.parse_args(argv)
    if args.export_model_dir is not None:
        print(export_model_dir(args.export_model_dir))
        return 0
    plan = Plan(args.dry_run)
    if not plan.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --dry-run on CPU")
    started = time.perf_counter()
    wanted = args.sections.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    model_dir = args.model_dir or export_model_dir(scratch / "smollm2-config")
    sections: dict[str, Any] = {}
    try:
        # numba's grammar kernels compile on first use (``make kernels`` does it at install
        # here): once, before anything is timed
        warm_started = time.perf_counter()
        from formcast.engine.models.loader import load_tokenizer
        from formcast.grammar import Vocabulary
        from formcast.grammar.kernel_warmup import warm_all_kernels

        warm_all_kernels(Vocabulary.from_tokenizer(load_tokenizer(model_dir)))
        print(f"[numba warm-up] {time.perf_counter() - warm_started:.1f} s", flush=True)
        if "kernels" in wanted:
            sections["kernels"] = run_section("kernels", lambda: check_kernels(plan))
        smol_overrides = TINY if plan.dry_run else {}
        smol_folder, smol_hf = make_model(model_dir, smol_overrides, scratch, "smol", plan, 0)
        models = {"smollm2_135m_shape": smol_folder}
        if "parity" in wanted:
            sections["parity"] = run_section(
                "parity", lambda hf=smol_hf: check_parity(plan, (smol_folder, hf))
            )
        del smol_hf
        free_device()
        if "kv_budget" in wanted:
            sections["kv_budget"] = run_section(
                "kv_budget", lambda: check_kv_budget(plan, smol_folder)
            )
        if "throughput" in wanted:
            if not plan.dry_run:
                folder, hf = make_model(
                    model_dir, LLAMA_1B, scratch, "llama1b", plan, 1, torch.bfloat16
                )
                del hf
                free_device()
                models["llama_1b_shape"] = folder
            sections["throughput"] = run_section(
                "throughput", lambda: check_throughput(plan, models)
            )
        if "constrained" in wanted:
            sections["constrained"] = run_section(
                "constrained", lambda: check_constrained(plan, smol_folder)
            )
        if "speculative" in wanted:
            sections["speculative"] = run_section(
                "speculative", lambda: check_speculative(plan, smol_folder)
            )
        if "step_costs" in wanted:
            sections["step_costs"] = run_section(
                "step_costs", lambda: check_step_costs(plan, smol_folder)
            )
        if "host_profile" in wanted:
            sections["host_profile"] = run_section(
                "host_profile", lambda: check_host_profile(plan, smol_folder)
            )
        if "breakages" in wanted:
            sections["breakages"] = run_section(
                "breakages", lambda: check_breakages(plan, smol_folder)
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    report = {
        "device": device,
        "dry_run": plan.dry_run,
        "torch": torch.__version__,
        "wall_s": round(time.perf_counter() - started, 1),
        "passed": all(s["passed"] is True for s in sections.values()),
        "sections": sections,
    }
    print(f"gpu_check on {device}: {'PASSED' if report['passed'] else 'FAILED'} "
          f"in {report['wall_s']} s")  # fmt: skip
    for name, section in sections.items():
        print(f"  {name:12s} {'ok' if section['passed'] is True else 'FAIL'}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=str))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
