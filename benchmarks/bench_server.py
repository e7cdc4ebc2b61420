"""OpenAI-compatible serving: formcast serve vs transformers serve, same client, same run.

Each server runs in its own process on a loopback port; the load generator (this process)
uses the official ``openai`` async client with streaming. For each concurrency level ``c``,
``c`` workers send ``max(min_requests, 2c)`` chat requests back to back (greedy,
``max_tokens`` fixed; transformers serve runs only ``--peer-levels``, as it is slow here).
Measured per level: requests/s, content chunks/s (one chunk per token, except jump-forward
chunks that carry several), time to first content chunk (TTFT) and the gap between content
chunks (inter-token latency, ITL), p50/p99.

Workloads: ``unstructured`` (a short story) and ``json_schema`` (a person object via
``response_format``; ``valid`` counts outputs that parse and validate with jsonschema, ``cut``
counts completions ended by ``max_tokens``). transformers serve (if the installed
transformers has it) is started on the same SmolLM2 folder (a temporary copy whose config
gets the ``architectures`` field the converted GGUF config lacks); it does not implement
``response_format``, so its json_schema rows are unconstrained and shown for latency only.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_server.py [--levels 1 4 16]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import jsonschema
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 16},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
TOPICS = ["a cat", "the sea", "a robot", "winter", "a city", "a dragon", "music", "a train"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


def start_formcast(args: argparse.Namespace) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    command = [
        sys.executable, "-m", "formcast.cli", "serve", "--model", "smollm2-135m",
        "--port", str(port), "--max-model-len", "2048", "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command)
    wait_healthy(f"http://127.0.0.1:{port}/health", process)
    return process, f"http://127.0.0.1:{port}/v1", "smollm2-135m"


def transformers_serve_available() -> str | None:
    """Why transformers serve cannot run here (None: it can)."""
    exe = Path(sys.executable).with_name("transformers")
    if not exe.exists():
        return "no `transformers` command in this environment"
    result = subprocess.run([str(exe), "serve", "--help"], capture_output=True, text=True)
    return None if result.returncode == 0 else "`transformers serve --help` failed"


def start_transformers(args: argparse.Namespace, folder: Path) -> tuple[subprocess.Popen, str, str]:
    from formcast.engine.models.loader import resolve_model_path

    source = resolve_model_path("smollm2-135m")
    for item in source.iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((source / "config.json").read_text())
    config["architectures"] = config.get("architectures") or ["LlamaForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))
    port = free_port()
    exe = str(Path(sys.executable).with_name("transformers"))
    command = [exe, "serve", str(folder), "--port", str(port), "--device", "cpu"]
    if args.transformers_cb:
        command.append("--continuous-batching")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_healthy(f"http://localhost:{port}/health", process)
    return process, f"http://localhost:{port}/v1", str(folder)


async def one_request(client, model: str, k: int, workload: str, max_tokens: int) -> dict:
    if workload == "json_schema":
        messages = [{"role": "user", "content": f"Describe person number {k} as JSON."}]
        extra = {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": PERSON, "strict": True},
            }
        }
    else:
        messages = [{"role": "user", "content": f"Write a short story about {TOPICS[k % 8]}."}]
        extra = {}
    begin = time.perf_counter()
    stream = await client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        **extra,
    )
    times, text, reason = [], "", None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
            text += chunk.choices[0].delta.content
        if chunk.choices and chunk.choices[0].finish_reason:
            reason = chunk.choices[0].finish_reason
    valid = None
    if workload == "json_schema":
        try:
            jsonschema.validate(json.loads(text), PERSON)
            valid = True
        except (json.JSONDecodeError, jsonschema.ValidationError):
            valid = False
    return {
        "ttft": times[0] - begin if times else float("nan"),
        "gaps": list(np.diff(times)) if len(times) > 1 else [],
        "chunks": len(times),
        "valid": valid,
        "is_cut": reason == "length",
    }


async def run_level(base_url: str, model: str, workload: str, c: int, args) -> dict:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
    num_requests = max(args.min_requests, 2 * c)
    counter = iter(range(num_requests))
    results: list[dict] = []

    async def worker() -> None:
        for k in counter:
            results.append(await one_request(client, model, k, workload, args.max_tokens))

    await one_request(client, model, 999, workload, 4)  # warm-up (grammar compile, caches)
    begin = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(c)))
    wall = time.perf_counter() - begin
    await client.close()
    ttft = np.array([r["ttft"] for r in results])
    gaps = np.array([g for r in results for g in r["gaps"]] or [np.nan])
    valid = [r["valid"] for r in results if r["valid"] is not None]
    return {
        "requests": num_requests,
        "req_per_s": num_requests / wall,
        "chunks_per_s": sum(r["chunks"] for r in results) / wall,
        "ttft_p50": float(np.nanpercentile(ttft, 50)),
        "ttft_p99": float(np.nanpercentile(ttft, 99)),
        "itl_p50": float(np.nanpercentile(gaps, 50)),
        "itl_p99": float(np.nanpercentile(gaps, 99)),
        "valid": f"{sum(valid)}/{len(valid)}" if valid else "-",
        "cut": sum(r["is_cut"] for r in results),
    }


def print_row(server: str, workload: str, c: int, row: dict) -> None:
    print(
        f"| {server} | {workload} | {c} | {row['requests']} | {row['req_per_s']:.2f} | "
        f"{row['chunks_per_s']:.1f} | {row['ttft_p50'] * 1e3:.0f} | {row['ttft_p99'] * 1e3:.0f} | "
        f"{row['itl_p50'] * 1e3:.0f} | {row['itl_p99'] * 1e3:.0f} | {row['valid']} | "
        f"{row['cut']} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--min-requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--workloads", nargs="+", default=["unstructured", "json_schema"])
    parser.add_argument(
        "--peer-levels", type=int, nargs="+", default=[1, 4], help="levels for transformers"
    )
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--transformers-cb", action="store_true", help="--continuous-batching")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"load average at start: {os.getloadavg()}")
    servers = [("formcast", start_formcast)]
    reason = "skipped (--no-transformers)" if args.no_transformers else None
    reason = reason or transformers_serve_available()
    if reason is None:
        servers.append(("transformers serve", None))
    else:
        print(f"transformers serve: {reason}")
    print(
        "| server | workload | concurrency | requests | req/s | chunks/s | TTFT p50 ms | "
        "TTFT p99 ms | ITL p50 ms | ITL p99 ms | valid | cut by max_tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, starter in servers:
        folder = Path(tempfile.mkdtemp(prefix="bench-server-"))
        try:
            if starter is None:
                process, base_url, model = start_transformers(args, folder)
            else:
                process, base_url, model = starter(args)
        except RuntimeError as exc:
            print(f"{name}: could not start ({exc})")
            shutil.rmtree(folder, ignore_errors=True)
            continue
        try:
            levels = args.levels if starter is not None else args.peer_levels
            for workload in args.workloads:
                for c in levels:
                    row = asyncio.run(run_level(base_url, model, workload, c, args))
                    print_row(name, workload, c, row)
        finally:
            process.terminate()
            process.wait(30)
            shutil.rmtree(folder, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
