"""formcast's engine against vLLM's CPU build: same model folder, prompts and sampling.

Workloads (greedy, ``ignore_eos`` so every request writes exactly its token budget):
``batch`` 32 requests x 64 tokens, ``single`` 1 request x 128 tokens, and ``json`` 32
JSON-schema requests (formcast's grammar vs vLLM's xgrammar backend, stopping at the end of
the JSON; wall time and valid outputs). Both engines compile their decode forward at start
(formcast ``compile_decode=True``, vLLM's default ``torch.compile``); ``load_s`` includes it.
One engine per process, one after the other: formcast
runs in this interpreter's environment, vLLM in ``.venv-vllm`` (``make vllm``). Reports
tokens/s, ratios, and whether the greedy tokens are identical (expected in float32).

formcast's JSON runs alternate with the same prompts unconstrained, each request writing as
many tokens as its JSON answer had (``ignore_eos``): the same work without a grammar, so
``constrained_ratio`` = unconstrained wall / constrained wall (medians) is the grammar's cost
(1.0 = free).
The prefix cache is reset before every timed run (both engines), so each computes its prompts
(until stop 36 only the constrained run did, which put the ratio at 0.46-0.74). Each timed
run is repeated ``--repeats`` times (default 3; one until stop 37) and the median wall time
reported: single runs on this host moved by 10-30% between runs.

``--busy-core`` repeats everything with a busy-loop process pinned to the first core (another
tenant of the machine): each engine's rate with one core taken, against its idle rate.

    .venv/bin/python benchmarks/bench_vs_vllm.py --dtypes float32,bfloat16 [--busy-core]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
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
TOPICS = [
    "the sea", "a city at night", "an old library", "a mountain road", "a rainy morning",
    "a chess game", "a busy kitchen", "a quiet forest", "a train station", "a desert",
    "a winter market", "a garden", "a lighthouse", "a violin", "a bakery", "a river",
]  # fmt: skip


def workloads() -> dict[str, dict]:
    """name -> prompts (chat text), max_tokens, whether constrained."""
    stories = [f"Write a short story about {TOPICS[i % len(TOPICS)]}, part {i}." for i in range(32)]
    users = [f"Describe user number {i} as JSON with name, age, email and tags." for i in range(32)]
    return {
        "batch": {"prompts": stories, "max_tokens": 64, "json": False},
        "single": {"prompts": stories[:1], "max_tokens": 128, "json": False},
        "json": {"prompts": users, "max_tokens": 128, "json": True},
    }


def prompt_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    ids = []
    for text in texts:
        chat = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        ids.append(tokenizer.encode(chat, add_special_tokens=False))
    return ids


def run_formcast(folder: str, dtype: str, names: list[str], repeats: int) -> dict:
    from formcast.engine.llm_engine import LLM
    from formcast.engine.models.loader import load_tokenizer
    from formcast.samplers import SamplingParams

    tokenizer = load_tokenizer(folder)
    started = time.perf_counter()
    # the serving configuration, as vLLM's: decode compiled per batch bucket at start
    llm = LLM(folder, dtype=dtype, max_num_seqs=32, max_model_len=1024, compile_decode=True)
    load_s = time.perf_counter() - started
    llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4))  # warm-up
    results = {"load_s": round(load_s, 1)}
    for name in names:
        work = workloads()[name]
        ids = prompt_ids(tokenizer, work["prompts"])
        params = SamplingParams(
            temperature=0, max_tokens=work["max_tokens"], ignore_eos=not work["json"]
        )
        grammar = {"json_schema": SCHEMA} if work["json"] else None
        if grammar is not None:  # compile outside the timed run, as vLLM's warm cache would
            llm.generate([ids[0]], SamplingParams(temperature=0, max_tokens=2), grammar=grammar)

        def constrained(ids=ids, params=params, grammar=grammar):
            return llm.generate(ids, params, grammar=grammar)

        if grammar is None:
            wall_s, outputs = _timed(constrained, llm.reset_prefix_cache, repeats)
        else:  # constrained and the same work without the grammar, alternating (host drift
            # then weighs on both alike), prompts computed afresh each time
            walls, free_walls, outputs = [], [], []
            for _ in range(repeats):
                one_s, outputs = _timed(constrained, llm.reset_prefix_cache, 1)
                free = [
                    SamplingParams(
                        temperature=0, max_tokens=max(1, len(o.token_ids)), ignore_eos=True
                    )
                    for o in outputs
                ]
                free_s, _ = _timed(lambda ids=ids, free=free: llm.generate(ids, free),
                                   llm.reset_prefix_cache, 1)  # fmt: skip
                walls.append(one_s)
                free_walls.append(free_s)
            wall_s = statistics.median(walls)
        results[name] = _summary(wall_s, [list(o.token_ids) for o in outputs],
                                 [o.text for o in outputs], work["json"])  # fmt: skip
        if grammar is not None:
            free_s = statistics.median(free_walls)
            results[name]["unconstrained_wall_s"] = round(free_s, 3)
            results[name]["constrained_ratio"] = round(free_s / wall_s, 3)
    results["threads"] = torch_threads()
    return results


def _timed(run, reset, repeats: int) -> tuple[float, list]:
    """The median wall time of ``repeats`` runs, each after ``reset()`` (the prefix cache: every
    run computes its prompts), and the last run's outputs."""
    walls, outputs = [], []
    for _ in range(repeats):
        reset()
        started = time.perf_counter()
        outputs = run()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls), outputs


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def run_vllm(folder: str, dtype: str, names: list[str], repeats: int) -> dict:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    tokenizer = AutoTokenizer.from_pretrained(folder)
    started = time.perf_counter()
    llm = LLM(
        folder,
        dtype=dtype,
        max_num_seqs=32,
        max_model_len=1024,
        seed=0,
        structured_outputs_config={"backend": "xgrammar"},
    )
    load_s = time.perf_counter() - started
    llm.generate([TokensPrompt(prompt_token_ids=[1, 2, 3])], SamplingParams(max_tokens=4),
                 use_tqdm=False)  # fmt: skip
    results = {"load_s": round(load_s, 1)}
    for name in names:
        work = workloads()[name]
        prompts = [
            TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids(tokenizer, work["prompts"])
        ]
        structured = StructuredOutputsParams(json=SCHEMA) if work["json"] else None
        params = SamplingParams(
            temperature=0,
            max_tokens=work["max_tokens"],
            ignore_eos=not work["json"],
            structured_outputs=structured,
        )
        if structured is not None:
            llm.generate(prompts[:1], params, use_tqdm=False)  # the grammar compiled once

        def run(prompts=prompts, params=params):
            return llm.generate(prompts, params, use_tqdm=False)

        wall_s, outputs = _timed(run, llm.reset_prefix_cache, repeats)
        results[name] = _summary(wall_s, [list(o.outputs[0].token_ids) for o in outputs],
                                 [o.outputs[0].text for o in outputs], work["json"])  # fmt: skip
    results["threads"] = torch_threads()
    return results


def _summary(wall_s: float, token_ids: list[list[int]], texts: list[str], is_json: bool) -> dict:
    num_tokens = sum(len(ids) for ids in token_ids)
    summary = {
        "wall_s": round(wall_s, 3),
        "tokens": num_tokens,
        "tokens_per_s": round(num_tokens / wall_s, 1),
        "token_ids": token_ids,
    }
    if is_json:
        import jsonschema

        num_valid = 0
        for text in texts:
            try:
                jsonschema.validate(json.loads(text), SCHEMA)
                num_valid += 1
            except (ValueError, jsonschema.ValidationError):
                pass
        summary["num_valid"] = num_valid
    return summary


def run_worker(
    python: str, folder: str, workloads: str, engine: str, dtype: str, repeats: int
) -> dict:
    """One engine in its own process (its own virtual environment); its results."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    command = [python, __file__, "--model", folder, "--workloads", workloads,
               "--repeats", str(repeats), "--worker", engine, dtype, out]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    completed = subprocess.run(command, capture_output=True, text=True, env=env)
    if completed.returncode != 0:
        raise SystemExit(f"{engine} {dtype} failed:\n{completed.stderr[-4000:]}")
    return json.loads(Path(out).read_text())


@contextlib.contextmanager
def busy_first_core(is_busy: bool):
    """A busy-loop process pinned to the first core we may use, while the block runs."""
    if not is_busy:
        yield
        return
    core = min(os.sched_getaffinity(0))
    code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    spinner = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def compare(results: dict, name: str, dtype: str) -> dict:
    """One workload's row: both engines' rates, ratios, identical greedy outputs."""
    ours, theirs = results["formcast"][name], results["vllm"][name]
    row = {
        "dtype": dtype,
        "workload": name,
        "formcast_tok_s": ours["tokens_per_s"],
        "vllm_tok_s": theirs["tokens_per_s"],
        "ratio_tok_s": round(ours["tokens_per_s"] / theirs["tokens_per_s"], 2),
        "formcast_wall_s": ours["wall_s"],
        "vllm_wall_s": theirs["wall_s"],
        "ratio_wall": round(theirs["wall_s"] / ours["wall_s"], 2),
        "identical_tokens": sum(
            a == b for a, b in zip(ours["token_ids"], theirs["token_ids"], strict=True)
        ),
        "num_requests": len(ours["token_ids"]),
    }
    if "num_valid" in ours:
        row["formcast_valid"], row["vllm_valid"] = ours["num_valid"], theirs["num_valid"]
    if "constrained_ratio" in ours:
        row["formcast_constrained_ratio"] = ours["constrained_ratio"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--workloads", default="batch,single,json")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", default=None, help="write the JSON results here")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs per workload (median; prefix cache reset before each)")  # fmt: skip
    parser.add_argument("--busy-core", action="store_true",
                        help="also run with a busy process pinned to the first core")  # fmt: skip
    parser.add_argument("--worker", nargs=3, metavar=("ENGINE", "DTYPE", "OUT"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    names = args.workloads.split(",")
    if args.worker:
        engine, dtype, out = args.worker
        run = run_formcast if engine == "formcast" else run_vllm
        Path(out).write_text(json.dumps(run(args.model, dtype, names, args.repeats)))
        return

    from formcast.engine.models.loader import resolve_model_path

    folder = str(resolve_model_path(args.model))
    rows = []
    for condition in ("idle", "busy_core") if args.busy_core else ("idle",):
        for dtype in args.dtypes.split(","):
            results = {}
            for engine, python in (("formcast", sys.executable), ("vllm", str(VLLM_PYTHON))):
                with busy_first_core(condition == "busy_core"):
                    results[engine] = run_worker(
                        python, folder, args.workloads, engine, dtype, args.repeats
                    )
            for name in names:
                row = compare(results, name, dtype)
                row["condition"] = condition
                rows.append(row)
                print(json.dumps(row), flush=True)
            print(json.dumps({"condition": condition, "dtype": dtype,
                              "load_s": {k: v["load_s"] for k, v in results.items()},
                              "threads": {k: v["threads"] for k, v in results.items()}}),
                  flush=True)  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
