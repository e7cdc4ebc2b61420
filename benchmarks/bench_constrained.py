"""Grammar-constrained generation in the engine: overhead, jump-forward speedup, mask time.

Workload (fixed seed): N JSONSchemaBench schemas (JSON text at most --max-schema-chars, ones
our compiler refuses are skipped and counted), one chat prompt per schema asking for a
matching object, greedy decoding, N requests submitted at once to one ``LLM``. Prefix caching
is off so repeated runs of the same prompts cost the same.

Measured:

1. Constrained (jump-forward off) vs unconstrained throughput at equal lengths: the
   unconstrained run gets ``max_tokens`` = each constrained output's length and ignores EOS,
   so both runs produce the same token counts; ratio of output tokens per wall second (and
   per CPU second). Runs alternate (constrained, unconstrained, ...) ``--repeats`` times; the
   best run of each counts (the machine is shared).
2. Jump-forward on vs off: engine steps, per-sequence forward passes (sampled tokens plus
   the prompt pass), wall clock, share of forced tokens, validity of both (``jsonschema``),
   and how often the greedy text with jump-forward equals the text without it.
3. Mask time per step: time the step waited for its bitmask after the forward pass (not
   hidden), and the worker's fill time (hidden behind the forward), p50 / p99 / mean.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_constrained.py [--num-requests 64]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from formcast.engine.llm_engine import LLM  # noqa: E402
from formcast.errors import CompileBudgetError, SchemaError  # noqa: E402
from formcast.grammar.json_schema.compile import compile_json_schema  # noqa: E402
from formcast.samplers import SamplingParams  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow"]


def load_schemas(args: argparse.Namespace) -> list[dict]:
    pool = []
    for split in SPLITS:
        with open(DATA / f"{split}.jsonl", encoding="utf-8") as handle:
            for line in handle:
                if len(line) > 20 * args.max_schema_chars:
                    continue
                row = json.loads(line)
                if len(json.dumps(row["schema"])) <= args.max_schema_chars:
                    pool.append(row)
    random.Random(args.seed).shuffle(pool)
    return pool


def prompt_for(schema) -> list[dict[str, str]]:
    text = json.dumps(schema)[:160]
    return [
        {
            "role": "user",
            "content": f"Reply with a JSON object that matches this JSON schema: {text}",
        }
    ]


def validator(schema):
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def is_valid(out, schema) -> bool:
    if not out.is_grammar_complete:
        return False
    try:
        return validator(schema).is_valid(json.loads(out.text))
    except (ValueError, RecursionError):
        return False


class StepTimer:
    """Wrap the engine's mask join to record, per step, the wait and the worker's fill time."""

    def __init__(self, llm: LLM) -> None:
        self.waits: list[float] = []
        self.fills: list[float] = []
        filler = llm.mask_filler
        result = filler.result

        def timed_result():
            bitmask = result()
            if bitmask is not None:
                self.waits.append(filler.last_wait_seconds)
                self.fills.append(filler.last_fill_seconds)
            return bitmask

        filler.result = timed_result


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(llm: LLM, prompts, params, grammars, jump_forward):
    before = llm.stats
    cpu, wall = time.process_time(), time.perf_counter()
    outputs = llm.generate(prompts, params, grammar=grammars, jump_forward=jump_forward)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    kind = "free" if grammars is None else f"constrained jf={jump_forward}"
    log(f"  {kind}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    return outputs, wall, cpu, llm.stats.since(before)


def pct(values, q):
    return 1e3 * float(np.percentile(values, q)) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-schema-chars", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument(
        "--whitespace", default="compact", help="compile_json_schema layout (compact, spaced, ...)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    llm = LLM(
        "smollm2-135m",
        max_num_seqs=args.num_requests,
        max_model_len=1024,
        enable_prefix_caching=False,
    )
    vocab = llm.structured_output.vocab
    schemas, grammars, refused = [], [], 0
    compile_start = time.perf_counter()
    for row in load_schemas(args):
        if len(schemas) == args.num_requests:
            break
        try:
            grammars.append(compile_json_schema(row["schema"], vocab, whitespace=args.whitespace))
        except (SchemaError, CompileBudgetError):
            refused += 1
            continue
        schemas.append(row["schema"])
    compile_seconds = time.perf_counter() - compile_start
    log(f"compiled {len(schemas)} schemas in {compile_seconds:.1f} s ({refused} refused)")
    prompts = [prompt_for(s) for s in schemas]
    greedy = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    timer = StepTimer(llm)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=4))  # warm-up

    best = {}
    constrained = None
    for _ in range(args.repeats):
        outs, wall, cpu, stats = run(llm, prompts, greedy, grammars, False)
        constrained = constrained or (outs, stats)
        lengths = [len(o.token_ids) for o in outs]
        tokens = sum(lengths)
        if "c" not in best or wall < best["c"][0]:
            best["c"] = (wall, cpu, tokens, stats)
        free_params = [
            SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths
        ]
        free_outs, wall, cpu, _ = run(llm, prompts, free_params, None, None)
        assert [len(o.token_ids) for o in free_outs] == lengths
        if "u" not in best or wall < best["u"][0]:
            best["u"] = (wall, cpu, tokens, None)
    off_outs, off_stats = constrained
    waits_off, fills_off = list(timer.waits), list(timer.fills)
    timer.waits.clear()
    timer.fills.clear()
    on_outs, on_wall, on_cpu, on_stats = run(llm, prompts, greedy, grammars, True)
    off_wall = best["c"][0]

    def passes(outs):  # per-sequence forward passes = sampled tokens (the prompt pass samples one)
        return sum(len(o.token_ids) - o.outputs[0].num_forced_tokens for o in outs)

    both = [
        i
        for i in range(len(schemas))
        if off_outs[i].is_grammar_complete and on_outs[i].is_grammar_complete
    ]
    same_text = sum(off_outs[i].text == on_outs[i].text for i in both)
    valid_off = sum(is_valid(o, s) for o, s in zip(off_outs, schemas, strict=True))
    valid_on = sum(is_valid(o, s) for o, s in zip(on_outs, schemas, strict=True))
    complete_off = sum(bool(o.is_grammar_complete) for o in off_outs)
    complete_on = sum(bool(o.is_grammar_complete) for o in on_outs)
    on_tokens = sum(len(o.token_ids) for o in on_outs)

    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"schemas: {len(schemas)} compiled, {refused} refused (skipped), compile "
        f"{compile_seconds:.1f} s; max_tokens={args.max_tokens}, greedy, prefix cache off, "
        f"whitespace={args.whitespace}"
    )
    cw, ccpu, ctok, _ = best["c"]
    uw, ucpu, utok, _ = best["u"]
    print("\n| run | output tokens | wall s | tok/s (wall) | CPU s | tok/CPU-s |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| unconstrained (same lengths) | {utok} | {uw:.1f} | {utok / uw:.1f} | {ucpu:.1f} | "
        f"{utok / ucpu:.1f} |"
    )
    print(
        f"| constrained, JF off | {ctok} | {cw:.1f} | {ctok / cw:.1f} | {ccpu:.1f} | "
        f"{ctok / ccpu:.1f} |"
    )
    print(
        f"| constrained, JF on | {on_tokens} | {on_wall:.1f} | {on_tokens / on_wall:.1f} | "
        f"{on_cpu:.1f} | {on_tokens / on_cpu:.1f} |"
    )
    print(
        f"\nconstrained/unconstrained throughput (JF off): wall {(ctok / cw) / (utok / uw):.3f}, "
        f"CPU {(ctok / ccpu) / (utok / ucpu):.3f}"
    )
    print(
        "\n| jump-forward | engine steps | sequence forward passes | forced tokens | "
        "complete | valid (jsonschema) | wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| off | {off_stats.num_steps} | {passes(off_outs)} | 0 | {complete_off} | "
        f"{valid_off} | {off_wall:.1f} |"
    )
    print(
        f"| on | {on_stats.num_steps} | {passes(on_outs)} | {on_stats.num_forced_tokens} "
        f"({on_stats.num_forced_tokens / max(1, on_tokens):.1%} of output) | {complete_on} | "
        f"{valid_on} | {on_wall:.1f} |"
    )
    both_off = sum(len(off_outs[i].token_ids) for i in both)
    both_on = sum(len(on_outs[i].token_ids) - on_outs[i].outputs[0].num_forced_tokens for i in both)
    print(
        f"\nJF speedup: engine steps {off_stats.num_steps / on_stats.num_steps:.2f}x, "
        f"sequence forward passes {passes(off_outs) / passes(on_outs):.2f}x "
        f"(on the {len(both)} requests complete in both runs: "
        f"{both_off / max(1, both_on):.2f}x), wall {off_wall / on_wall:.2f}x"
    )
    print(
        f"greedy text with JF == without JF: {same_text}/{len(both)} of the requests "
        "complete in both runs"
    )
    print("\n| masks per step (ms) | p50 | p99 | mean | steps |")
    print("|---|---:|---:|---:|---:|")
    for name, values in (
        ("fill (worker, JF off)", fills_off),
        ("wait after forward = not hidden (JF off)", waits_off),
        ("fill (worker, JF on)", timer.fills),
        ("wait after forward = not hidden (JF on)", timer.waits),
    ):
        mean = 1e3 * float(np.mean(values)) if values else 0.0
        print(
            f"| {name} | {pct(values, 50):.3f} | {pct(values, 99):.3f} | {mean:.3f} | "
            f"{len(values)} |"
        )
    print(
        f"\nforward time per step (JF off, first run): "
        f"{1e3 * off_stats.forward_seconds / off_stats.num_steps:.0f} ms"
    )


if __name__ == "__main__":
    main()
