"""The ``formcast`` command: generate under a grammar, inspect a compiled grammar, benchmark.

::

    formcast generate --schema person.json "John is 32."     # JSON text on stdout
    formcast generate --regex '\\d{3}-\\d{4}' "A phone number:"
    formcast generate --choice yes --choice no "Is water wet?"
    formcast generate --grammar arith.lark "Write a sum."
    formcast compile --schema person.json [--text '{"name":"Jo"}'] [--json]
    formcast bench [--dry-run] [benchmark args ...]
    formcast serve --model smollm2-135m --port 8000         # OpenAI-compatible HTTP server
    formcast train-medusa --model smollm2-135m --out heads.safetensors [--minutes 20]

Errors print ``formcast: error: ...`` on stderr and exit with status 1 (2 for bad usage).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from formcast.errors import FormcastError

if TYPE_CHECKING:  # the grammar package loads lazily: `formcast --help` stays fast
    from formcast.grammar import Grammar, Vocabulary

DEFAULT_NUM_MASKS = 8


def _add_grammar_options(parser: argparse.ArgumentParser, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--schema", metavar="FILE", help="JSON Schema file ('-' for stdin)")
    group.add_argument("--regex", metavar="PATTERN", help="regular expression (Python re)")
    group.add_argument(
        "--choice", metavar="TEXT", action="append", help="an allowed answer (repeat the option)"
    )
    group.add_argument("--grammar", metavar="FILE", help="Lark grammar file")
    parser.add_argument(
        "--model", default="smollm2-135m", help="alias, HF folder or .gguf (default: %(default)s)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``formcast`` command."""
    parser = argparse.ArgumentParser(
        prog="formcast", description="Exact grammar-constrained generation."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    generate = commands.add_parser("generate", help="generate text under a grammar")
    _add_grammar_options(generate, required=False)
    generate.add_argument("prompt", help="the prompt (sent as a chat message to chat models)")
    generate.add_argument("--max-tokens", type=int, default=256)
    generate.add_argument("--temperature", type=float, default=0.0)
    generate.add_argument("--top-p", type=float, default=1.0)
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument("--system", help="system message (chat models)")
    generate.add_argument("--stream", action="store_true", help="print tokens as they come")

    compile_ = commands.add_parser("compile", help="compile a grammar and show its first masks")
    _add_grammar_options(compile_, required=True)
    compile_.add_argument(
        "--text", help="walk the masks along this text's tokens (default: lowest allowed id)"
    )
    compile_.add_argument("--masks", type=int, default=DEFAULT_NUM_MASKS, help="masks to show")
    compile_.add_argument("--json", action="store_true", help="print one JSON object")

    bench = commands.add_parser("bench", help="run benchmarks/run_all.py")
    bench.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="passed to run_all.py")

    serve = commands.add_parser("serve", help="run the OpenAI-compatible HTTP server")
    serve.add_argument(
        "--model", default="smollm2-135m", help="alias, HF folder or .gguf (default: %(default)s)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    serve.add_argument("--served-model-name", help="model name clients use (default: --model)")
    serve.add_argument("--max-num-seqs", type=int, help="most sequences per engine step")
    serve.add_argument("--max-num-batched-tokens", type=int, help="token budget per step")
    serve.add_argument("--max-model-len", type=int, help="longest prompt + output")
    serve.add_argument("--num-kv-blocks", type=int, help="KV cache size in blocks")
    serve.add_argument("--block-size", type=int, help="tokens per KV block")
    serve.add_argument(
        "--dtype", help="auto (bf16 where the hardware runs it, the default), float32, bfloat16"
    )
    serve.add_argument(
        "--num-threads", type=int, help="CPU: most torch threads (default: every core)"
    )
    serve.add_argument(
        "--compile-decode",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="decode through CUDA graphs / torch.compile per batch bucket (default: CUDA only)",
    )
    serve.add_argument(
        "--gpu-memory-utilization",
        type=float,
        help="CUDA: share of GPU memory for weights, activations and KV cache (default 0.9)",
    )
    serve.add_argument("--device", help="cpu, cuda, ...")
    serve.add_argument(
        "--no-jump-forward", action="store_true", help="sample grammar-forced tokens too"
    )
    serve.add_argument("--log-level", default="info", help="uvicorn log level")
    serve.add_argument(
        "--reasoning-tags",
        default="auto",
        metavar="START,END",
        help="tags around the model's thoughts: chat answers get reasoning_content, and "
        "max_reasoning_tokens / reasoning_effort bound them; 'auto' finds <think>/</think> in "
        "the chat template, 'none' turns it off (default: %(default)s)",
    )
    serve.add_argument(
        "--tool-call-format",
        default="auto",
        choices=["auto", "hermes", "llama3_json", "mistral"],
        help="how the model writes tool calls; 'auto' reads the chat template, hermes "
        "(<tool_call>...</tool_call>) when it names none (default: %(default)s)",
    )
    serve.add_argument(
        "--api-key",
        help="require 'Authorization: Bearer KEY' on /v1/ requests (401 otherwise); "
        "default: $FORMCAST_API_KEY, else no key",
    )
    # the defaults live in formcast.server.ServerLimits (not imported here: --help stays fast)
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        help="largest request body accepted, 413 above (default: 8388608, 8 MiB)",
    )
    serve.add_argument(
        "--max-waiting-requests",
        type=int,
        help="most requests waiting to be computed; more get 429 + Retry-After (default: 512)",
    )
    serve.add_argument(
        "--drain-timeout",
        type=float,
        metavar="SECONDS",
        help="on SIGTERM / Ctrl-C, how long in-flight requests may still finish before they "
        "are aborted (default: 20)",
    )
    serve.add_argument(
        "--grammar-workers",
        type=int,
        default=2,
        help="processes that compile grammars under the compile budgets; 0 compiles in the "
        "server's threads, without hard budgets (default: %(default)s)",
    )
    # the defaults live in formcast.grammar.limits.GrammarLimits
    serve.add_argument(
        "--compile-timeout",
        type=float,
        metavar="SECONDS",
        help="a grammar compile running longer is ended, 400 (default: 60)",
    )
    serve.add_argument(
        "--compile-memory-mb",
        type=int,
        metavar="MIB",
        help="a grammar compile using more memory is ended, 400 (default: 8192)",
    )
    serve.add_argument(
        "--stall-timeout",
        type=float,
        metavar="SECONDS",
        help="/health answers 503 when an engine step with requests has run this long "
        "(default: 60)",
    )

    medusa = commands.add_parser(
        "train-medusa", help="train Medusa heads by self-distillation (speculative decoding)"
    )
    medusa.add_argument(
        "--model", default="smollm2-135m", help="alias, HF folder or .gguf (default: %(default)s)"
    )
    medusa.add_argument("--out", required=True, help="output .safetensors file")
    medusa.add_argument("--num-heads", type=int, default=3, help="heads (default: %(default)s)")
    medusa.add_argument(
        "--minutes", type=float, default=20.0, help="time budget (default: %(default)s)"
    )
    medusa.add_argument("--seed", type=int, default=0)
    medusa.add_argument(
        "--num-subset-tokens", type=int, default=8192, help="vocabulary subset of the heads"
    )
    medusa.add_argument("--loss", choices=("soft", "hard"), default="soft", help="label kind")
    medusa.add_argument("--cache", help="file to save / reuse the generated text")
    return parser


# -- grammar selection -------------------------------------------------------------------------


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise FormcastError(f"cannot read {path}: {exc.strerror}") from exc


def _schema(path: str) -> Any:
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise FormcastError(f"{path} is not valid JSON: {exc}") from exc


def _compile(args: argparse.Namespace, vocab: Any) -> tuple[str, Any]:
    """(description, compiled grammar) of the grammar options, compiled without caches."""
    from formcast.grammar import compile_choice, compile_regex
    from formcast.grammar.json_schema.compile import compile_json_schema

    if args.schema:
        grammar = compile_json_schema(_schema(args.schema), vocab, cache=False)
        return f"json schema {args.schema}", grammar
    if args.regex is not None:
        return f"regex {args.regex!r}", compile_regex(args.regex, vocab, cache=False)
    if args.choice:
        return f"choice {args.choice!r}", compile_choice(args.choice, vocab, cache=False)
    from formcast.grammar import compile_lark

    return f"lark grammar {args.grammar}", compile_lark(_read(args.grammar), vocab, cache=False)


def _generator(args: argparse.Namespace, model: Any, sampling: dict[str, Any]) -> Any:
    import formcast

    if args.schema:
        return formcast.json(model, _schema(args.schema), **sampling)
    if args.regex is not None:
        return formcast.regex(model, args.regex, **sampling)
    if args.choice:
        return formcast.choice(model, args.choice, **sampling)
    if args.grammar:
        return formcast.cfg(model, _read(args.grammar), **sampling)
    return formcast.text(model, **sampling)


# -- commands ----------------------------------------------------------------------------------


def load_model(name: str) -> Any:
    """The model for ``generate`` (a seam: tests reuse a loaded model through it)."""
    import formcast

    return formcast.load(name)


def run_generate(args: argparse.Namespace) -> int:
    sampling = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.top_p != 1.0:
        sampling["top_p"] = args.top_p
    if args.seed is not None:
        sampling["seed"] = args.seed
    model = load_model(args.model)
    generator = _generator(args, model, sampling)
    prompt: Any = args.prompt
    if args.system:
        prompt = [{"role": "system", "content": args.system}, {"role": "user", "content": prompt}]
    if args.stream:
        for chunk in generator.stream(prompt):
            sys.stdout.write(chunk)
            sys.stdout.flush()
        sys.stdout.write("\n")
        return 0
    print(generator.complete(prompt).text)
    return 0


def _token_text(vocab: Any, tokenizer: Any, token_id: int) -> str:
    """A token's text; special tokens (no bytes) by their name, e.g. ``<|im_end|>``."""
    data = vocab.token_bytes[token_id]
    if data:
        return data.decode("utf-8", "replace")
    return str(tokenizer.convert_ids_to_tokens(token_id))


def _mask_walk(
    grammar: Grammar, vocab: Vocabulary, tokenizer: Any, args: argparse.Namespace
) -> list[dict]:
    """Allowed-token counts of the first masks along ``--text`` or the lowest allowed ids."""
    matcher = grammar.matcher()
    path = tokenizer.encode(args.text, add_special_tokens=False) if args.text else None
    eos = set(vocab.eos_token_ids)
    rows = []
    for step in range(args.masks):
        allowed = matcher.allowed_token_ids()
        row: dict[str, Any] = {"step": step, "num_allowed": int(len(allowed))}
        row["eos_allowed"] = bool(eos.intersection(allowed.tolist()))
        row["examples"] = [_token_text(vocab, tokenizer, t) for t in allowed[:5].tolist()]
        if path is not None:
            if step >= len(path):
                rows.append(row)
                break
            token_id = path[step]
        else:
            candidates = [t for t in allowed.tolist() if t not in eos]
            if not candidates:
                rows.append(row)
                break
            token_id = candidates[0]
        row["next_token_id"] = token_id
        row["next_token"] = _token_text(vocab, tokenizer, token_id)
        row["is_next_allowed"] = matcher.accept_token(token_id)
        rows.append(row)
        if not row["is_next_allowed"] or matcher.is_terminated():
            break
    return rows


def run_compile(args: argparse.Namespace) -> int:
    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary

    tokenizer = load_tokenizer(args.model)
    vocab = Vocabulary.from_tokenizer(tokenizer)
    started = time.perf_counter()
    description, grammar = _compile(args, vocab)
    seconds = time.perf_counter() - started
    report = {
        "grammar": description,
        "kind": getattr(grammar, "kind", type(grammar).__name__),
        "num_states": getattr(grammar, "num_states", None),
        "compile_seconds": round(seconds, 4),
        "vocab_size": vocab.vocab_size,
        "masks": _mask_walk(grammar, vocab, tokenizer, args),
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(f"grammar:   {description}")
    print(f"automaton: {report['num_states']} states ({report['kind']})")
    print(f"compile:   {seconds:.3f} s over {vocab.vocab_size} tokens")
    print("step  allowed  eos  next token")
    for row in report["masks"]:
        nxt = repr(row.get("next_token", ""))
        if row.get("is_next_allowed") is False:
            nxt += "  (rejected)"
        print(
            f"{row['step']:>4}  {row['num_allowed']:>7}  {'y' if row['eos_allowed'] else '-':>3}  {nxt}"
        )
    return 0


def find_benchmarks() -> Path | None:
    """``benchmarks/run_all.py`` in the working directory or the source checkout."""
    candidates = [
        Path.cwd() / "benchmarks" / "run_all.py",
        Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py",
    ]
    return next((path for path in candidates if path.is_file()), None)


def run_bench(args: argparse.Namespace) -> int:
    script = find_benchmarks()
    if script is None:
        raise FormcastError(
            "benchmarks/run_all.py not found: run `formcast bench` from a formcast checkout"
        )
    extra = [a for a in args.args if a != "--"]
    command = [sys.executable, str(script), *extra]
    if args.dry_run:
        print(" ".join(command))
        return 0
    return subprocess.call(command, env={**os.environ, "HF_HUB_OFFLINE": "1"})


_SERVE_ENGINE_OPTIONS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "num_kv_blocks",
    "block_size",
    "dtype",
    "device",
    "num_threads",
    "gpu_memory_utilization",
    "compile_decode",
)


# `formcast serve` option -> ServerLimits field
_SERVE_LIMIT_OPTIONS = {
    "max_body_bytes": "max_body_bytes",
    "max_waiting_requests": "max_waiting_requests",
    "drain_timeout": "drain_timeout_s",
    "stall_timeout": "stall_timeout_s",
}


def run_serve(args: argparse.Namespace) -> int:
    from formcast.server import ServerLimits, serve

    engine_config = {
        name: getattr(args, name)
        for name in _SERVE_ENGINE_OPTIONS
        if getattr(args, name) is not None
    }
    if args.no_jump_forward:
        engine_config["jump_forward"] = False
    engine_config["num_grammar_workers"] = args.grammar_workers
    budgets: dict[str, float | int] = {}
    if args.compile_timeout is not None:
        budgets["compile_timeout_s"] = args.compile_timeout
    if args.compile_memory_mb is not None:
        budgets["compile_memory_bytes"] = args.compile_memory_mb << 20
    if budgets:
        from formcast.grammar.limits import GrammarLimits

        engine_config["grammar_limits"] = GrammarLimits(**budgets)
    limits = {
        field: getattr(args, option)
        for option, field in _SERVE_LIMIT_OPTIONS.items()
        if getattr(args, option) is not None
    }
    serve(
        args.model,
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        log_level=args.log_level,
        api_key=args.api_key or os.environ.get("FORMCAST_API_KEY") or None,
        limits=ServerLimits(**limits),
        reasoning_tags=args.reasoning_tags,
        tool_call_format=args.tool_call_format,
        **engine_config,
    )
    return 0


def run_train_medusa(args: argparse.Namespace) -> int:
    # OpenMP threads that sleep instead of spinning: on a shared CPU, spinning threads make
    # every matmul 5-30x slower (measured); set before torch starts its thread pool
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from formcast.training.medusa import train_medusa

    _, summary = train_medusa(
        args.model,
        args.out,
        num_heads=args.num_heads,
        minutes=args.minutes,
        seed=args.seed,
        num_subset_tokens=args.num_subset_tokens,
        loss=args.loss,
        cache=args.cache,
    )
    print(json.dumps(summary, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``formcast`` console script; returns the exit status."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    commands = {
        "generate": run_generate,
        "compile": run_compile,
        "bench": run_bench,
        "serve": run_serve,
        "train-medusa": run_train_medusa,
    }
    try:
        return commands[args.command](args)
    except FormcastError as exc:
        print(f"formcast: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
