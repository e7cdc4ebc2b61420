"""JSON Schema on JSONSchemaBench: formcast vs xgrammar, llguidance, outlines-core (same run).

Per split: coverage (compiled within the budget vs refused, by reason), false rejections
(valid instance rejected) and false accepts (invalid instance accepted) walking the SmolLM2
tokens of each instance, schema->regex time, compile time p50/p90/p99, per-mask time
p50/p99/p99.9 while walking valid instances. All engines: strict=False semantics, compact
separators. outlines-core runs in a forked child per schema, killed when over budget (its
``Index`` build has no timeout). Run by hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py --per-split 40
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow"]
BUDGET_S = 10.0


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
            s, c = time.perf_counter(), time.process_time()
            m.fill_bitmask(self.bitmask, 0)
            mask_times.append((time.perf_counter() - s, time.process_time() - c))
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
            s, c = time.perf_counter(), time.process_time()
            llguidance.torch.fill_next_token_bitmask(m, self.bitmask, 0)
            mask_times.append((time.perf_counter() - s, time.process_time() - c))
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
            s, c = time.perf_counter(), time.process_time()
            m.fill_next_token_bitmask(self.bitmask)
            mask_times.append((time.perf_counter() - s, time.process_time() - c))
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
            s, c = time.perf_counter(), time.process_time()
            allowed = g.get_tokens()
            mask_times.append((time.perf_counter() - s, time.process_time() - c))
            if t not in allowed:
                return False
            g.advance(t)
        return self.eos in g.get_tokens()


def evaluate(eng, schema, items) -> dict:
    """Compile ``schema`` and walk every ``(token_ids, is_valid)`` item; times in seconds."""
    out: dict = {"reason": None, "compile": None, "accepted": [], "masks": [], "route": None}
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
        masks: list[float] = []
        try:
            accepted = eng.walk(g, ids, masks)
        except Exception:
            accepted = False
        out["accepted"].append(accepted)
        if is_valid:
            out["masks"] += masks
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


def run(per_split: int, engines_wanted: list[str], splits: list[str] = SPLITS) -> dict:
    import jsonschema
    from jsonschema import validators

    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary
    from formcast.grammar.json_schema.values import serialize

    tok = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tok)
    engines = []
    for cls in (Formcast, XGrammar, LLGuidance, OutlinesCore):
        if cls.name not in engines_wanted:
            continue
        try:
            engines.append(cls(tok, vocab))
        except Exception as exc:  # a peer not installed / incompatible: reported, not fatal
            print(f"skip {cls.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    results: dict = {}
    for split in splits:
        rows = [json.loads(x) for x in open(DATA / f"{split}.jsonl", encoding="utf-8")]
        rows = rows[:: max(1, len(rows) // per_split)][:per_split]
        prepared = []
        for row in rows:
            schema = row["schema"]
            cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            oracle = cls(schema, format_checker=cls.FORMAT_CHECKER)
            items = []
            for test in row["tests"]:
                text = serialize(test["data"], schema, schema)
                is_valid = oracle.is_valid(json.loads(text))
                items.append((tok.encode(text, add_special_tokens=False), is_valid))
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
                r["compile"].append(ev["compile"])
                r["compile_cpu"].append(ev["compile_cpu"])
                r["mask"] += [wall for wall, _ in ev["masks"]]
                r["mask_cpu"] += [cpu for _, cpu in ev["masks"]]
                if ev.get("route"):
                    r["routes"][ev["route"]] += 1
                    r["mask_by_route"].setdefault(ev["route"], []).extend(
                        wall for wall, _ in ev["masks"]
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
    return {"results": results}


def report(out: dict, per_split: int) -> str:
    res = out["results"]
    lines = [
        f"Command: `HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_json_schema.py "
        f"--per-split {per_split}` (every {{len/{per_split}}}-th schema of each split), "
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
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-split", type=int, default=40)
    ap.add_argument("--engines", default="formcast,xgrammar,llguidance,outlines-core")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument(
        "--no-leaf-memo", action="store_true", help="no DFA or lexer-walk reuse across schemas"
    )
    args = ap.parse_args()
    Formcast.clear_memo = args.no_leaf_memo
    out = run(args.per_split, args.engines.split(","), args.splits.split(","))
    text = report(out, args.per_split)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
