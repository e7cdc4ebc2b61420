"""JSON Schema on JSONSchemaBench: formcast vs xgrammar, llguidance, outlines-core (same run).

Per split: coverage (compiled within the budget vs refused, by reason), false rejections
(valid instance rejected) and false accepts (invalid instance accepted) walking the SmolLM2
tokens of each instance, schema->regex time, compile time p50/p90/p99, per-mask time
p50/p99/p99.9 while walking valid instances, and per schema the slowest single mask of its
first walk (a valid instance walked before any other, so every state is a first visit): the 10
worst schemas per engine and how many exceed 1 ms, with the share of that mask spent in a
CPython garbage collection that ran inside it (``gc.callbacks``; a young-generation pass over
the objects any Python code allocated since the last one, not the engine's mask work), and the
same count without it. ``--corpus PATH`` adds a jsonl in the
same row format (benchmarks/data/wild_corpus.jsonl, built by wild_corpus.py), reported by
its ``split`` field; ``--splits ''`` runs the corpus alone. All engines: strict=False semantics, compact
separators. outlines-core runs in a forked child per schema, killed when over budget (its
``Index`` build has no timeout). Run by hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py --per-split 40
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py --splits '' \
        --corpus benchmarks/data/wild_corpus.jsonl --engines formcast,xgrammar,llguidance
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow"]
BUDGET_S = 10.0
SLOW_MASK_S = 1e-3  # a first-visit mask slower than this is counted per engine
_GC_S = [0.0]  # seconds spent in garbage collections so far (see _count_gc)
_GC_STARTED = [0.0]


def _count_gc(phase: str, info: dict) -> None:
    """``gc.callbacks`` hook: adds each collection's wall time to ``_GC_S``."""
    if phase == "start":
        _GC_STARTED[0] = time.perf_counter()
    else:
        _GC_S[0] += time.perf_counter() - _GC_STARTED[0]


def mask_clock() -> tuple[float, float, float]:
    """Start timing one mask: ``(wall, cpu, gc)`` clocks."""
    return time.perf_counter(), time.process_time(), _GC_S[0]


def mask_elapsed(start: tuple[float, float, float]) -> tuple[float, float, float]:
    """``(wall, cpu, gc)`` seconds since :func:`mask_clock`; ``gc``: the part of ``wall``
    spent in garbage collections."""
    return (time.perf_counter() - start[0], time.process_time() - start[1], _GC_S[0] - start[2])


def pct(xs, q):
    return float(np.percentile(xs, q)) if xs else float("nan")


class Formcast:
    name = "formcast"
    # --no-leaf-memo: forget memoised leaf automata before every schema (no cross-schema reuse,
    # like the peers' compilers with their caches disabled)
    clear_memo = False

    def __init__(self, tok, vocab):
        from formcast.grammar import allocate_token_bitmask
        from formcast.grammar.kernel_warmup import warm_all_kernels

        self.tok, self.vocab = tok, vocab
        self.bitmask = allocate_token_bitmask(1, vocab.vocab_size)
        self.routes: collections.Counter = collections.Counter()
        warm_all_kernels(vocab)  # numba kernels' one-off load, as peers' constructors set up

    def compile(self, schema):
        from formcast.grammar import caches
        from formcast.grammar.json_schema.compile import compile_json_schema

        if self.clear_memo:
            caches.clear("index.regex_to_dfa", "cfg.walks.shared_walks")
        g = compile_json_schema(schema, self.vocab, strict=False, timeout_s=BUDGET_S, cache=False)
        self.routes[type(g).__name__] += 1
        return g

    def walk(self, grammar, ids, mask_times):
        m = grammar.matcher()
        for t in ids:
            start = mask_clock()
            m.fill_bitmask(self.bitmask, 0)
            mask_times.append(mask_elapsed(start))
            if not m.accept_token(t):
                return False
        return m.is_accepting()


class LLGuidance:
    name = "llguidance"

    def __init__(self, tok, vocab):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(tok)
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab.vocab_size)

    def compile(self, schema):
        grm = self.llg.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False}
        )
        is_error, msg = self.llg.LLMatcher.validate_grammar_with_warnings(grm, self.tokenizer)
        if is_error:
            raise ValueError(msg)
        m = self.llg.LLMatcher(self.tokenizer, grm)
        if m.is_error():
            raise ValueError(m.get_error())
        return grm

    def walk(self, grm, ids, mask_times):
        import llguidance.torch

        m = self.llg.LLMatcher(self.tokenizer, grm)
        for t in ids:
            start = mask_clock()
            llguidance.torch.fill_next_token_bitmask(m, self.bitmask, 0)
            mask_times.append(mask_elapsed(start))
            if not m.consume_token(t):
                return False
        return m.is_accepting()


class XGrammar:
    name = "xgrammar"

    def __init__(self, tok, vocab):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab.vocab_size)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
        self.eos = min(vocab.eos_token_ids)

    def compile(self, schema):
        return self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, strict_mode=False, separators=(",", ":")
        )

    def walk(self, cg, ids, mask_times):
        m = self.xgr.GrammarMatcher(cg)
        for t in ids:
            start = mask_clock()
            m.fill_next_token_bitmask(self.bitmask)
            mask_times.append(mask_elapsed(start))
            if not m.accept_token(t):
                return False
        return m.accept_token(self.eos) and m.is_terminated()


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tok, vocab):
        from outlines_core import Vocabulary as OVocab

        eos = min(vocab.eos_token_ids)
        mapping: dict[bytes, list[int]] = collections.defaultdict(list)
        for i, b in enumerate(vocab.token_bytes):
            if b and i not in vocab.special_token_ids:
                mapping[b].append(i)
        self.vocab = OVocab(eos, dict(mapping))
        self.eos = eos

    def compile(self, schema):
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema

        return Index(build_regex_from_schema(json.dumps(schema)), self.vocab)

    def walk(self, index, ids, mask_times):
        from outlines_core import Guide

        g = Guide(index)
        for t in ids:
            start = mask_clock()
            allowed = g.get_tokens()
            mask_times.append(mask_elapsed(start))
            if t not in allowed:
                return False
            g.advance(t)
        return self.eos in g.get_tokens()


def evaluate(eng, schema, items) -> dict:
    """Compile ``schema`` and walk every ``(token_ids, is_valid)`` item; times in seconds."""
    out: dict = {"reason": None, "compile": None, "accepted": [], "masks": [], "route": None,
                 "first_walk_max": None, "first_walk_gc": 0.0,
                 "first_walk_max_without_gc": None, "first_walk_tokens": 0}  # fmt: skip
    # a full collection now, untimed: the harness's own garbage (instances, the oracle's
    # validation, the previous engine's walks) cannot then trigger a full collection (~0.15 s
    # over the ~400k objects torch and the tokenizers leave) inside this engine's timings
    gc.collect()
    t, cpu = time.perf_counter(), time.process_time()
    try:
        g = eng.compile(schema)
    except Exception as exc:
        out["reason"] = str(getattr(exc, "keyword", None) or type(exc).__name__)
        print(f"  {eng.name} refused: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return out
    out["compile"] = time.perf_counter() - t
    out["compile_cpu"] = time.process_time() - cpu
    out["route"] = type(g).__name__
    if out["compile"] > BUDGET_S:
        return out
    for ids, is_valid in items:
        masks: list[tuple[float, float, float]] = []  # (wall, cpu, gc) per mask
        try:
            accepted = eng.walk(g, ids, masks)
        except Exception:
            accepted = False
        out["accepted"].append(accepted)
        if is_valid:
            out["masks"] += masks
            if out["first_walk_max"] is None and masks:
                # items come valid-first: this walk visits every state for the first time
                slowest = max(masks)
                out["first_walk_max"], out["first_walk_gc"] = slowest[0], slowest[2]
                out["first_walk_max_without_gc"] = max(wall - gc_s for wall, _, gc_s in masks)
                out["first_walk_tokens"] = len(masks)
    return out


def evaluate_isolated(eng, schema, items) -> dict:
    """``evaluate`` in a forked child, killed after the compile budget plus walking time
    (outlines-core's ``Index`` build has no timeout of its own)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def work() -> None:
        child.send(evaluate(eng, schema, items))

    proc = ctx.Process(target=work)
    proc.start()
    has_result = parent.poll(BUDGET_S + 60.0)
    out = parent.recv() if has_result else None
    proc.kill()
    proc.join()
    if out is None:
        return {"reason": "over 10 s (killed)", "compile": None, "accepted": [], "masks": []}
    return out


def load_rows(per_split: int, splits: list[str], corpus: Path | None) -> dict[str, list[dict]]:
    """Rows by split: every ``len/per_split``-th of each shared split, all rows of the corpus."""
    by_split: dict[str, list[dict]] = {}
    for split in splits:
        rows = [json.loads(x) for x in open(DATA / f"{split}.jsonl", encoding="utf-8")]
        by_split[split] = rows[:: max(1, len(rows) // per_split)][:per_split]
    if corpus is not None:
        for line in open(corpus, encoding="utf-8"):
            row = json.loads(line)
            by_split.setdefault(row["split"], []).append(row)
    return by_split


def oracle_for(schema):
    """The tests' oracle (exact multipleOf, OpenAPI nullable) when importable, else jsonschema's
    format-checking validator of the schema's draft."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    try:
        from tests.grammar.schema_oracle import validator

        return validator(schema)
    except ImportError:
        import jsonschema
        from jsonschema import validators

        cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(schema, format_checker=cls.FORMAT_CHECKER)


def run(
    per_split: int,
    engines_wanted: list[str],
    splits: list[str] = SPLITS,
    corpus: Path | None = None,
) -> dict:
    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary
    from formcast.grammar.json_schema.values import serialize

    tok = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tok)
    if _count_gc not in gc.callbacks:
        gc.callbacks.append(_count_gc)
    engines = []
    for cls in (Formcast, XGrammar, LLGuidance, OutlinesCore):
        if cls.name not in engines_wanted:
            continue
        try:
            engines.append(cls(tok, vocab))
        except Exception as exc:  # a peer not installed / incompatible: reported, not fatal
            print(f"skip {cls.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    results: dict = {}
    worst: dict = {}  # engine -> [(first walk's slowest mask s, split, id, tokens, compile s)]
    for split, rows in load_rows(per_split, splits, corpus).items():
        prepared = []
        for row in rows:
            schema = row["schema"]
            oracle = oracle_for(schema)
            items = []
            for test in row["tests"]:
                text = serialize(test["data"], schema, schema)
                is_valid = oracle.is_valid(json.loads(text))
                ids = tok.encode(text, add_special_tokens=False)
                if tok.decode(ids) != text:  # the walk would test the tokenizer, not the engine
                    print(f"  {row['id']}: tokens do not round-trip {text[:80]!r}", file=sys.stderr)
                items.append((ids, is_valid))
            items.sort(key=lambda item: not item[1])  # valid first (stable): first visits
            prepared.append((row["id"], schema, items))
        for eng in engines:
            r = results.setdefault(split, {}).setdefault(
                eng.name,
                {"n": 0, "ok": 0, "refused": collections.Counter(), "fr": 0, "fa": 0,
                 "valid": 0, "invalid": 0, "compile": [], "compile_cpu": [], "mask": [],
                 "mask_cpu": [], "fr_ids": [],
                 "routes": collections.Counter(), "mask_by_route": {}},
            )  # fmt: skip
            for row_id, schema, items in prepared:
                r["n"] += 1
                if eng.name == "outlines-core":
                    ev = evaluate_isolated(eng, schema, items)
                else:
                    ev = evaluate(eng, schema, items)
                if ev["reason"] is not None:
                    r["refused"][ev["reason"]] += 1
                    continue
                if ev["compile"] > BUDGET_S:
                    r["refused"]["over 10 s"] += 1
                    continue
                r["ok"] += 1
                if ev["first_walk_max"] is not None:
                    worst.setdefault(eng.name, []).append(
                        (ev["first_walk_max"], split, row_id, ev["first_walk_tokens"],
                         ev["compile"], ev["first_walk_gc"], ev["first_walk_max_without_gc"])
                    )  # fmt: skip
                r["compile"].append(ev["compile"])
                r["compile_cpu"].append(ev["compile_cpu"])
                r["mask"] += [wall for wall, *_ in ev["masks"]]
                r["mask_cpu"] += [cpu for _, cpu, _ in ev["masks"]]
                if ev.get("route"):
                    r["routes"][ev["route"]] += 1
                    r["mask_by_route"].setdefault(ev["route"], []).extend(
                        wall for wall, *_ in ev["masks"]
                    )
                for (_, is_valid), accepted in zip(items, ev["accepted"], strict=True):
                    if is_valid:
                        r["valid"] += 1
                        if not accepted:
                            r["fr"] += 1
                            r["fr_ids"].append(row_id)
                    else:
                        r["invalid"] += 1
                        r["fa"] += int(accepted)
            print(split, eng.name, r["ok"], "/", r["n"], dict(r["refused"]), "FR", r["fr"],
                  "FA", r["fa"], r["fr_ids"], flush=True)  # fmt: skip
    return {"results": results, "worst_first_walk": worst}


def report_worst(worst: dict, num_shown: int = 10) -> list[str]:
    """Per engine: the ``num_shown`` schemas whose first walk had the slowest single mask, and
    the count of schemas whose slowest first-visit mask exceeds ``SLOW_MASK_S``, with and
    without the garbage collections that ran inside masks."""
    if not worst:
        return []
    lines = ["", "Slowest single mask of each schema's first walk (first visits of a valid "
             "instance); per engine the count over 1 ms and the 10 worst schemas. \"without "
             "GC\": each mask less the CPython garbage collections that ran inside it:", "",
             "| engine | schemas walked | slowest mask > 1 ms | max ms | median of per-schema "
             "max ms | > 1 ms without GC | max ms without GC |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, rows in worst.items():
        maxima = [m for m, *_ in rows]
        without_gc = [row[6] for row in rows]
        num_slow = sum(m > SLOW_MASK_S for m in maxima)
        lines.append(
            f"| {name} | {len(rows)} | {num_slow} | {max(maxima) * 1e3:.2f} "
            f"| {pct(maxima, 50) * 1e3:.3f} | {sum(m > SLOW_MASK_S for m in without_gc)} "
            f"| {max(without_gc) * 1e3:.2f} |"
        )
    for name, rows in worst.items():
        lines += ["", f"{name}: 10 worst schemas by first-walk slowest mask", "",
                  "| rank | split | schema | slowest mask ms | of it GC ms | tokens walked "
                  "| compile ms | slowest without GC ms |",
                  "|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        ranked = sorted(rows, key=lambda r: r[0], reverse=True)[:num_shown]
        for rank, row in enumerate(ranked, 1):
            slowest, split, row_id, num_tokens, compile_s, gc_s, without_gc = row
            lines.append(
                f"| {rank} | {split} | {row_id.split('---', 1)[-1]} | {slowest * 1e3:.2f} "
                f"| {gc_s * 1e3:.2f} | {num_tokens} | {compile_s * 1e3:.1f} "
                f"| {without_gc * 1e3:.2f} |"
            )
    return lines


def report(out: dict, per_split: int, corpus: Path | None = None, splits_arg: str = "") -> str:
    res = out["results"]
    extra = ""
    if corpus is not None:
        extra = f" --splits '{splits_arg}' --corpus {corpus}"
    lines = [
        f"Command: `HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py "
        f"--per-split {per_split}{extra}` (every {{len/{per_split}}}-th schema of each shared "
        "split, every row of the corpus), "
        f"machine: {platform.machine()} {platform.processor() or ''} 2-core CPU, no GPU, "
        f"Python {platform.python_version()}. strict=False semantics, compact separators, "
        "SmolLM2 vocabulary, 10 s compile budget. FR = valid instance rejected, FA = invalid "
        "instance accepted (instances re-serialised in schema property order). formcast "
        "with its defaults (unconstrained values nest without bound, exactly).",
        "",
        "| split | engine | compiled | refused (reasons) | FR / valid | FA / invalid "
        "| compile p50 / p90 / p99 ms | mask p50 / p99 / p99.9 us "
        "| CPU: compile p50 / p90 ms | CPU: mask p50 / p99 / p99.9 us |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for split, per in res.items():
        for name, r in per.items():
            c = [x * 1e3 for x in r["compile"]]
            m = [x * 1e6 for x in r["mask"]]
            cc = [x * 1e3 for x in r["compile_cpu"]]
            mc = [x * 1e6 for x in r["mask_cpu"]]
            reasons = ", ".join(f"{k}: {v}" for k, v in r["refused"].most_common(4))
            lines.append(
                f"| {split} | {name} | {r['ok']}/{r['n']} | {reasons} | {r['fr']}/{r['valid']} "
                f"| {r['fa']}/{r['invalid']} | {pct(c, 50):.1f} / {pct(c, 90):.1f} / "
                f"{pct(c, 99):.1f} | {pct(m, 50):.1f} / {pct(m, 99):.1f} / {pct(m, 99.9):.1f} "
                f"| {pct(cc, 50):.1f} / {pct(cc, 90):.1f} "
                f"| {pct(mc, 50):.1f} / {pct(mc, 99):.1f} / {pct(mc, 99.9):.1f} |"
            )
    fc = [(split, per["formcast"]) for split, per in res.items() if "formcast" in per]
    if fc:
        lines += ["", "formcast routes (regex DFA = `CompiledGrammar`, structural CFG = "
                      "`CompiledCFG`) and mask time per route:", ""]  # fmt: skip
        for split, r in fc:
            parts = []
            for route, masks in r["mask_by_route"].items():
                m = [x * 1e6 for x in masks]
                parts.append(
                    f"{route} {r['routes'][route]} schemas, mask p50 {pct(m, 50):.1f} / "
                    f"p99 {pct(m, 99):.1f} us"
                )
            lines.append(f"- {split}: " + "; ".join(parts) + f"; FR ids: {r['fr_ids']}")
    lines += report_worst(out.get("worst_first_walk", {}))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-split", type=int, default=40)
    ap.add_argument("--engines", default="formcast,xgrammar,llguidance,outlines-core")
    ap.add_argument("--splits", default=",".join(SPLITS), help="'' for none (corpus only)")
    ap.add_argument(
        "--corpus", type=Path, default=None, help="a jsonl in the split row format, by its splits"
    )
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument(
        "--no-leaf-memo", action="store_true", help="no DFA or lexer-walk reuse across schemas"
    )
    args = ap.parse_args()
    Formcast.clear_memo = args.no_leaf_memo
    splits = [s for s in args.splits.split(",") if s]
    out = run(args.per_split, args.engines.split(","), splits, args.corpus)
    text = report(out, args.per_split, args.corpus, args.splits)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
