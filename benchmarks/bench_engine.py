"""Engine throughput and latency: formcast.engine vs transformers, same workload, same run.

Workload (fixed seed): N requests with random token prompts of length U[min_prompt, max_prompt]
and U[min_output, max_output] greedy output tokens (EOS ignored, so every system produces the
same number of useful tokens). Measured:

1. Offline throughput (useful output tokens / wall second) of
   - formcast ``LLM.generate`` (all requests at once),
   - transformers ``generate`` on one left-padded batch (it runs to the longest output; only
     the requested tokens count as useful),
   - transformers ``generate_batch`` (its continuous-batching API) when it works here.
   Greedy tokens are compared with the transformers ``generate`` ones.
2. KV waste of formcast: allocated-but-unused KV slots / allocated slots, averaged over steps.
3. Online latency: requests arrive as a Poisson stream; time to first token and inter-token
   latency p50/p99.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_engine.py [--num-requests 64 ...]``
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from formcast.engine.llm_engine import LLM  # noqa: E402
from formcast.engine.models.loader import load_hf_model  # noqa: E402
from formcast.samplers import SamplingParams  # noqa: E402

EOS_ID = 2


def make_workload(args: argparse.Namespace) -> tuple[list[list[int]], list[int]]:
    rng = np.random.default_rng(args.seed)
    prompt_lens = rng.integers(args.min_prompt, args.max_prompt + 1, args.num_requests)
    output_lens = rng.integers(args.min_output, args.max_output + 1, args.num_requests)
    prompts = [rng.integers(3, 49152, n).tolist() for n in prompt_lens]
    return prompts, [int(n) for n in output_lens]


def run_formcast(llm: LLM, prompts, output_lens) -> tuple[float, list[list[int]], float]:
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in output_lens]
    bm = llm.block_manager
    waste: list[tuple[float, float]] = []  # (allocated slots, unused slots) per step
    step = llm.step

    def measured_step():
        deltas = step()
        live = llm.scheduler.running
        allocated = sum(len(s.block_table) for s in live) * bm.block_size
        if allocated:
            waste.append((allocated, allocated - sum(s.num_cached_tokens for s in live)))
        return deltas

    llm.step = measured_step
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    seconds = time.perf_counter() - start
    del llm.step
    waste_ratio = sum(w for _, w in waste) / max(1, sum(a for a, _ in waste))
    return seconds, [out.token_ids for out in outputs], waste_ratio


def simulate_kv_waste(prompt_lens, output_lens, block_size: int, num_blocks: int) -> float:
    """KV waste of the full workload from the real BlockManager + Scheduler, without a model."""
    from formcast.engine.block_manager import BlockManager
    from formcast.engine.config import EngineConfig
    from formcast.engine.scheduler import Scheduler
    from formcast.engine.sequence import Sequence

    config = EngineConfig(max_num_seqs=64, max_num_batched_tokens=1024, device="cpu")
    bm = BlockManager(num_blocks, block_size, enable_prefix_caching=True, watermark=0.01)
    scheduler = Scheduler(config, bm)
    params = SamplingParams(temperature=0)
    rng = np.random.default_rng(0)
    targets = {}
    for n, m in zip(prompt_lens, output_lens, strict=True):
        seq = Sequence("r", rng.integers(3, 49152, n).tolist(), params)
        targets[seq.seq_id] = n + m
        scheduler.add(seq)
    allocated = unused = 0
    while scheduler.has_unfinished:
        for item in scheduler.schedule().scheduled:
            seq = item.seq
            seq.num_cached_tokens += item.num_new_tokens
            bm.commit_inplace(seq)
            if seq.num_cached_tokens == seq.num_tokens:
                seq.append_token(7)
        for seq in list(scheduler.running):
            if seq.num_tokens >= targets[seq.seq_id]:
                scheduler.finish(seq, "length")
        slots = sum(len(s.block_table) for s in scheduler.running) * block_size
        allocated += slots
        unused += slots - sum(s.num_cached_tokens for s in scheduler.running)
    return unused / max(1, allocated)


def run_hf_generate(hf, prompts, output_lens) -> tuple[float, list[list[int]]]:
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), EOS_ID)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    hf.generation_config.eos_token_id = None
    start = time.perf_counter()
    with torch.no_grad():
        out = hf.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max(output_lens),
            do_sample=False,
            pad_token_id=EOS_ID,
        )
    seconds = time.perf_counter() - start
    return seconds, [out[i, width : width + n].tolist() for i, n in enumerate(output_lens)]


def run_hf_generate_batch(hf, prompts, output_lens) -> tuple[float, list[list[int]]] | str:
    if not hasattr(hf, "generate_batch"):
        return "not available in this transformers"
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max(output_lens), do_sample=False, eos_token_id=-1, pad_token_id=EOS_ID
    )
    try:
        start = time.perf_counter()
        result = hf.generate_batch(prompts, generation_config=config, progress_bar=False)
        seconds = time.perf_counter() - start
    except Exception as exc:  # report why the peer could not run here
        return f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    ordered = [result[k] for k in sorted(result, key=lambda k: int(str(k).split("_")[-1]))]
    tokens = [list(r.generated_tokens)[:n] for r, n in zip(ordered, output_lens, strict=True)]
    return seconds, tokens


def run_poisson(llm: LLM, prompts, output_lens, rate: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, len(prompts)))
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in output_lens]
    start = time.perf_counter()
    next_index = 0
    submitted: dict[str, float] = {}
    last_token: dict[str, float] = {}
    ttft: list[float] = []
    itl: list[float] = []
    while next_index < len(prompts) or llm.has_unfinished_requests():
        now = time.perf_counter() - start
        while next_index < len(prompts) and arrivals[next_index] <= now:
            rid = llm.add_request(prompts[next_index], params[next_index])
            submitted[rid] = start + arrivals[next_index]
            next_index += 1
        if not llm.has_unfinished_requests():
            time.sleep(max(0.0, arrivals[next_index] - now))
            continue
        deltas = llm.step()
        stamp = time.perf_counter()
        for delta in deltas:
            rid = delta.request_id
            if rid in last_token:
                itl.append(stamp - last_token[rid])
            else:
                ttft.append(stamp - submitted[rid])
            last_token[rid] = stamp
            if delta.finished:
                llm.take_output(rid)
    return {
        "ttft_p50": float(np.percentile(ttft, 50)),
        "ttft_p99": float(np.percentile(ttft, 99)),
        "itl_p50": float(np.percentile(itl, 50)),
        "itl_p99": float(np.percentile(itl, 99)),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--min-prompt", type=int, default=32)
    parser.add_argument("--max-prompt", type=int, default=512)
    parser.add_argument("--min-output", type=int, default=32)
    parser.add_argument("--max-output", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument(
        "--poisson-rate", type=float, default=None, help="req/s; default 0.7 x ours"
    )
    parser.add_argument("--skip-hf-batch", action="store_true")
    parser.add_argument(
        "--formcast-only", action="store_true", help="only formcast's timed run (no peers)"
    )
    parser.add_argument("--simulate-only", action="store_true", help="only the KV-waste simulation")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts, output_lens = make_workload(args)
    useful = sum(output_lens)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"torch threads {torch.get_num_threads()}, load avg {os.getloadavg()}"
    )
    print(
        f"workload: {args.num_requests} requests, prompts {args.min_prompt}-{args.max_prompt}, "
        f"outputs {args.min_output}-{args.max_output}, {useful} output tokens, seed {args.seed}"
    )

    rng = np.random.default_rng(args.seed)
    full_prompts = rng.integers(32, 513, 64)
    full_outputs = rng.integers(32, 257, 64)
    for block_size in (16, 32):
        sim = simulate_kv_waste(full_prompts, full_outputs, block_size, 49152 // block_size)
        print(
            f"KV waste, full 64-request workload (scheduler simulation, block {block_size}): "
            f"{100 * sim:.2f}%"
        )
    if args.simulate_only:
        return

    llm = LLM("smollm2-135m", max_num_seqs=64, max_num_batched_tokens=1024, max_model_len=2048)
    llm.generate([prompts[0][:8]], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    ours_s, ours_tokens, waste = run_formcast(llm, prompts, output_lens)
    print(
        f"formcast LLM.generate: {ours_s:.1f}s, {useful / ours_s:.1f} tok/s, "
        f"KV waste {100 * waste:.2f}%, preemptions {llm.scheduler.num_preemptions}"
    )
    if args.formcast_only:
        return

    hf = load_hf_model("smollm2-135m")
    hf_s, hf_tokens = run_hf_generate(hf, prompts, output_lens)
    same = sum(a == b for a, b in zip(ours_tokens, hf_tokens, strict=True))
    print(
        f"transformers generate (padded batch of {len(prompts)}): {hf_s:.1f}s, "
        f"{useful / hf_s:.1f} useful tok/s; speedup {hf_s / ours_s:.2f}x; "
        f"identical greedy outputs {same}/{len(prompts)}"
    )
    if not args.skip_hf_batch:
        cb = run_hf_generate_batch(hf, prompts, output_lens)
        if isinstance(cb, str):
            print(f"transformers generate_batch: {cb}")
        else:
            cb_s, cb_tokens = cb
            same_cb = sum(a == b for a, b in zip(ours_tokens, cb_tokens, strict=True))
            print(
                f"transformers generate_batch: {cb_s:.1f}s, {useful / cb_s:.1f} useful tok/s; "
                f"speedup {cb_s / ours_s:.2f}x; identical {same_cb}/{len(prompts)}"
            )

    rate = args.poisson_rate or 0.7 * len(prompts) / ours_s
    latency = run_poisson(llm, prompts, output_lens, rate, args.seed + 1)
    print(
        f"Poisson arrivals at {rate:.2f} req/s: TTFT p50 {latency['ttft_p50']:.2f}s "
        f"p99 {latency['ttft_p99']:.2f}s; inter-token p50 {1e3 * latency['itl_p50']:.0f}ms "
        f"p99 {1e3 * latency['itl_p99']:.0f}ms; {latency['seconds']:.1f}s total"
    )


if __name__ == "__main__":
    main()
