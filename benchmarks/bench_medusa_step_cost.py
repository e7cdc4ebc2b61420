"""Medusa step cost on SmolLM2 (CPU): a tree verification span vs a plain decode step.

One sequence with a chat prompt is prefilled; then, interleaved ``--repeats`` times (so load
drift on a shared machine hits every variant alike), the runner computes: a plain decode step
(1 row), and tree spans of the root plus ``N`` nodes for several trees (``N + 1`` rows, tree
attention, ``N + 1`` logits rows), without advancing the cache. Also timed: the Medusa heads'
top-k for one hidden row (shipped heads). Medians in ms; ``ratio`` is span / decode.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_medusa_step_cost.py --threads 1``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from formcast.decoding.speculative.draft_tree import TreeTopology, build_tree  # noqa: E402
from formcast.engine.llm_engine import LLM  # noqa: E402
from formcast.engine.scheduler import ScheduledSeq  # noqa: E402
from formcast.engine.speculative.medusa_heads import MedusaHeads, default_medusa_heads_path  # noqa: E402
from formcast.samplers import SamplingParams  # noqa: E402

TREES = {
    "top3 (3 nodes)": [[0], [1], [2]],
    "default (4 nodes)": None,
    "6 nodes": [[0], [1], [2], [0, 0], [1, 0], [0, 0, 0]],
    "10 nodes": [[0], [1], [2], [3], [0, 0], [0, 1], [1, 0], [0, 0, 0], [2, 0], [0, 0, 1]],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    llm = LLM("smollm2-135m", max_model_len=1024, max_num_seqs=4)
    prompt = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    llm.add_request(prompt, SamplingParams(temperature=0, max_tokens=64))
    for _ in range(3):
        llm.step()
    seq = llm.scheduler.running[0]
    runner, bm = llm.runner, llm.block_manager
    bm.grow_inplace(seq, seq.num_uncached_tokens + 16)
    committed = list(seq.token_ids)
    trees = {}
    for name, choices in TREES.items():
        topology = TreeTopology() if choices is None else TreeTopology(choices)
        tree = build_tree(topology, [[100 + r for r in range(4)]] * 3)
        trees[name] = tree
    model = runner.model.model
    path = default_medusa_heads_path(llm.model_path)
    heads = None if path is None else MedusaHeads.load(path, model.embed_tokens.weight)
    times: dict[str, list[float]] = {"decode (1 row)": [], "heads top-k": []}
    times.update({name: [] for name in trees})
    hidden = torch.randn(1, llm.model_config.hidden_size)
    for _ in range(args.repeats):
        for name in times:
            del seq.token_ids[len(committed) :]
            seq.token_ids[:] = committed
            if name == "heads top-k":
                if heads is None:
                    continue
                begin = time.perf_counter()
                heads.top_candidates(hidden, 4)
                times[name].append(time.perf_counter() - begin)
                continue
            tree = trees.get(name)
            extra = [] if tree is None else tree.token_ids
            seq.token_ids.extend(extra)
            n = seq.num_uncached_tokens
            item = ScheduledSeq(seq, n, n)
            kwargs = {}
            if tree is not None:
                kwargs["trees"] = {seq.seq_id: (tree.depths, tree.ancestor_mask())}
            begin = time.perf_counter()
            runner.execute([item], [], **kwargs)
            times[name].append(time.perf_counter() - begin)
    seq.token_ids[:] = committed
    base = statistics.median(times["decode (1 row)"])
    print(f"threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    print("| step | rows | median ms | ratio to decode |")
    print("|---|---|---|---|")
    for name, values in times.items():
        if not values:
            continue
        rows = "-" if name == "heads top-k" else 1 + (len(trees[name]) if name in trees else 0)
        median = statistics.median(values)
        print(f"| {name} | {rows} | {1000 * median:.1f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
