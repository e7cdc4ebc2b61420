"""Request fields -> `SamplingParams`: OpenAI names and defaults onto formcast's parameters.

OpenAI defaults apply where they differ from formcast's: ``temperature=1``, ``top_p=1``,
no ``max_tokens`` cap (the rest of the context window). ``max_completion_tokens`` is the
newer name of ``max_tokens`` (setting both is refused). Chat ``logprobs=true`` with
``top_logprobs=k`` asks for ``k`` alternatives per token; text completions take
``logprobs=k`` directly. Logprobs describe the distribution each token was drawn from
(``logprobs_mode="processed"``: after the grammar mask, penalties, ``logit_bias``,
temperature and truncation; greedy tokens at temperature 1); the extension field
``logprobs_mode="raw"`` asks for the model's own distribution instead. Invalid values raise
`SamplingParamsError` (a 400 naming the field).
"""

from __future__ import annotations

from typing import Any

from formcast.samplers import SamplingParams
from formcast.server.errors import bad_request
from formcast.server.protocol import ChatCompletionRequest, SamplingFields

MAX_TOP_LOGPROBS = 20


def max_new_tokens(request: SamplingFields) -> int | None:
    """``max_completion_tokens`` or ``max_tokens`` (None: up to the context length)."""
    newer = getattr(request, "max_completion_tokens", None)
    if newer is not None and request.max_tokens is not None and newer != request.max_tokens:
        raise bad_request(
            "set max_tokens or max_completion_tokens, not both", param="max_completion_tokens"
        )
    return newer if newer is not None else request.max_tokens


def num_logprobs(request: SamplingFields) -> int | None:
    """Top alternatives per token to return (None: no logprobs)."""
    if isinstance(request, ChatCompletionRequest):
        if request.top_logprobs is not None and not request.logprobs:
            raise bad_request("top_logprobs needs logprobs=true", param="top_logprobs")
        if not request.logprobs:
            return None
        k = request.top_logprobs or 0
        if not 0 <= k <= MAX_TOP_LOGPROBS:
            raise bad_request(
                f"top_logprobs={k} must be in [0, {MAX_TOP_LOGPROBS}]", param="top_logprobs"
            )
        return k
    k = request.logprobs
    if k is not None and not 0 <= k <= 5:
        raise bad_request(f"logprobs={k} must be in [0, 5]", param="logprobs")
    return k


def sampling_params_from(request: SamplingFields) -> SamplingParams:
    """The `SamplingParams` of a chat or text completion request.

    Raises
    ------
    SamplingParamsError
        A value out of range (the message names the field and the value).
    APIError
        Conflicting OpenAI fields.
    """
    fields: dict[str, Any] = {
        "temperature": 1.0 if request.temperature is None else request.temperature,
        "top_p": 1.0 if request.top_p is None else request.top_p,
        "n": 1 if request.n is None else request.n,
        "max_tokens": max_new_tokens(request),
        "seed": request.seed,
        "logprobs": num_logprobs(request),
    }
    if fields["logprobs"] is not None:
        fields["logprobs_mode"] = request.logprobs_mode or "processed"
    elif request.logprobs_mode is not None:
        raise bad_request("logprobs_mode needs logprobs", param="logprobs_mode")
    optional = {
        "presence_penalty": request.presence_penalty,
        "frequency_penalty": request.frequency_penalty,
        "logit_bias": request.logit_bias,
        "stop": request.stop,
        "top_k": request.top_k,
        "min_p": request.min_p,
        "typical_p": request.typical_p,
        "repetition_penalty": request.repetition_penalty,
        "min_tokens": request.min_tokens,
        "ignore_eos": request.ignore_eos,
        "stop_token_ids": request.stop_token_ids,
        "skip_special_tokens": request.skip_special_tokens,
    }
    fields.update({name: value for name, value in optional.items() if value is not None})
    return SamplingParams(**fields)
