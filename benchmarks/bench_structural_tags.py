"""Structural tags for tool calls and reasoning: formcast vs XGrammar 0.2.9 (same run, same
requests, SmolLM2 vocabulary).

1. Compile: a turn's tag for 10 and 100 tools in each native format (``tool_call_tag``:
   ``tool_choice="auto"``, parallel calls), each tool a generated schema of 1-6 parameters
   (strings with bounds, integer ranges, enums, booleans, arrays); every repetition uses new
   tool names (no cache hit: formcast ``cache=False``, XGrammar's cache off). XGrammar takes
   the very same request (it is its format).
   Cold: the first compile in a fresh process (tokenizer and vocabulary loaded, kernels
   warm, nothing compiled yet), three processes per engine and format, 100 tools.
2. Masks: one walk per format through free text (prose with braces) then a call, the bitmask
   filled before every token, timed per region (free text / inside the call); the first walk
   (every state met for the first time) and a repeat walk with a fresh matcher over the same
   compiled grammar (what a server's next request with these tools meets).
3. Reasoning + JSON on the engine: 16 chat prompts, greedy, thoughts bounded at 32 tokens then
   a JSON schema (`GrammarSpec.reasoning`), against the same prompts unconstrained with the
   same number of output tokens; output tokens per second, best of 2 runs each.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_structural_tags.py`` (~3 minutes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import random
import statistics
import time

import numpy as np

FORMAT_NAMES = ("hermes", "llama3_json", "mistral")
PROSE = (
    "Sure, here is what I found: the set {1, 2} has two elements and a JSON object looks like "
    '{"a": 1}. Let me check the weather for you. '
)


def _tool(rng: random.Random, name: str):
    from formcast.server.protocol import ToolDefinition

    kinds = [
        lambda: {"type": "string", "maxLength": rng.choice([16, 32, 64])},
        lambda: {"type": "integer", "minimum": 0, "maximum": rng.choice([10, 100, 10_000])},
        lambda: {"enum": [f"v{k}" for k in range(rng.randint(2, 6))]},
        lambda: {"type": "boolean"},
        lambda: {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    ]
    properties = {f"p{k}": rng.choice(kinds)() for k in range(rng.randint(1, 6))}
    required = [key for key in properties if rng.random() < 0.6]
    parameters = {"type": "object", "properties": properties, "required": required}
    return ToolDefinition.model_validate(
        {"type": "function", "function": {"name": name, "parameters": parameters}}
    )


def _tools(seed: int, num_tools: int) -> list:
    rng = random.Random(seed)
    return [_tool(rng, f"tool_{seed}_{k}") for k in range(num_tools)]


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.1f}"


def _us(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1e6, q))


def bench_compile(vocab, xgr_compiler, repeats: int) -> list[str]:
    from formcast.grammar.structural_tag import compile_structural_tag
    from formcast.server.tool_formats import FORMATS, tool_call_tag

    rows = ["| format | tools | formcast compile ms (p50) | XGrammar compile ms (p50) | ratio |",
            "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name in FORMAT_NAMES:
        for num_tools in (10, 100):
            ours, theirs = [], []
            for rep in range(repeats):
                tag = tool_call_tag(
                    FORMATS[name], "auto", _tools(1000 * rep + num_tools, num_tools), True
                )
                start = time.perf_counter()
                compile_structural_tag(tag, vocab, cache=False)
                ours.append(time.perf_counter() - start)
                tag = tool_call_tag(
                    FORMATS[name], "auto", _tools(1000 * rep + num_tools + 7, num_tools), True
                )
                start = time.perf_counter()
                xgr_compiler.compile_structural_tag(json.dumps(tag))
                theirs.append(time.perf_counter() - start)
            ratio = statistics.median(theirs) / statistics.median(ours)
            rows.append(f"| {name} | {num_tools} | {_ms(ours)} | {_ms(theirs)} | {ratio:.2f}x |")
            print(rows[-1], flush=True)
    return rows


def _cold_one(engine: str, name: str, seed: int) -> None:
    """Print the first 100-tool compile of this fresh process, in ms."""
    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary
    from formcast.grammar.kernel_warmup import warm_all_kernels
    from formcast.grammar.structural_tag import compile_structural_tag
    from formcast.server.tool_formats import FORMATS, tool_call_tag

    tokenizer = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tokenizer)
    tag = tool_call_tag(FORMATS[name], "auto", _tools(seed, 100), True)
    if engine == "formcast":
        warm_all_kernels(vocab)
        start = time.perf_counter()
        compile_structural_tag(tag, vocab, cache=False)
    else:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab.vocab_size)
        compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        start = time.perf_counter()
        compiler.compile_structural_tag(json.dumps(tag))
    print(f"{(time.perf_counter() - start) * 1e3:.1f}")


def bench_cold(repeats: int) -> list[str]:
    import subprocess
    import sys

    rows = ["| format | formcast first compile ms (each process) | XGrammar first compile ms |",
            "|---|---|---|"]  # fmt: skip
    for name in FORMAT_NAMES:
        times: dict[str, list[str]] = {"formcast": [], "xgrammar": []}
        for rep in range(repeats):
            for engine in times:
                out = subprocess.run(
                    [sys.executable, __file__, "--cold-one", engine, name, str(500 + rep)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                times[engine].append(out.stdout.split()[-1])
        rows.append(f"| {name} | {', '.join(times['formcast'])} | {', '.join(times['xgrammar'])} |")
        print(rows[-1], flush=True)
    return rows


def bench_masks(tokenizer, vocab, xgr, xgr_compiler) -> list[str]:
    from formcast.grammar import allocate_token_bitmask
    from formcast.grammar.structural_tag import compile_structural_tag
    from formcast.server.tool_formats import FORMATS, tool_call_tag

    rows = ["| format | region | tokens | formcast first walk p50 / p99 us | XGrammar first walk "
            "| formcast repeat walk | XGrammar repeat walk |",
            "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    tools = _tools(7, 20)
    for name in FORMAT_NAMES:
        fmt = FORMATS[name]
        tag = tool_call_tag(fmt, "auto", tools, False)
        arguments: dict = {}
        tool = tools[3]
        schema = tool.function.parameters
        for key in schema["required"]:
            prop = schema["properties"][key]
            arguments[key] = (
                prop["enum"][0] if "enum" in prop
                else {"string": "abc", "integer": 1, "boolean": True, "array": ["q"]}[prop["type"]]
            )  # fmt: skip
        call = fmt.render_calls([(tool.function.name, arguments)])
        prose = PROSE.replace('{"a": 1}', "a JSON object") if name == "llama3_json" else PROSE
        text = prose + call
        ids = tokenizer.encode(text, add_special_tokens=False)
        offsets = np.cumsum([len(vocab.token_bytes[t]) for t in ids])
        start_of_call = len(prose.encode())
        grammar = compile_structural_tag(tag, vocab, cache=False)
        compiled = xgr_compiler.compile_structural_tag(json.dumps(tag))
        ours = allocate_token_bitmask(1, vocab.vocab_size)
        theirs = xgr.allocate_token_bitmask(1, vocab.vocab_size)
        # (region, walk) -> engine -> seconds per mask; walk 0 meets every state for the first
        # time, walk 1 (a fresh matcher over the same grammar) reads what walk 0 computed
        times: dict[tuple[str, int], dict[str, list[float]]] = {
            (region, walk): {} for region in ("free text", "call") for walk in (0, 1)
        }
        for engine, walk in itertools.product(("formcast", "xgrammar"), (0, 1)):
            matcher = grammar.matcher() if engine == "formcast" else xgr.GrammarMatcher(compiled)
            for k, token_id in enumerate(ids):
                region = (
                    "free text"
                    if offsets[k] - len(vocab.token_bytes[token_id]) < start_of_call
                    else "call"
                )
                start = time.perf_counter()
                if engine == "formcast":
                    matcher.fill_bitmask(ours, 0)
                else:
                    matcher.fill_next_token_bitmask(theirs)
                times[region, walk].setdefault(engine, []).append(time.perf_counter() - start)
                assert matcher.accept_token(token_id), (engine, name, k)
            if engine == "formcast":
                assert matcher.is_accepting()
        for region in ("free text", "call"):
            cells = []
            for walk in (0, 1):
                for engine in ("formcast", "xgrammar"):
                    xs = times[region, walk][engine]
                    cells.append(f"{_us(xs, 50):.1f} / {_us(xs, 99):.1f}")
            num_tokens = len(times[region, 0]["formcast"])
            rows.append(f"| {name} | {region} | {num_tokens} | {' | '.join(cells)} |")
            print(rows[-1], flush=True)
    return rows


def bench_reasoning_throughput() -> list[str]:
    from formcast.engine.llm_engine import LLM
    from formcast.grammar import GrammarSpec
    from formcast.grammar.reasoning import ReasoningConfig
    from formcast.samplers import SamplingParams

    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 24},
            "population": {"type": "integer", "minimum": 0, "maximum": 99_999_999},
            "is_capital": {"type": "boolean"},
        },
        "required": ["city", "population", "is_capital"],
    }
    prompts = [
        [{"role": "user", "content": f"Think, then describe city number {k} as JSON."}]
        for k in range(16)
    ]
    llm = LLM("smollm2-135m", max_num_seqs=16, num_kv_blocks=512)
    spec = GrammarSpec.reasoning(GrammarSpec.json_schema(schema), ReasoningConfig(max_tokens=32))
    greedy = SamplingParams(temperature=0, max_tokens=96)
    llm.generate(prompts[:2], greedy, grammar=spec)  # compile + warm-up
    rates: dict[str, list[float]] = {"constrained": [], "unconstrained": []}
    lengths: list[int] = []
    for _ in range(2):
        start = time.perf_counter()
        outputs = llm.generate(prompts, greedy, grammar=spec)
        seconds = time.perf_counter() - start
        lengths = [len(o.token_ids) for o in outputs]
        rates["constrained"].append(sum(lengths) / seconds)
        # the same prompts, free, each as long as its constrained output
        free = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths]
        start = time.perf_counter()
        outputs = llm.generate(prompts, free)
        seconds = time.perf_counter() - start
        rates["unconstrained"].append(sum(len(o.token_ids) for o in outputs) / seconds)
    best = {key: max(values) for key, values in rates.items()}
    ratio = best["constrained"] / best["unconstrained"]
    row = (
        f"| reasoning (<=32 tokens) + JSON, 16 requests, {sum(lengths)} tokens "
        f"| {best['constrained']:.0f} tok/s | {best['unconstrained']:.0f} tok/s | {ratio:.2f} |"
    )
    print(row, flush=True)
    return [
        "| workload | constrained | unconstrained (same lengths) | ratio |",
        "|---|---:|---:|---:|",
        row,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--cold-one", nargs=3, metavar=("ENGINE", "FORMAT", "SEED"))
    args = parser.parse_args()
    if args.cold_one:
        engine, name, seed = args.cold_one
        _cold_one(engine, name, int(seed))
        return
    import xgrammar as xgr

    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary
    from formcast.grammar.kernel_warmup import warm_all_kernels

    tokenizer = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tokenizer)
    warm_all_kernels(vocab)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab.vocab_size)
    xgr_compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    print(f"# {platform.processor() or platform.machine()}, {platform.python_version()}")
    report = ["## compile"] + bench_compile(vocab, xgr_compiler, args.repeats)
    report += ["", "## cold compile (first in a process)"] + bench_cold(args.repeats)
    report += ["", "## masks"] + bench_masks(tokenizer, vocab, xgr, xgr_compiler)
    if not args.skip_engine:
        report += ["", "## engine"] + bench_reasoning_throughput()
    print("\n".join(report))


if __name__ == "__main__":
    main()
