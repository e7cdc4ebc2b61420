"""Big grammar requests: what one costs the serving process, and how long until it is answered.

Each case is one grammar a server may receive (the issue 26 reproducers). It is submitted to
the engine's `GrammarCompiler` the way ``formcast serve`` does (size limits first, then a
worker process under the compile budgets) and, for comparison, compiled in a thread of this
process (the way the server compiled before issue 26). For each: the outcome, seconds until
the request is answered, the most this process's resident memory grew, and the longest a
1 ms ticker thread was kept from running (how long the event loop or engine thread would
have stalled). One process per case and mode, so memory and kernel warm-up do not carry over.

Run: ``.venv/bin/python benchmarks/bench_big_grammars.py [--modes thread,workers]`` (about
5 minutes; ``--modes thread`` with ``PYTHONPATH`` at an older tree measures it as it was).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

CASES = {
    "regex [0-9]{1,1000000}": {"regex": "[0-9]{1,1000000}"},
    "10,000 required properties": {
        "json_schema": {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"} for i in range(10_000)},
            "required": [f"p{i}" for i in range(10_000)],
        }
    },
    "600 optional properties": {
        "json_schema": {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"} for i in range(600)},
        }
    },
    "3,000 optional properties": {
        "json_schema": {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"} for i in range(3000)},
        }
    },
}
TIMEOUT_S = 30.0  # the compile budget of the "workers" mode (formcast serve's default is 60)
WAIT_S = 240  # a case not answered after this long is reported as such


def _resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def run_case(name: str, mode: str) -> dict:
    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary
    from formcast.grammar.index.compile import warm_kernels
    from formcast.grammar.spec import GrammarSpec

    vocab = Vocabulary.from_tokenizer(load_tokenizer("smollm2-135m"))
    warm_kernels(vocab)
    spec = GrammarSpec.coerce(CASES[name])
    compiler = None
    if mode == "workers":  # thread mode runs on older trees too (PYTHONPATH=...)
        from formcast.engine.structured import GrammarCompiler
        from formcast.grammar.limits import GrammarLimits

        limits = GrammarLimits(compile_timeout_s=TIMEOUT_S)
        compiler = GrammarCompiler(vocab, 1, limits=limits, num_workers=1)
        compiler.workers.start_all()
    longest_gap = [0.0]
    peak = [_resident_bytes()]
    is_done = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not is_done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            longest_gap[0] = max(longest_gap[0], now - last)
            peak[0] = max(peak[0], _resident_bytes())
            last = now

    baseline = _resident_bytes()
    ticker = threading.Thread(target=tick)
    ticker.start()
    started = time.perf_counter()
    try:
        if compiler is None:  # how the server compiled before issue 26: in a thread
            spec.compile_fn(vocab)
        else:
            compiler.submit(spec).result()
        outcome = "compiled"
    except Exception as exc:  # noqa: BLE001 - the outcome is what is measured
        outcome = f"{type(exc).__name__}: {str(exc)[:70]}"
    seconds = time.perf_counter() - started
    is_done.set()
    ticker.join()
    if compiler is not None:
        compiler.shutdown()
    return {
        "case": name,
        "mode": mode,
        "outcome": outcome,
        "seconds": round(seconds, 2),
        "rss_growth_mb": round((peak[0] - baseline) / 2**20),
        "longest_stall_ms": round(longest_gap[0] * 1000),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] != "--modes":
        print(json.dumps(run_case(sys.argv[1], sys.argv[2])))
        return
    from formcast.grammar.index.grammar_cache import default_cache_dir

    modes = sys.argv[2].split(",") if len(sys.argv) == 3 else ["thread", "workers"]
    print("| case | mode | outcome | s to answer | RSS growth MB | longest stall ms |")
    print("|---|---|---|---|---|---|")
    for name in CASES:
        for mode in modes:
            with tempfile.TemporaryDirectory() as cache_root:  # no disk-cache hits
                models = default_cache_dir().parent / "models"
                os.symlink(models, os.path.join(cache_root, "models"))
                try:
                    done = subprocess.run(
                        [sys.executable, __file__, name, mode],
                        capture_output=True,
                        text=True,
                        timeout=WAIT_S,
                        env={**os.environ, "FORMCAST_CACHE": cache_root},
                    )
                except subprocess.TimeoutExpired:
                    print(f"| {name} | {mode} | no answer after {WAIT_S} s (stopped) | | | |")
                    continue
            if done.returncode != 0:
                print(f"| {name} | {mode} | process failed: {done.stderr[-200:]!r} | | | |")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"| {name} | {mode} | {row['outcome']} | {row['seconds']} | "
                f"{row['rss_growth_mb']} | {row['longest_stall_ms']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
