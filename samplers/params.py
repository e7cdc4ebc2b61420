"""`SamplingParams`: one request's sampling settings, validated on construction.

Every invalid value raises `SamplingParamsError(field, value, requirement)`, whose message
names the field, the value and the rule it broke. Semantics follow vLLM / the OpenAI API where
they exist (penalties, logit_bias, stop, logprobs) and transformers' warpers for truncation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from formcast.errors import SamplingParamsError

_MAX_SEED = 2**64
LOGPROBS_MODES = ("raw", "processed")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_real(name: str, value: object, lower: float, upper: float, *, open_lower: bool) -> None:
    """Require a finite real in ``(lower, upper]`` (``open_lower``) or ``[lower, upper]``."""
    lower_text = "(" if open_lower else "["
    requirement = f"must be a real number in {lower_text}{lower}, {upper}]"
    if not _is_real(value) or math.isnan(value):
        raise SamplingParamsError(name, value, requirement)
    if value > upper or value < lower or (open_lower and value == lower):
        raise SamplingParamsError(name, value, requirement)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings of one request.

    Parameters
    ----------
    temperature : float
        Softmax temperature, ``>= 0``; ``0`` means greedy (argmax after penalties, bias and the
        grammar mask; truncation filters are then irrelevant and skipped).
    top_k : int
        Keep the ``top_k`` highest logits (ties with the k-th are kept); ``0`` or ``-1`` = off.
    top_p : float
        Nucleus: keep the smallest prefix of tokens sorted by probability whose mass reaches
        ``top_p``, in ``(0, 1]``. Ties with the last kept token are kept.
    min_p : float
        Drop tokens whose probability is below ``min_p`` times the top probability, ``[0, 1]``.
    typical_p : float
        Locally typical sampling mass in ``(0, 1]``; ``1`` = off.
    repetition_penalty : float
        CTRL penalty (> 0) on every token of prompt and output: positive logits are divided by
        it, negative ones multiplied. ``1`` = off.
    frequency_penalty, presence_penalty : float
        OpenAI penalties in ``[-2, 2]`` over output tokens only: ``logit -= frequency * count +
        presence * (count > 0)``.
    logit_bias : Mapping[int, float] | None
        Added to the logits of the given token ids (keys may be ints or decimal strings, as in
        JSON). ``-inf`` bans a token; ``+inf`` and NaN are rejected.
    seed : int | None
        Seed of the request's own ``torch.Generator`` (see `make_generator`), in ``[0, 2**64)``.
    n : int
        Number of completions, ``>= 1`` (the engine forks; the sampler sees rows).
    max_tokens : int | None
        Maximum new tokens, ``>= 1``; ``None`` = until the model's maximum length.
    min_tokens : int
        EOS and ``stop_token_ids`` are masked while fewer than ``min_tokens`` tokens exist.
    stop : tuple[str, ...]
        Stop strings (a single ``str`` or any iterable of non-empty ``str`` is accepted).
    stop_token_ids : tuple[int, ...]
        Extra token ids that end generation.
    ignore_eos : bool
        EOS does not stop generation (and is not masked by ``min_tokens``).
    logprobs : int | None
        Number of top log-probabilities to return per token; ``0`` = only the chosen token's.
    logprobs_mode : {"raw", "processed"} | None
        Which distribution the logprobs describe: ``"raw"``, the model's own (``log_softmax``
        of its logits); ``"processed"``, the one the token was drawn from (after penalties,
        bias, the grammar mask, temperature and truncation; greedy rows at temperature 1,
        untruncated); None, the sampler's default (the engine's: ``"raw"``, as vLLM).
    skip_special_tokens : bool
        The output text leaves special tokens out (True, the default) or shows their text
        (False: a control token such as a tool call's ``[TOOL_CALLS]``). EOS and stop ids
        end generation and are never in the text.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    typical_p: float = 1.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: Mapping[int, float] | None = None
    seed: int | None = None
    n: int = 1
    max_tokens: int | None = 256
    min_tokens: int = 0
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None
    logprobs_mode: str | None = None
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if not _is_real(self.temperature) or not math.isfinite(self.temperature):
            raise SamplingParamsError(
                "temperature", self.temperature, "must be a finite real number >= 0"
            )
        if self.temperature < 0:
            raise SamplingParamsError("temperature", self.temperature, "must be >= 0 (0 = greedy)")
        if not _is_int(self.top_k) or self.top_k < -1:
            raise SamplingParamsError(
                "top_k", self.top_k, "must be an int >= 1, or 0 / -1 to disable it"
            )
        _check_real("top_p", self.top_p, 0.0, 1.0, open_lower=True)
        _check_real("min_p", self.min_p, 0.0, 1.0, open_lower=False)
        _check_real("typical_p", self.typical_p, 0.0, 1.0, open_lower=True)
        if (
            not _is_real(self.repetition_penalty)
            or not math.isfinite(self.repetition_penalty)
            or self.repetition_penalty <= 0
        ):
            raise SamplingParamsError(
                "repetition_penalty", self.repetition_penalty, "must be a finite real number > 0"
            )
        _check_real("frequency_penalty", self.frequency_penalty, -2.0, 2.0, open_lower=False)
        _check_real("presence_penalty", self.presence_penalty, -2.0, 2.0, open_lower=False)
        object.__setattr__(self, "logit_bias", _normalise_logit_bias(self.logit_bias))
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < _MAX_SEED):
            raise SamplingParamsError("seed", self.seed, "must be None or an int in [0, 2**64)")
        if not _is_int(self.n) or self.n < 1:
            raise SamplingParamsError("n", self.n, "must be an int >= 1")
        if self.max_tokens is not None and (not _is_int(self.max_tokens) or self.max_tokens < 1):
            raise SamplingParamsError("max_tokens", self.max_tokens, "must be None or an int >= 1")
        if not _is_int(self.min_tokens) or self.min_tokens < 0:
            raise SamplingParamsError("min_tokens", self.min_tokens, "must be an int >= 0")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise SamplingParamsError(
                "min_tokens", self.min_tokens, f"must be <= max_tokens ({self.max_tokens})"
            )
        object.__setattr__(self, "stop", _normalise_stop(self.stop))
        object.__setattr__(self, "stop_token_ids", _normalise_token_ids(self.stop_token_ids))
        if not isinstance(self.ignore_eos, bool):
            raise SamplingParamsError("ignore_eos", self.ignore_eos, "must be a bool")
        if not isinstance(self.skip_special_tokens, bool):
            raise SamplingParamsError(
                "skip_special_tokens", self.skip_special_tokens, "must be a bool"
            )
        if self.logprobs is not None and (not _is_int(self.logprobs) or self.logprobs < 0):
            raise SamplingParamsError("logprobs", self.logprobs, "must be None or an int >= 0")
        if self.logprobs_mode not in LOGPROBS_MODES + (None,):
            raise SamplingParamsError(
                "logprobs_mode", self.logprobs_mode, "must be None, 'raw' or 'processed'"
            )

    @property
    def is_greedy(self) -> bool:
        """True when the request decodes by argmax (``temperature == 0``)."""
        return self.temperature == 0

    @property
    def has_top_k(self) -> bool:
        """True when top-k filtering is on (``top_k >= 1``)."""
        return self.top_k > 0


def _normalise_logit_bias(bias: object) -> Mapping[int, float] | None:
    if bias is None:
        return None
    if not isinstance(bias, Mapping):
        raise SamplingParamsError("logit_bias", bias, "must be None or a mapping token id -> bias")
    normalised: dict[int, float] = {}
    for key, value in bias.items():
        token_id = key
        if isinstance(key, str) and key.strip().isdigit():
            token_id = int(key)
        if not _is_int(token_id) or token_id < 0:
            raise SamplingParamsError(
                "logit_bias", bias, f"key {key!r} must be a token id (int >= 0)"
            )
        if not _is_real(value) or math.isnan(value) or value == math.inf:
            raise SamplingParamsError(
                "logit_bias", bias, f"value {value!r} for token {key!r} must be a real < +inf"
            )
        normalised[token_id] = float(value)
    return MappingProxyType(normalised) if normalised else None


def _normalise_stop(stop: object) -> tuple[str, ...]:
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, Iterable):
        raise SamplingParamsError("stop", stop, "must be a str or a sequence of str")
    items = tuple(stop)
    for item in items:
        if not isinstance(item, str) or not item:
            raise SamplingParamsError("stop", stop, f"item {item!r} must be a non-empty str")
    return items


def _normalise_token_ids(token_ids: object) -> tuple[int, ...]:
    if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Iterable):
        raise SamplingParamsError("stop_token_ids", token_ids, "must be a sequence of int")
    items = tuple(token_ids)
    for item in items:
        if not _is_int(item) or item < 0:
            raise SamplingParamsError(
                "stop_token_ids", token_ids, f"item {item!r} must be a token id (int >= 0)"
            )
    return items
