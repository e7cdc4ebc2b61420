"""``logprobs`` / ``top_logprobs`` describe the distribution each token was drawn from.

Oracle: transformers' own SmolLM2 (``smol_hf``, float32) run on the prompt and the returned
tokens; at each step the reference is ``log_softmax`` of its logits with the tokens the
grammar forbids at that step removed (computed here from the grammar's language, not from
formcast's masks: a ``choice`` allows a token whose bytes keep the output a prefix of an
option, ``[0-9]{3}`` one of digits that fit), divided by the temperature (1 for greedy) and
cut to the ``top_k`` best. Response bodies are read as raw JSON that must hold no ``NaN`` or
``Infinity``.
"""

from __future__ import annotations

import http.client
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from server_helpers import MODEL

TOLERANCE = 1e-3  # float32 engine vs float32 transformers: logits agree to ~1e-4
COLORS = ["crimson", "teal", "ultramarine", "gold"]


def _is_color_prefix(text: bytes) -> bool:
    return any(color.encode().startswith(text) for color in COLORS)


def _is_digits_prefix(text: bytes) -> bool:
    return text.isdigit() and len(text) <= 3


def _post_strict(server: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a chat completion; the body is parsed refusing NaN / Infinity."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"response body holds the non-JSON constant {constant}")

    conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
    try:
        data = json.dumps({"model": MODEL, **body}).encode()
        conn.request("POST", "/v1/chat/completions", data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read(), parse_constant=refuse)
    finally:
        conn.close()


def _reference_rows(smol_hf, prompt_ids: list[int], token_ids: list[int]) -> torch.Tensor:
    """transformers' logits rows predicting each of ``token_ids`` (T, V)."""
    with torch.no_grad():
        logits = smol_hf(torch.tensor([prompt_ids + token_ids])).logits[0].float()
    start = len(prompt_ids) - 1
    return logits[start : start + len(token_ids)]


def _check_against_reference(
    server,
    smol_hf,
    token_bytes: list[bytes],
    request: dict[str, Any],
    is_viable: Callable[[bytes], bool],
) -> int:
    """Run ``request`` with logprobs; check every step against the reference. Returns the
    number of steps checked."""
    num_top = 5
    status, body = _post_strict(
        server, {**request, "logprobs": True, "top_logprobs": num_top, "max_tokens": 12}
    )
    assert status == 200, body
    ids_of = {}
    for token_id, data in enumerate(token_bytes):
        if data:
            ids_of.setdefault(data, []).append(token_id)
    llm = server.engine.llm
    _, prompt_ids = llm.encode_prompt(request["messages"])
    assert body["usage"]["prompt_tokens"] == len(prompt_ids)
    content = body["choices"][0]["logprobs"]["content"]

    def token_id(entry: dict[str, Any]) -> int:
        (only,) = ids_of[bytes(entry["bytes"])]  # a token's bytes name it uniquely here
        return only

    token_ids = [token_id(entry) for entry in content]
    assert (
        b"".join(token_bytes[t] for t in token_ids).decode()
        == (body["choices"][0]["message"]["content"])
    )
    rows = _reference_rows(smol_hf, prompt_ids, token_ids)
    temperature = request.get("temperature", 1.0) or 1.0
    top_k = request.get("top_k", 0)
    prefix = b""
    for step, (entry, row) in enumerate(zip(content, rows, strict=True)):
        allowed = [t for t, data in enumerate(token_bytes) if data and is_viable(prefix + data)]
        masked = torch.full_like(row, -math.inf)
        masked[allowed] = row[allowed] / temperature
        if top_k:
            kth = masked.topk(top_k).values[-1]
            masked = masked.masked_fill(masked < kth, -math.inf)
        reference = torch.log_softmax(masked, dim=-1)
        chosen = token_ids[step]
        assert chosen in allowed
        assert math.isclose(entry["logprob"], float(reference[chosen]), abs_tol=TOLERANCE)
        top = entry["top_logprobs"]
        num_drawable = int(reference.isfinite().sum())
        assert len(top) == min(num_top, num_drawable)  # never a token that could not be drawn
        expected = reference.sort(descending=True).values[: len(top)].tolist()
        for alternative, value in zip(top, expected, strict=True):
            alternative_id = token_id(alternative)
            assert alternative_id in allowed and math.isfinite(alternative["logprob"])
            assert math.isclose(
                alternative["logprob"], float(reference[alternative_id]), abs_tol=TOLERANCE
            )
            assert math.isclose(alternative["logprob"], value, abs_tol=TOLERANCE)
        prefix += token_bytes[chosen]
    return len(content)


@pytest.mark.parametrize(
    ("request_fields", "is_viable"),
    [
        (
            {
                "messages": [{"role": "user", "content": "Name a color."}],
                "choice": COLORS,
                "temperature": 0.7,
                "seed": 3,
            },
            _is_color_prefix,
        ),
        (
            {
                "messages": [{"role": "user", "content": "Name a color."}],
                "choice": COLORS,
                "temperature": 1.4,
                "top_k": 2,
                "seed": 5,
            },
            _is_color_prefix,
        ),
        (
            {
                "messages": [{"role": "user", "content": "Write a three-digit number."}],
                "regex": "[0-9]{3}",
                "temperature": 1.2,
                "seed": 8,
            },
            _is_digits_prefix,
        ),
        (
            {
                "messages": [{"role": "user", "content": "Write a three-digit number."}],
                "regex": "[0-9]{3}",
                "temperature": 0,
            },
            _is_digits_prefix,
        ),
    ],
    ids=["choice-t0.7", "choice-top_k2", "regex-t1.2", "regex-greedy"],
)
def test_logprobs_are_those_of_the_masked_scaled_distribution(
    server, smol_hf, smollm2_vocab, request_fields, is_viable
):
    num_steps = _check_against_reference(
        server, smol_hf, smollm2_vocab.token_bytes, request_fields, is_viable
    )
    assert num_steps >= 1


def test_raw_mode_reports_the_model_distribution(server, smol_hf, smollm2_vocab):
    messages = [{"role": "user", "content": "Name a color."}]
    status, body = _post_strict(
        server,
        {
            "messages": messages,
            "choice": COLORS,
            "temperature": 0.7,
            "seed": 3,
            "logprobs": True,
            "top_logprobs": 3,
            "logprobs_mode": "raw",
        },
    )
    assert status == 200, body
    ids_of = {data: t for t, data in enumerate(smollm2_vocab.token_bytes) if data}
    content = body["choices"][0]["logprobs"]["content"]
    token_ids = [ids_of[bytes(entry["bytes"])] for entry in content]
    _, prompt_ids = server.engine.llm.encode_prompt(messages)
    rows = _reference_rows(smol_hf, prompt_ids, token_ids)
    for entry, row, chosen in zip(content, rows, token_ids, strict=True):
        reference = torch.log_softmax(row, dim=-1)  # no mask, temperature 1
        assert math.isclose(entry["logprob"], float(reference[chosen]), abs_tol=TOLERANCE)
        expected = reference.topk(3).values.tolist()
        got = [alternative["logprob"] for alternative in entry["top_logprobs"]]
        assert got == pytest.approx(expected, abs=TOLERANCE)


def test_logprobs_mode_needs_logprobs(server):
    status, body = _post_strict(
        server,
        {"messages": [{"role": "user", "content": "Hi"}], "logprobs_mode": "processed"},
    )
    assert status == 400 and body["error"]["param"] == "logprobs_mode"
