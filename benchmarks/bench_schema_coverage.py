"""JSON Schema coverage and exactness at scale on JSONSchemaBench (issue 4 targets).

For each split, every k-th schema (``--per-split N`` of them) is compiled by formcast,
llguidance and xgrammar (outlines-core with ``--outlines``: slow) within the 10 s budget, then
every valid and invalid test instance is walked token by token (SmolLM2 tokens, instances
re-serialised in schema property order, validity re-checked with ``jsonschema``) to count
false rejections (FR: valid instance rejected) and false accepts (FA: invalid instance
accepted). No mask-time statistics: coverage, exactness and compile p50 only. For formcast
the walk also checks that every accepted token is allowed by the filled bitmask ("mask
disagrees": accept_token and the mask disagree). Engines, data and budget handling come from
``bench_json_schema.py`` (formcast has its own ``timeout_s``; llguidance / xgrammar compile
in-process and count as refused when over budget; outlines-core runs in a killed-on-budget
forked child). Run by hand:

    HF_HUB_OFFLINE=1 nice -n 19 .venv/bin/python benchmarks/bench_schema_coverage.py \
        --per-split 100 --out /tmp/coverage.md
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

from bench_json_schema import (  # the sibling benchmark (the script folder is on sys.path)
    BUDGET_S,
    DATA,
    SPLITS,
    Formcast,
    LLGuidance,
    OutlinesCore,
    XGrammar,
    evaluate_isolated,
    pct,
)


class FormcastChecked(Formcast):
    """formcast walk that also counts tokens accepted by ``accept_token`` but masked out."""

    def __init__(self, tok, vocab):
        super().__init__(tok, vocab)
        self.num_mask_disagree = 0

    def walk(self, grammar, ids, mask_times):
        m = grammar.matcher()
        row = self.bitmask[0]
        for t in ids:
            m.fill_bitmask(self.bitmask, 0)
            is_allowed = bool((int(row[t // 32]) >> (t % 32)) & 1)
            if not m.accept_token(t):
                if is_allowed:
                    self.num_mask_disagree += 1
                return False
            if not is_allowed:
                self.num_mask_disagree += 1
        return m.is_accepting()


def shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refusal_reason(reason: str, message: str | None) -> str:
    """A short reason from a peer's untyped error message (formcast names the keyword)."""
    text = message or ""
    if "Unknown format" in text:
        return "unknown format"
    if "oneOf constraints are not supported" in text:
        return "oneOf"
    match = re.search(r"Unimplemented keys: \[([^\]]*)\]", text)
    if match:
        return match.group(1).replace('\\"', "").replace('"', "")
    if "min/maxProperties" in text:
        return "minProperties"
    if "exceeds maximum limit due to precision loss" in text:
        return "integer over 64 bits"
    if reason == "RecursionError":
        return "RecursionError (untyped)"
    return reason


def evaluate_coverage(eng, schema, items) -> dict:
    """Compile ``schema`` (message kept on refusal) and walk every ``(ids, is_valid)`` item."""
    out: dict = {"reason": None, "message": None, "compile": None, "accepted": [], "errors": []}
    start = time.perf_counter()
    try:
        g = eng.compile(schema)
    except Exception as exc:
        out["reason"] = str(getattr(exc, "keyword", None) or type(exc).__name__)
        out["message"] = f"{type(exc).__name__}: {exc}"
        return out
    out["compile"] = time.perf_counter() - start
    if out["compile"] > BUDGET_S:
        out["reason"] = "over 10 s"
        out["message"] = f"compiled, but in {out['compile']:.1f} s (over the 10 s budget)"
        return out
    out.update(walk_items(eng, g, items))
    return out


def walk_items(eng, g, items) -> dict:
    """Walk every instance's tokens through compiled grammar ``g``: accepted flags, errors."""
    out = {"accepted": [], "errors": []}
    for ids, _ in items:
        try:
            accepted = eng.walk(g, ids, [])
        except Exception as exc:
            accepted = False
            out["errors"].append(f"{type(exc).__name__}: {shorten(exc, 160)}")
        out["accepted"].append(accepted)
    return out


def evaluate_forked(eng, schema, items) -> dict:
    """``evaluate_coverage`` in a forked child that is killed when the compile is not done
    within the budget (xgrammar's compiler has no timeout; an in-process over-budget compile
    would run to completion), or when walking takes over 60 s more."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def work() -> None:
        start = time.perf_counter()
        try:
            g = eng.compile(schema)
        except Exception as exc:
            child.send({"reason": str(getattr(exc, "keyword", None) or type(exc).__name__),
                        "message": f"{type(exc).__name__}: {exc}"})  # fmt: skip
            return
        child.send({"reason": None, "compile": time.perf_counter() - start})
        child.send(walk_items(eng, g, items))

    proc = ctx.Process(target=work)
    proc.start()
    killed = {"reason": "over 10 s (killed)", "message": "over 10 s (killed)", "compile": None,
              "accepted": [], "errors": []}  # fmt: skip
    out = dict(killed)
    if parent.poll(BUDGET_S):
        out = {"message": None, "accepted": [], "errors": [], **parent.recv()}
        if out["reason"] is None:
            if out["compile"] > BUDGET_S:
                out["reason"] = "over 10 s"
                out["message"] = f"compiled, but in {out['compile']:.1f} s (over the 10 s budget)"
            elif parent.poll(60.0):
                out.update(parent.recv())
            else:
                out = {**killed, "reason": "walk over 60 s (killed)"}
    proc.kill()
    proc.join()
    return out


def prepare(split: str, per_split: int, tok) -> list[dict]:
    """Every k-th schema of ``split`` with its instances tokenised and re-validated."""
    import jsonschema
    from jsonschema import validators

    from formcast.grammar.json_schema.values import serialize

    rows = [json.loads(x) for x in open(DATA / f"{split}.jsonl", encoding="utf-8")]
    step = max(1, len(rows) // per_split)
    prepared = []
    for index in range(0, len(rows), step)[:per_split]:
        row = rows[index]
        schema = row["schema"]
        items, texts, skipped = [], [], 0
        try:
            cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            oracle = cls(schema, format_checker=cls.FORMAT_CHECKER)
        except Exception:
            oracle = None
        for test in row["tests"]:
            try:
                text = serialize(test["data"], schema, schema)
                is_valid = (
                    oracle.is_valid(json.loads(text)) if oracle is not None else test["valid"]
                )
            except Exception:
                skipped += 1
                continue
            items.append((tok.encode(text, add_special_tokens=False), is_valid))
            texts.append(text)
        prepared.append(
            {"index": index, "id": row["id"], "schema": schema, "items": items, "texts": texts,
             "skipped": skipped}
        )  # fmt: skip
    return prepared


def run(args) -> dict:
    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary

    tok = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tok)
    classes = [FormcastChecked, LLGuidance, XGrammar] + ([OutlinesCore] if args.outlines else [])
    wanted = set(args.engines.split(",")) if args.engines else None
    engines = []
    for cls in classes:
        if wanted is not None and cls.name not in wanted:
            continue
        try:
            engines.append(cls(tok, vocab))
        except Exception as exc:  # a peer not installed / incompatible: reported, not fatal
            print(f"skip {cls.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    results: dict = {}
    for split in args.splits.split(","):
        prepared = prepare(split, args.per_split, tok)
        per = results.setdefault(split, {})
        for eng in engines:
            started = time.perf_counter()
            r = per.setdefault(
                eng.name,
                {"n": 0, "ok": 0, "refused": collections.Counter(), "fr": 0, "fa": 0,
                 "valid": 0, "invalid": 0, "compile": [], "schemas": {}, "walk_errors": 0},
            )  # fmt: skip
            if isinstance(eng, FormcastChecked):
                eng.num_mask_disagree = 0
            for p in prepared:
                r["n"] += 1
                if isinstance(eng, OutlinesCore):
                    ev = evaluate_isolated(eng, p["schema"], p["items"])
                    ev.setdefault("message", ev["reason"])
                    ev.setdefault("errors", [])
                    if ev["reason"] is None and ev["compile"] > BUDGET_S:
                        ev["reason"] = "over 10 s"
                elif isinstance(eng, XGrammar) or (args.fork_all and eng.name != "formcast"):
                    ev = evaluate_forked(eng, p["schema"], p["items"])
                else:
                    ev = evaluate_coverage(eng, p["schema"], p["items"])
                s = {"ok": ev["reason"] is None, "reason": ev["reason"], "message": ev.get("message"),
                     "fr": [], "fa": []}  # fmt: skip
                r["schemas"][p["id"]] = s
                if ev["reason"] is not None:
                    r["refused"][ev["reason"]] += 1
                    continue
                r["ok"] += 1
                r["compile"].append(ev["compile"])
                r["walk_errors"] += len(ev["errors"])
                for k, ((_, is_valid), accepted) in enumerate(
                    zip(p["items"], ev["accepted"], strict=True)
                ):
                    if is_valid:
                        r["valid"] += 1
                        if not accepted:
                            r["fr"] += 1
                            s["fr"].append(k)
                    else:
                        r["invalid"] += 1
                        if accepted:
                            r["fa"] += 1
                            s["fa"].append(k)
            if isinstance(eng, FormcastChecked):
                r["mask_disagree"] = eng.num_mask_disagree
            print(
                f"{split} {eng.name}: {r['ok']}/{r['n']} {dict(r['refused'])} "
                f"FR {r['fr']}/{r['valid']} FA {r['fa']}/{r['invalid']} "
                f"({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        per["_prepared"] = [
            {k: p[k] for k in ("index", "id", "texts", "skipped")} for p in prepared
        ]
    return results


def report(results: dict, args, elapsed_s: float) -> str:
    load = os.getloadavg()
    lines = [
        f"Command: `HF_HUB_OFFLINE=1 nice -n 19 .venv/bin/python "
        f"benchmarks/bench_schema_coverage.py --per-split {args.per_split}"
        f"{' --engines ' + args.engines if args.engines else ''}"
        f"{' --outlines' if args.outlines else ''}` (every len/{args.per_split}-th schema of "
        f"each split). Machine: {platform.machine()}, {os.cpu_count()}-core CPU, no GPU, "
        f"Python {platform.python_version()}, shared (load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}); "
        + (f"merged from {args.merge}. " if args.merge else f"run took {elapsed_s / 60:.0f} min. ")
        + "strict=False, compact separators, SmolLM2 vocabulary, 10 s compile budget, formcast "
        "defaults (unconstrained values exact). FR = valid instance rejected, FA = invalid instance accepted "
        "(instances re-serialised in schema property order, validity re-checked with "
        "`jsonschema` + format checker). Compile p50 is wall time over compiled schemas.",
        "",
        "| split | engine | compiled / total | refusals by reason | FR / valid | FA / invalid "
        "| compile p50 ms | p99 ms | max ms |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for split, per in results.items():
        for name, r in per.items():
            if name.startswith("_"):
                continue
            by_reason: collections.Counter = collections.Counter()
            for s in r["schemas"].values():
                if not s["ok"]:
                    by_reason[refusal_reason(s.get("reason") or "", s["message"])] += 1
            reasons = ", ".join(f"{k}: {v}" for k, v in by_reason.most_common()) or "-"
            c = [x * 1e3 for x in r["compile"]]
            lines.append(
                f"| {split} | {name} | {r['ok']}/{r['n']} | {reasons} | {r['fr']}/{r['valid']} "
                f"| {r['fa']}/{r['invalid']} | {pct(c, 50):.1f} | {pct(c, 99):.1f} "
                f"| {max(c, default=float('nan')):.0f} |"
            )
    lines += ["", "Totals over all splits:", ""]
    totals: dict = {}
    for per in results.values():
        for name, r in per.items():
            if name.startswith("_"):
                continue
            t = totals.setdefault(name, collections.Counter())
            for key in ("ok", "n", "fr", "valid", "fa", "invalid", "walk_errors"):
                t[key] += r[key]
            t["mask_disagree"] += r.get("mask_disagree", 0)
    for name, t in totals.items():
        extra = f", mask disagrees {t['mask_disagree']}" if name == "formcast" else ""
        lines.append(
            f"- {name}: compiled {t['ok']}/{t['n']}, FR {t['fr']}/{t['valid']}, "
            f"FA {t['fa']}/{t['invalid']}, walk exceptions {t['walk_errors']}{extra}"
        )
    lines += ["", "Schemas llguidance compiles but formcast refuses:", ""]
    num_listed = 0
    for split, per in results.items():
        if "formcast" not in per or "llguidance" not in per:
            continue
        index_of = {p["id"]: p["index"] for p in per["_prepared"]}
        for sid, s in per["formcast"]["schemas"].items():
            if not s["ok"] and per["llguidance"]["schemas"][sid]["ok"]:
                num_listed += 1
                lines.append(f"- {split} #{index_of[sid]} `{sid}`: {shorten(s['message'], 200)}")
    if not num_listed:
        lines.append("- none")
    lines += ["", "Schemas formcast compiles but llguidance refuses:", ""]
    num_listed = 0
    for split, per in results.items():
        if "formcast" not in per or "llguidance" not in per:
            continue
        for sid, s in per["llguidance"]["schemas"].items():
            if not s["ok"] and per["formcast"]["schemas"][sid]["ok"]:
                num_listed += 1
                lines.append(f"- {split} `{sid}`: {shorten(s['message'], 160)}")
    if not num_listed:
        lines.append("- none")
    lines += ["", "formcast false rejections / false accepts (instance as walked; peers' verdict):"]
    lines.append("")
    num_listed = 0
    for split, per in results.items():
        if "formcast" not in per:
            continue
        texts = {p["id"]: p["texts"] for p in per["_prepared"]}
        for sid, s in per["formcast"]["schemas"].items():
            for kind in ("fr", "fa"):
                for k in s[kind]:
                    num_listed += 1
                    peers = []
                    for name, r in per.items():
                        if name.startswith("_") or name == "formcast":
                            continue
                        ps = r["schemas"][sid]
                        peers.append(
                            f"{name} {'refused' if not ps['ok'] else kind.upper() if k in ps[kind] else 'correct'}"  # noqa: E501
                        )
                    lines.append(
                        f"- {kind.upper()} {split} `{sid}` test {k} ({', '.join(peers)}): "
                        f"`{shorten(texts[sid][k], 300)}`"
                    )
    if not num_listed:
        lines.append("- none")
    lines += ["", "Peers' false rejections / false accepts (schema ids):", ""]
    for split, per in results.items():
        for name, r in per.items():
            if name.startswith("_") or name == "formcast":
                continue
            fr = [sid for sid, s in r["schemas"].items() if s["fr"]]
            fa = [sid for sid, s in r["schemas"].items() if s["fa"]]
            if fr or fa:
                lines.append(f"- {split} {name}: FR in {fr}; FA in {fa}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-split", type=int, default=100)
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument(
        "--engines",
        default="",
        help="comma-separated engines to run (formcast, llguidance, xgrammar, outlines-core; "
        "default: formcast, llguidance, xgrammar); a --per-split over a split's size takes "
        "every schema of it",
    )
    ap.add_argument("--outlines", action="store_true", help="also run outlines-core (slow)")
    ap.add_argument(
        "--fork-all", action="store_true", help="llguidance in a killed-on-budget child too"
    )
    ap.add_argument("--out", default=None, help="write the markdown report here")
    ap.add_argument("--json-out", default=None, help="write the raw per-schema results here")
    ap.add_argument(
        "--merge",
        default=None,
        help="comma-separated --json-out files of earlier runs (e.g. splits run in parallel): "
        "report them together instead of running",
    )
    args = ap.parse_args()
    started = time.perf_counter()
    if args.merge:
        results = {}
        for path in args.merge.split(","):
            results.update(json.loads(Path(path).read_text(encoding="utf-8")))
        for per in results.values():
            for name, r in per.items():
                if not name.startswith("_"):
                    r["refused"] = collections.Counter(r["refused"])
    else:
        results = run(args)
    text = report(results, args, time.perf_counter() - started)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, default=list), encoding="utf-8")


if __name__ == "__main__":
    main()
