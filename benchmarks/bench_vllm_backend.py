"""vLLM with formcast's logits-processor plugin vs vLLM's own xgrammar and guidance backends.

Same model folder, prompts, schemas and sampling for every backend; one vLLM engine per
process, one after the other (``--backends``). Reports per backend: wall time of one
``LLM.generate`` over all requests (after a warm-up), output tokens/s, and outputs that
finished but do not validate (``jsonschema``), next to the ratio formcast / xgrammar.

Schemas: JSONSchemaBench rows (``--split``, seeded sample, small enough for the prompt) that
all three backends accept (vLLM's own validators for xgrammar and guidance, a compile for
formcast), plus hand-written schemas where xgrammar is known to over-accept (several
``allOf`` branches, length bounds beside a pattern). Run it in the vLLM environment::

    make vllm && .venv-vllm/bin/python benchmarks/bench_vllm_backend.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
MAX_SCHEMA_CHARS = 1200
PROMPT_SCHEMA_CHARS = 300
OVER_ACCEPTED = [  # xgrammar drops constraints here (formcast and guidance keep them)
    {
        "allOf": [
            {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            {"properties": {"code": {"minLength": 4, "maxLength": 6, "pattern": "^[A-Z]+$"}}},
        ]
    },
    {
        "type": "object",
        "properties": {"tag": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}},
        "required": ["tag"],
    },
    {
        "allOf": [
            {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            {"properties": {"n": {"minimum": 10, "maximum": 99}}},
            {"properties": {"n": {"multipleOf": 5}}},
        ]
    },
    {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["items"],
        "additionalProperties": False,
    },
]


def _candidates(split: str, num: int, seed: int) -> list[dict]:
    rows = []
    with open(DATA / f"{split}.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if len(line) > 40 * MAX_SCHEMA_CHARS:
                continue
            schema = json.loads(line)["schema"]
            if len(json.dumps(schema)) <= MAX_SCHEMA_CHARS:
                rows.append(schema)
    random.Random(seed).shuffle(rows)
    return rows[: num * 3]


def _accepted_by_all(schemas: list[dict], folder: str) -> list[dict]:
    """Schemas every backend accepts (vLLM's validators; formcast's compile)."""
    from transformers import AutoTokenizer
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    from formcast.grammar import Vocabulary, compile_json_schema

    vocab = Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(folder))
    kept = []
    for schema in schemas:
        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
        try:
            validate_xgrammar_grammar(params)
            validate_guidance_grammar(params)
            compile_json_schema(schema, vocab)
        except Exception:  # noqa: BLE001 - a refusal by any backend drops the schema
            continue
        kept.append(schema)
    return kept


def run_backend(backend: str, folder: str, job_file: str, dtype: str) -> dict:
    """One engine, all requests: runs in its own process (called through ``--worker``)."""
    import jsonschema
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    job = json.loads(Path(job_file).read_text())
    schemas = job["schemas"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = []
    for schema in schemas:
        text = "Reply with a JSON object that matches this schema: " + json.dumps(schema)
        chat = tokenizer.apply_chat_template(
            [{"role": "user", "content": text[:PROMPT_SCHEMA_CHARS]}],
            tokenize=False,
            add_generation_prompt=True,
        )
        ids = tokenizer.encode(chat, add_special_tokens=False)
        prompts.append(TokensPrompt(prompt_token_ids=ids))
    kwargs: dict = {"structured_outputs_config": {"backend": backend}}
    if backend == "formcast":  # the plugin loads by its entry point when formcast is installed
        plugins = entry_points(group="vllm.logits_processors")
        is_registered = any(plugin.name == "formcast" for plugin in plugins)
        processor = "formcast.integrations.vllm:FormcastLogitsProcessor"
        kwargs = {} if is_registered else {"logits_processors": [processor]}
    started = time.perf_counter()
    llm = LLM(folder, dtype=dtype, max_model_len=2048, max_num_seqs=64, seed=0, **kwargs)
    load_s = time.perf_counter() - started

    def params_of(schema: dict) -> SamplingParams:
        common = {"temperature": 0.0, "max_tokens": job["max_tokens"]}
        if backend == "formcast":
            return SamplingParams(extra_args={"formcast": {"json_schema": schema}}, **common)
        return SamplingParams(structured_outputs=StructuredOutputsParams(json=schema), **common)

    llm.generate([prompts[0]], SamplingParams(max_tokens=8), use_tqdm=False)  # warm-up
    started = time.perf_counter()
    outputs = llm.generate(prompts, [params_of(s) for s in schemas], use_tqdm=False)
    wall_s = time.perf_counter() - started
    num_tokens = num_stopped = num_invalid = 0
    invalid = []
    for schema, output in zip(schemas, outputs, strict=True):
        completion = output.outputs[0]
        num_tokens += len(completion.token_ids)
        if completion.finish_reason != "stop":
            continue
        num_stopped += 1
        try:
            jsonschema.validate(json.loads(completion.text), schema)
        except (ValueError, jsonschema.ValidationError) as exc:
            num_invalid += 1
            invalid.append({"text": completion.text[:200], "error": str(exc)[:200]})
    return {
        "backend": backend,
        "num_requests": len(schemas),
        "load_s": round(load_s, 1),
        "wall_s": round(wall_s, 2),
        "output_tokens": num_tokens,
        "tokens_per_s": round(num_tokens / wall_s, 1),
        "num_stopped": num_stopped,
        "num_invalid": num_invalid,
        "invalid": invalid[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="formcast,xgrammar,guidance")
    parser.add_argument("--split", default="Github_easy")
    parser.add_argument("--num-schemas", type=int, default=28)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="smollm2-135m", help="alias or model folder")
    parser.add_argument("--out", default=None, help="write the JSON results here")
    parser.add_argument("--worker", nargs=2, metavar=("BACKEND", "JOB"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    from formcast.engine.models.loader import resolve_model_path

    folder = str(resolve_model_path(args.model))
    if args.worker:
        result = run_backend(args.worker[0], folder, args.worker[1], args.dtype)
        print("RESULT " + json.dumps(result), flush=True)
        return
    candidates = _candidates(args.split, args.num_schemas, args.seed)
    schemas = _accepted_by_all(candidates, folder)[: args.num_schemas]
    schemas += _accepted_by_all(OVER_ACCEPTED, folder)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"schemas": schemas, "max_tokens": args.max_tokens}, handle)
    results = []
    for backend in args.backends.split(","):
        command = [sys.executable, __file__, "--dtype", args.dtype, "--model", folder]
        command += ["--worker", backend, handle.name]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [x for x in completed.stdout.splitlines() if x.startswith("RESULT ")]
        if completed.returncode != 0 or not lines:
            raise SystemExit(f"{backend} failed:\n{completed.stderr[-4000:]}")
        results.append(json.loads(lines[-1][len("RESULT ") :]))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "invalid"}), flush=True)
        for case in results[-1]["invalid"]:
            print(f"invalid ({backend}): {case}", flush=True)
    by_name = {r["backend"]: r for r in results}
    if "formcast" in by_name and "xgrammar" in by_name:
        ours, theirs = by_name["formcast"], by_name["xgrammar"]
        print(
            f"formcast / xgrammar: tokens/s {ours['tokens_per_s'] / theirs['tokens_per_s']:.2f}x, "
            f"wall {theirs['wall_s'] / ours['wall_s']:.2f}x faster"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
