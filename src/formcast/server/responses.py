"""Response pieces shared by the endpoints: ids, usage, logprobs, finish reasons, SSE framing.

Logprobs are the engine's. By default (``logprobs_mode="processed"``, see
`formcast.server.sampling`) they are the log-probabilities of the distribution each token was
drawn from: the model's logits after ``logit_bias``, the penalties, the grammar mask,
temperature and top-k / top-p / min-p / typical truncation (a greedy token: after bias,
penalties and mask, at temperature 1). A token the grammar or truncation removed could not
be drawn (probability 0): it is never listed in ``top_logprobs``, which then holds fewer
entries than asked. With ``logprobs_mode="raw"`` they are the model's own distribution.
Requests asking for logprobs run without jump-forward, so every token was sampled. JSON has no
infinity or NaN: a chosen token's value that is not finite is reported as ``-9999.0``
(OpenAI's floor) and a non-finite alternative is left out.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

from formcast.grammar import Vocabulary

_LOGPROB_FLOOR = -9999.0


def new_id(prefix: str) -> str:
    """A fresh response id like ``chatcmpl-3f2a...``."""
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    """``created``: Unix seconds."""
    return int(time.time())


def usage(num_prompt: int, num_completion: int) -> dict[str, int]:
    """OpenAI ``usage`` body."""
    return {
        "prompt_tokens": num_prompt,
        "completion_tokens": num_completion,
        "total_tokens": num_prompt + num_completion,
    }


def envelope(
    response_id: str, object_name: str, created: int, model: str, choices: list[dict[str, Any]]
) -> dict[str, Any]:
    """The fields every completion response and stream chunk shares, around ``choices``."""
    return {
        "id": response_id,
        "object": object_name,
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
    }


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event ``data: ...`` block."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"


def _finite(value: float) -> float:
    return value if math.isfinite(value) else _LOGPROB_FLOOR


def _top(entry: dict[int, float], num_top: int) -> list[tuple[int, float]]:
    """The ``num_top`` most likely ``(token, logprob)`` of ``entry`` with a finite logprob."""
    finite = [(t, lp) for t, lp in entry.items() if math.isfinite(lp)]
    return sorted(finite, key=lambda item: -item[1])[:num_top]


class TokenTexts:
    """Token id -> (text, bytes) for logprobs; special tokens by their name."""

    def __init__(self, vocab: Vocabulary, tokenizer: Any) -> None:
        self.vocab = vocab
        self.tokenizer = tokenizer

    def text(self, token_id: int) -> str:
        """The token's text (invalid UTF-8 replaced); a special token's name."""
        data = self.vocab.token_bytes[token_id]
        if data:
            return data.decode("utf-8", "replace")
        return str(self.tokenizer.convert_ids_to_tokens(token_id))

    def raw(self, token_id: int) -> list[int]:
        """The token's bytes as a list of ints (OpenAI's ``bytes``)."""
        data = self.vocab.token_bytes[token_id] or self.text(token_id).encode("utf-8")
        return list(data)

    def chat_logprobs(
        self, token_ids: list[int], entries: list[dict[int, float]], num_top: int
    ) -> list[dict[str, Any]]:
        """Chat ``logprobs.content``: one entry per token with ``num_top`` alternatives."""
        content = []
        for token_id, entry in zip(token_ids, entries, strict=True):
            top = _top(entry, num_top)
            content.append(
                {
                    "token": self.text(token_id),
                    "logprob": _finite(entry.get(token_id, math.nan)),
                    "bytes": self.raw(token_id),
                    "top_logprobs": [
                        {"token": self.text(t), "logprob": lp, "bytes": self.raw(t)}
                        for t, lp in top
                    ],
                }
            )
        return content

    def completion_logprobs(
        self,
        token_ids: list[int],
        entries: list[dict[int, float]],
        num_top: int,
        text_offset: int,
    ) -> dict[str, Any]:
        """Text completion ``logprobs``: tokens, their logprobs, top alternatives, offsets."""
        tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
        offset = text_offset
        for token_id, entry in zip(token_ids, entries, strict=True):
            text = self.text(token_id)
            tokens.append(text)
            token_logprobs.append(_finite(entry.get(token_id, math.nan)))
            top_logprobs.append({self.text(t): lp for t, lp in _top(entry, num_top)})
            offsets.append(offset)
            offset += len(text)
        return {
            "tokens": tokens,
            "token_logprobs": token_logprobs,
            "top_logprobs": top_logprobs,
            "text_offset": offsets,
        }
