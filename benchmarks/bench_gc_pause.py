"""Garbage-collector pauses in a loaded server process, with and without ``gc.freeze()``.

A loaded server process holds over half a million objects that it never frees (torch, the
tokenizer's tables, the vocabulary, numba's kernels, grammar memos); every full (gen-2)
collection walks them, and the request that allocates at that moment pays the pause. The
question is whether freezing the heap (as vLLM does after its start-up) bounds the mask tail.
This loads the engine as ``formcast serve`` does
(SmolLM2), compiles and walks the wild corpus (every valid instance's tokens, first visits
included), then reports in the same process: tracked objects, the time of a full
``gc.collect()`` (median of 5), and over repeated compile-and-walk rounds with the collector
running on its own, the slowest single mask and how many automatic gen-2 collections ran.
Rounds alternate frozen / not frozen (``gc.unfreeze`` between them). Run by hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_gc_pause.py
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "benchmarks" / "data" / "wild_corpus.jsonl"


def full_collection_ms(num: int = 5) -> float:
    times = []
    for _ in range(num):
        began = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


class Gen2Counter:
    """Counts automatic full collections and their longest pause (gc.callbacks)."""

    def __init__(self) -> None:
        self.num_full = 0
        self.longest_ms = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.num_full += 1
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self._began) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode")
    args = parser.parse_args()

    from formcast.engine.llm_engine import LLM
    from formcast.errors import FormcastError
    from formcast.grammar import allocate_token_bitmask
    from formcast.grammar.json_schema.compile import compile_json_schema
    from formcast.server.async_engine import AsyncEngine

    engine = AsyncEngine(LLM("smollm2-135m"))
    llm = engine.llm
    vocab = llm.structured_output.vocab
    tokenizer = llm.tokenizer
    rows = [json.loads(line) for line in open(CORPUS, encoding="utf-8")]
    walks = []
    for row in rows:
        texts = [json.dumps(t["data"]) for t in row["tests"] if t.get("valid", True)]
        walks.append(
            (row["schema"], [tokenizer.encode(t, add_special_tokens=False) for t in texts])
        )
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)

    def round_of_work() -> float:
        """Compile every schema (no cache) and walk its valid instances; slowest mask (ms)."""
        slowest = 0.0
        for schema, token_lists in walks:
            try:
                grammar = compile_json_schema(schema, vocab, strict=False, cache=False)
            except FormcastError:
                continue
            for ids in token_lists:
                matcher = grammar.matcher()
                for token_id in ids:
                    began = time.perf_counter()
                    matcher.fill_bitmask(bitmask, 0)
                    slowest = max(slowest, time.perf_counter() - began)
                    if not matcher.accept_token(token_id):
                        break
        return slowest * 1e3

    round_of_work()  # memos and kernels in place, as in a server that has run a while
    counter = Gen2Counter()
    gc.callbacks.append(counter)
    results: dict[str, dict] = {"not frozen": {}, "frozen": {}}
    for mode in ["not frozen", "frozen"] * args.rounds:
        if mode == "frozen":
            gc.collect()
            gc.freeze()
            num_frozen = gc.get_freeze_count()
        else:
            gc.unfreeze()
            gc.collect()
            num_frozen = 0
        tracked = len(gc.get_objects())
        pause_ms = full_collection_ms()
        counter.num_full, counter.longest_ms = 0, 0.0
        slowest_mask_ms = round_of_work()
        out = results[mode]
        out.setdefault("frozen_objects", []).append(num_frozen)
        out.setdefault("tracked_objects", []).append(tracked)
        out.setdefault("full_collect_ms", []).append(round(pause_ms, 1))
        out.setdefault("auto_gen2_collections", []).append(counter.num_full)
        out.setdefault("longest_auto_gen2_ms", []).append(round(counter.longest_ms, 1))
        out.setdefault("slowest_mask_ms", []).append(round(slowest_mask_ms, 2))
        print(mode, {k: v[-1] for k, v in out.items()}, flush=True)
    print(json.dumps({"machine": platform.processor() or platform.machine(), **results}))


if __name__ == "__main__":
    main()
