"""Grammar cache on disk: grammar files (data only) against the pickles they replaced.

For a few large cached grammars (a 166 kB Kubernetes schema of JSONSchemaBench, which takes
the structural route; a 38 kB one that takes the regex route; the pyexpr Lark grammar) the payload
the cache stores is written both as a pickle (``pickle.dump(payload, HIGHEST_PROTOCOL)``, the
format before) and as a grammar file (:mod:`formcast.grammar.index.grammar_file`). Reported:
file sizes, write time, payload load time (file to objects) and the whole disk hit (the
grammar compiled again after the compiled-grammar memos are cleared, its payload read with
each format). Times are the best of ``--repeats`` runs, wall clock and process CPU. Run by
hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_grammar_cache.py
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
GRAMMARS_DIR = Path(__file__).resolve().parent / "data" / "grammars"
SCHEMAS = {  # name in the split's JSONL -> the route "auto" takes for it
    "Kubernetes/kb_1004_Normalized": "cfg",
    "Kubernetes/kb_390_Normalized": "regex",
}


def best(fn, repeats: int) -> tuple[float, float]:
    """(best wall seconds, best process-CPU seconds) of ``fn()`` over ``repeats`` runs."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def find_schema(split: str, name: str) -> dict:
    with open(DATA / f"{split}.jsonl") as handle:
        for line in handle:
            row = json.loads(line)
            if row["name"] == name:
                return row["schema"]
    raise SystemExit(f"schema {name} not found in {split}.jsonl")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args, _ = parser.parse_known_args()  # (run_all passes every script the same options)

    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import caches
    from formcast.grammar.cfg import compiled as cfg_compiled
    from formcast.grammar.cfg.lark_frontend import compile_lark
    from formcast.grammar.index import grammar_cache, grammar_file
    from formcast.grammar.index.vocabulary import Vocabulary
    from formcast.grammar.json_schema.compile import compile_json_schema

    vocab = Vocabulary.from_tokenizer(load_tokenizer("smollm2-135m"))  # before FORMCAST_CACHE
    work = Path(tempfile.mkdtemp(prefix="bench_grammar_cache_"))
    os.environ["FORMCAST_CACHE"] = str(work / "fcg")
    grammars = {}
    for qualified, route in SCHEMAS.items():
        split, name = qualified.split("/")
        schema = find_schema(split, name)
        # (the route is forced: on "auto" a disk hit of a structural grammar first tries,
        # and refuses, the regex route, which has nothing to do with the cache)
        grammars[f"{name} [{route}]"] = lambda schema=schema, route=route: compile_json_schema(
            schema, vocab, strict=False, route=route
        )
    pyexpr = (GRAMMARS_DIR / "pyexpr.lark").read_text()
    grammars["pyexpr.lark [cfg]"] = lambda: compile_lark(pyexpr, vocab)

    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    header = (
        f"{'grammar':38} {'format':7} {'size MB':>8} {'write ms (wall/cpu)':>18} "
        f"{'load ms (wall/cpu)':>19} {'disk hit ms (wall/cpu)':>23}"
    )
    print(header)
    original_store, original_load = grammar_cache.store_payload, grammar_cache.load_payload
    try:
        for label, compile_it in grammars.items():
            stored: dict[str, dict] = {}

            def capture(key: str, payload: dict, stored=stored) -> None:
                stored[key] = payload

            # compile once, keeping the payload the cache is given
            caches.clear_all()
            grammar_cache.store_payload, cfg_compiled.store_payload = capture, capture
            started = time.perf_counter()
            compile_it()
            compile_s = time.perf_counter() - started
            grammar_cache.store_payload = cfg_compiled.store_payload = original_store
            print(f"{label}: first compile {compile_s * 1e3:.0f} ms (memos cleared, no store)")
            ((key, payload),) = stored.items()
            pickle_path = work / f"{key}.pkl"
            file_path = grammar_cache._payload_path(key)
            file_path.parent.mkdir(parents=True, exist_ok=True)

            def write_pickle(payload=payload, path=pickle_path) -> None:
                with open(path, "wb") as handle:
                    pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)

            def write_file(payload=payload, path=file_path) -> None:
                with open(path, "wb") as handle:
                    grammar_file.dump(payload, handle)

            def read_pickle(path=pickle_path) -> dict:
                with open(path, "rb") as handle:
                    return pickle.load(handle)

            for fmt, write, read, path in (
                ("pickle", write_pickle, read_pickle, pickle_path),
                ("fcg", write_file, lambda path=file_path: grammar_file.load(path), file_path),
            ):
                write = best(write, 3)
                load = best(read, args.repeats)

                def load_payload(name: str, read=read, key=key) -> dict | None:
                    return read() if name == key else None

                grammar_cache.load_payload = cfg_compiled.load_payload = load_payload

                def disk_hit(compile_it=compile_it) -> None:
                    caches.clear("index.compiled_grammars", "cfg.compiled_grammars")
                    compile_it()

                hit = best(disk_hit, args.repeats)
                grammar_cache.load_payload = cfg_compiled.load_payload = original_load
                print(
                    f"{label:38} {fmt:7} {path.stat().st_size / 1e6:8.2f} "
                    f"{write[0] * 1e3:9.1f} /{write[1] * 1e3:7.1f} "
                    f"{load[0] * 1e3:9.1f} /{load[1] * 1e3:7.1f} "
                    f"{hit[0] * 1e3:12.1f} /{hit[1] * 1e3:8.1f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
