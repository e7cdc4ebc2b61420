"""Context-free grammars: formcast vs llguidance and xgrammar, in one run (SmolLM2 vocabulary).

For each grammar of ``benchmarks/data/grammars/`` (the six Lark grammars of the CFG tests,
llama.cpp's json.gbnf and arithmetic.gbnf): compile time, then per-mask time over the canonical
tokenization of random sentences of the grammar (``benchmarks/data/cfg_sentences.json``, 20 per
grammar and seed, drawn once by the tests' sentence sampler) (the same token sequences for every engine), fill + accept per token.
"cold" is the first pass after compiling (formcast precomputes lexer walks only within its
compile budget and builds the rest on first use, so first visits are in it); "new" then runs
*different* sentences of the same grammar (lexer walks are warm, parse configurations mostly
new: formcast's steady state).
A peer that refuses a grammar or rejects a token of a sequence is reported, not hidden.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cfg.py [--cpu-time]``
(peers: ``pip install xgrammar llguidance``; a missing peer is skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from formcast.bitmask import allocate_token_bitmask  # noqa: E402
from formcast.engine.models.loader import load_tokenizer  # noqa: E402
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf  # noqa: E402
from formcast.grammar.cfg.lark_frontend import compile_lark  # noqa: E402
from formcast.grammar.index.vocabulary import Vocabulary  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
GRAMMAR_FILES = [
    "json.lark",
    "arithmetic.lark",
    "sql.lark",
    "pyexpr.lark",
    "tool_call.lark",
    "ambiguous.lark",
    "json.gbnf",
    "arithmetic.gbnf",
]
# (row name, kind, file): Lark grammars are named without their suffix, as in earlier runs
GRAMMARS = [(name.removesuffix(".lark"), name.rpartition(".")[2], name) for name in GRAMMAR_FILES]
SENTENCES = json.loads((DATA / "cfg_sentences.json").read_text())


_WARM_UP = 'start: NAME ("," NAME)*\nNAME: /[a-z]+/\n%ignore " "\n'


class Formcast:
    name = "formcast"

    def __init__(self, tok, vocab):
        from formcast.grammar.kernel_warmup import warm_all_kernels

        self.vocab = vocab
        # one-time process set-up, as the peers' constructors do: importing lark's grammar
        # loader, and loading every compiled numba kernel from numba's cache
        warm_all_kernels(vocab)
        warm = compile_lark(_WARM_UP, vocab, cache=False).matcher()
        warm.accept_bytes(b"ab, c")
        warm.packed_row()

    def compile(self, kind, text):
        fn = compile_lark if kind == "lark" else compile_gbnf
        return fn(text, self.vocab, cache=False)

    def start(self, compiled):
        return compiled.matcher()

    def fill(self, matcher, bitmask):
        matcher.fill_bitmask(bitmask, 0)

    def accept(self, matcher, token_id):
        return matcher.accept_token(token_id)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tok, vocab):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab.vocab_size)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, kind, text):
        if kind == "lark":
            return self.compiler.compile_lark(text)
        return self.compiler.compile_grammar(text)

    def start(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, matcher, bitmask):
        matcher.fill_next_token_bitmask(bitmask, 0)

    def accept(self, matcher, token_id):
        return matcher.accept_token(token_id)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tok, vocab):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.fill_fn = llguidance.torch.fill_next_token_bitmask
        self.tokenizer = llguidance.hf.from_tokenizer(tok, n_vocab=vocab.vocab_size)

    def compile(self, kind, text):
        if kind != "lark":  # llguidance's Lark dialect also reads GBNF-style ``::=`` rules
            text = "%llguidance {}\n" + text
        grammar = self.llg.LLMatcher.grammar_from_lark(text)
        matcher = self.llg.LLMatcher(self.tokenizer, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar

    def start(self, compiled):
        return self.llg.LLMatcher(self.tokenizer, compiled)

    def fill(self, matcher, bitmask):
        self.fill_fn(matcher, bitmask, 0)

    def accept(self, matcher, token_id):
        return matcher.consume_token(token_id) and not matcher.is_error()


def token_sequences(tok, file_name: str, num: int, seed: int) -> list[list[int]]:
    sentences = SENTENCES[file_name][str(seed)]
    if num > len(sentences):
        raise SystemExit(f"--sentences {num}: the corpus holds {len(sentences)} per grammar")
    return [tok.encode(sentence, add_special_tokens=False) for sentence in sentences[:num]]


def measure(engine, kind, text, sequences, fresh_sequences, vocab_size, clock=time.perf_counter):
    t0 = clock()
    try:
        compiled = engine.compile(kind, text)
    except Exception as exc:  # noqa: BLE001 - a peer refusing a grammar is a result
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"}
    compile_ms = (clock() - t0) * 1e3
    bitmask = allocate_token_bitmask(1, vocab_size)
    result = {"compile_ms": compile_ms, "rejected": 0}
    for phase, seqs in (("cold", sequences), ("new", fresh_sequences)):
        times = []
        for ids in seqs:
            matcher = engine.start(compiled)
            for token_id in ids:
                t = clock()
                engine.fill(matcher, bitmask)
                times.append(clock() - t)
                if not engine.accept(matcher, token_id):
                    result["rejected"] += 1
                    break
        result[phase] = np.asarray(times) * 1e3
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--grammars", nargs="*", help="only these grammars (default: all)")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time compiles and masks with the process CPU clock (robust to other jobs "
        "preempting us on a shared machine; counts every thread of the process)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tok)
    engines = [Formcast(tok, vocab)]
    for cls in (LLGuidance, XGrammar):
        try:
            engines.append(cls(tok, vocab))
        except ImportError as exc:
            print(f"skipping {cls.name}: {exc}")
    clock_name = "process CPU time" if args.cpu_time else "wall clock"
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, torch threads 1, {clock_name}")
    header = (
        "| grammar | engine | compile ms | cold p50 | cold p99 | cold p99.9 | new p50 | new p99 "
        "| new p99.9 | masks | rejected seqs |"
    )
    print(header)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, kind, file_name in GRAMMARS:
        if args.grammars and name not in args.grammars:
            continue
        text = (DATA / "grammars" / file_name).read_text()
        sequences = token_sequences(tok, file_name, args.sentences, seed=1)
        fresh = token_sequences(tok, file_name, args.sentences, seed=2)
        for engine in engines:
            clock = time.process_time if args.cpu_time else time.perf_counter
            r = measure(engine, kind, text, sequences, fresh, vocab.vocab_size, clock)
            if "error" in r:
                print(f"| {name} | {engine.name} | refused: {r['error']} | | | | | | | | |")
                continue
            cold, warm = r["cold"], r["new"]
            print(
                f"| {name} | {engine.name} | {r['compile_ms']:.1f} | {np.percentile(cold, 50):.3f}"
                f" | {np.percentile(cold, 99):.3f} | {np.percentile(cold, 99.9):.3f}"
                f" | {np.percentile(warm, 50):.3f} | {np.percentile(warm, 99):.3f}"
                f" | {np.percentile(warm, 99.9):.3f}"
                f" | {len(cold)} | {r['rejected']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
