"""Sampling latency on CPU: formcast's Sampler vs transformers' warper chain, same run.

Both sides do the same work per step on the same float32 (B, V) logits: temperature ->
top-k -> top-p -> min-p filtering and one sampled token per row. transformers: its
LogitsProcessorList (Temperature, TopK, TopP, MinP warpers) then softmax + torch.multinomial,
as `generate` does. formcast: `SamplingBatch.build` (included in the time) + `Sampler()`.

Logits are synthetic but LLM-shaped: Zipf-like (logit = -1.1 * log(rank) * 3 + N(0, 0.5)),
randomly permuted per row. A "flat" variant (N(0, 2) logits, huge nuclei) is the worst case
for formcast's top-k candidate search and is reported too.

Wall-clock and process CPU time are both reported (medians): on a machine shared with other
jobs, CPU time is the fairer measure; with ``--threads 1`` it equals uncontended latency.

Usage: python benchmarks/bench_sampling.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from formcast.samplers import Sampler, SamplingBatch, SamplingParams

CONFIGS = {
    "T0.7 k50 p0.9 minp0.05": dict(temperature=0.7, top_k=50, top_p=0.9, min_p=0.05),
    "T0.8 p0.95": dict(temperature=0.8, top_p=0.95),
    "T1.0 only": dict(temperature=1.0),
}


def make_logits(num_rows: int, vocab_size: int, kind: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    if kind == "flat":
        return torch.randn(num_rows, vocab_size, generator=generator) * 2
    ranks = torch.arange(1, vocab_size + 1, dtype=torch.float32)
    base = -1.1 * torch.log(ranks) * 3  # Zipf-like decay of probabilities
    logits = base + torch.randn(num_rows, vocab_size, generator=generator) * 0.5
    order = torch.argsort(torch.rand(num_rows, vocab_size, generator=generator), dim=-1)
    return logits.gather(1, order)


def hf_chain(settings: dict) -> LogitsProcessorList:
    chain = LogitsProcessorList([TemperatureLogitsWarper(settings["temperature"])])
    if settings.get("top_k", 0) > 0:
        chain.append(TopKLogitsWarper(settings["top_k"]))
    if settings.get("top_p", 1.0) < 1:
        chain.append(TopPLogitsWarper(settings["top_p"]))
    if settings.get("min_p", 0.0) > 0:
        chain.append(MinPLogitsWarper(settings["min_p"]))
    return chain


def time_call(fn, repeats: int) -> tuple[float, float]:
    """Median wall-clock ms and median process CPU ms (robust to a loaded machine)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def run_cell(num_rows, vocab_size, settings, kind, repeats):
    logits = make_logits(num_rows, vocab_size, kind)
    input_ids = torch.zeros(num_rows, 1, dtype=torch.long)
    chain = hf_chain(settings)
    params = [SamplingParams(**settings)] * num_rows
    empty = [()] * num_rows
    sampler = Sampler()

    def transformers_step():
        scores = chain(input_ids, logits)
        return torch.multinomial(scores.softmax(dim=-1), 1).squeeze(1)

    def formcast_step():
        batch = SamplingBatch.build(params, empty, empty, vocab_size, [2])
        return sampler(logits, batch).token_ids

    return time_call(transformers_step, repeats), time_call(formcast_step, repeats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="B in {1, 32}, V=49152 only")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch_sizes = [1, 32] if args.quick else [1, 32, 256]
    vocab_sizes = [49152] if args.quick else [49152, 262144]
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"{platform.processor() or platform.machine()}"
    )
    print(
        "| logits | config | B | V | transformers wall ms | formcast wall ms | wall speedup "
        "| transformers CPU ms | formcast CPU ms | CPU speedup |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cells = [("zipf", name, b, v) for name in CONFIGS for v in vocab_sizes for b in batch_sizes]
    cells += [("flat", "T0.7 k50 p0.9 minp0.05", 32, v) for v in vocab_sizes]
    cells += [("flat", "T0.8 p0.95", 32, v) for v in vocab_sizes]
    for kind, name, num_rows, vocab_size in cells:
        repeats = 3 if num_rows * vocab_size > 4_000_000 else 7
        (hf_wall, hf_cpu), (ours_wall, ours_cpu) = run_cell(
            num_rows, vocab_size, CONFIGS[name], kind, repeats
        )
        print(
            f"| {kind} | {name} | {num_rows} | {vocab_size} | {hf_wall:.2f} | {ours_wall:.2f} | "
            f"{hf_wall / ours_wall:.2f}x | {hf_cpu:.2f} | {ours_cpu:.2f} | "
            f"{hf_cpu / ours_cpu:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
