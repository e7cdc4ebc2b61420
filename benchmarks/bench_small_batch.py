"""Small-batch matmuls on CPU: ``formcast.engine.models.linear`` vs plain ``F.linear``, same run.

Two measurements, each alternating the two policies in one process so machine load hits both:

1. Per row count ``M`` (1..16): the summed time of one decoder layer's four matmuls (x the
   number of layers) and of the LM head, for SmolLM2-135M shapes with random weights.
2. The engine end to end: greedy decoding of ``--num-tokens`` tokens for batches of 1, 2, 4 and
   8 random-token prompts (EOS ignored), decode tokens per second with each policy, and
   whether the tokens are identical.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_small_batch.py [--threads 2]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import formcast.engine.models.llama as llama_module  # noqa: E402
from formcast.engine.llm_engine import LLM  # noqa: E402
from formcast.engine.models.linear import LMHead, linear  # noqa: E402
from formcast.samplers import SamplingParams  # noqa: E402

HIDDEN, INTERMEDIATE, KV, VOCAB, LAYERS = 576, 1536, 192, 49152, 30


def _time_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    begin = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - begin) / repeats * 1e3


def matmul_table(repeats: int) -> None:
    shapes = [(HIDDEN + 2 * KV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTERMEDIATE, HIDDEN)]
    shapes.append((HIDDEN, INTERMEDIATE))
    weights = [torch.randn(*shape) for shape in shapes]
    head = torch.randn(VOCAB, HIDDEN)
    lm_head = LMHead()
    print(
        "| rows M | layers F.linear ms | layers linear() ms | LM head F.linear ms | "
        "LM head LMHead ms |"
    )
    print("|---|---|---|---|---|")
    for rows in range(1, 17):
        layer_plain = layer_ours = 0.0
        for weight in weights:
            x = torch.randn(rows, weight.shape[1])
            layer_plain += _time_ms(lambda: F.linear(x, weight), repeats)  # noqa: B023
            layer_ours += _time_ms(lambda: linear(x, weight), repeats)  # noqa: B023
        x = torch.randn(rows, HIDDEN)
        head_plain = _time_ms(lambda: F.linear(x, head), max(repeats // 4, 3))  # noqa: B023
        head_ours = _time_ms(lambda: lm_head(x, head), max(repeats // 4, 3))  # noqa: B023
        print(
            f"| {rows} | {layer_plain * LAYERS:.1f} | {layer_ours * LAYERS:.1f} | "
            f"{head_plain:.2f} | {head_ours:.2f} |",
            flush=True,
        )


@contextlib.contextmanager
def plain_linear():
    """Swap the engine's matmul policy for plain ``F.linear`` (the baseline)."""
    saved_linear, saved_call = llama_module.linear, LMHead.__call__
    llama_module.linear = F.linear
    LMHead.__call__ = lambda self, hidden, weight: F.linear(hidden, weight)
    try:
        yield
    finally:
        llama_module.linear, LMHead.__call__ = saved_linear, saved_call


def engine_table(num_tokens: int, repeats: int) -> None:
    llm = LLM("smollm2-135m")
    rng = np.random.default_rng(0)
    print("\n| batch | F.linear tok/s | linear() tok/s | speedup | same tokens |")
    print("|---|---|---|---|---|")
    for batch in (1, 2, 4, 8):
        prompts = [rng.integers(3, VOCAB, 24).tolist() for _ in range(batch)]
        params = SamplingParams(temperature=0, max_tokens=num_tokens, ignore_eos=True)
        seconds = {"plain": [], "ours": []}
        tokens = {}
        for _ in range(repeats):
            for name in ("plain", "ours"):
                context = plain_linear() if name == "plain" else contextlib.nullcontext()
                with context:
                    begin = time.perf_counter()
                    outputs = llm.generate(prompts, params)
                    seconds[name].append(time.perf_counter() - begin)
                tokens[name] = [list(o.token_ids) for o in outputs]
        rate = {k: batch * num_tokens / min(v) for k, v in seconds.items()}
        same = tokens["plain"] == tokens["ours"]
        print(
            f"| {batch} | {rate['plain']:.1f} | {rate['ours']:.1f} | "
            f"{rate['ours'] / rate['plain']:.2f}x | {same} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--num-tokens", type=int, default=48)
    parser.add_argument("--engine-repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, threads {args.threads}, load {os.getloadavg()[0]:.1f}"
    )
    matmul_table(args.repeats)
    engine_table(args.num_tokens, args.engine_repeats)


if __name__ == "__main__":
    main()
