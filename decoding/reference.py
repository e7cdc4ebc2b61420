"""The reference decoding loop: one sequence, one token per step, the oracle for the engine.

``logits_fn(token_ids) -> (V,) logits`` is any model (transformers, our engine, a toy). Each
step: fill the grammar mask row, sample with formcast's sampler, advance the matcher, check
the stop conditions. With ``jump_forward`` on, bytes the grammar forces are appended as
canonical tokens (`forced_token_ids`) without calling the model.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import torch

from formcast.decoding.jump_forward import jump_forward_token_ids
from formcast.errors import DeadEndError, RequestError
from formcast.grammar import Grammar, Matcher, allocate_token_bitmask
from formcast.samplers import Sampler, SamplingBatch, SamplingParams, make_generator

LogitsFn = Callable[[Sequence[int]], torch.Tensor]


@dataclass
class ReferenceOutput:
    """What the reference loop produced for one request.

    ``finish_reason`` is ``"stop"`` (EOS, stop id, stop string, or the grammar terminated) or
    ``"length"`` (``max_tokens`` reached). ``forced_positions`` are the output indices of
    tokens appended by jump-forward rather than sampled.
    """

    token_ids: list[int]
    finish_reason: str
    num_model_calls: int
    forced_positions: list[int] = field(default_factory=list)


def generate_reference(
    logits_fn: LogitsFn,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    *,
    vocab_size: int,
    eos_token_ids: Collection[int],
    grammar: Grammar | None = None,
    jump_forward: bool = False,
    encode: Callable[[str], list[int]] | None = None,
    decode: Callable[[list[int]], str] | None = None,
    max_model_len: int = 4096,
    sampler: Sampler | None = None,
) -> ReferenceOutput:
    """Generate one sequence token by token.

    Parameters
    ----------
    logits_fn:
        ``token_ids -> (V,)`` logits of the next token after ``token_ids``.
    prompt_token_ids:
        The prompt (non-empty).
    params:
        Sampling parameters; ``max_tokens``, ``min_tokens``, ``stop``, ``stop_token_ids`` and
        ``ignore_eos`` are honoured here.
    vocab_size, eos_token_ids:
        Logits width and the ids that end a sequence.
    grammar:
        Constrain the output; EOS is allowed only where the grammar accepts.
    jump_forward:
        Append grammar-forced text without sampling (needs ``grammar`` and ``encode``).
    encode:
        ``text -> ids`` without special tokens, for canonical jump-forward tokenization.
    decode:
        ``ids -> text``, needed when ``params.stop`` holds stop strings.

    Raises
    ------
    DeadEndError
        If the grammar allows no token (a compiler bug, reported with the position).
    """
    if not prompt_token_ids:
        raise RequestError("the prompt is empty")
    if jump_forward and (grammar is None or encode is None):
        raise RequestError("jump_forward needs a grammar and an encode function")
    if params.stop and decode is None:
        raise RequestError("stop strings need a decode function")
    sampler = sampler or Sampler()
    matcher: Matcher | None = grammar.matcher() if grammar is not None else None
    bitmask = allocate_token_bitmask(1, vocab_size) if grammar is not None else None
    generator = make_generator(params, "cpu")
    prompt = list(prompt_token_ids)
    output: list[int] = []
    forced_positions: list[int] = []
    num_calls = 0
    max_tokens = params.max_tokens if params.max_tokens is not None else max_model_len
    max_tokens = min(max_tokens, max_model_len - len(prompt))
    stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_token_ids))

    while len(output) < max_tokens:
        if jump_forward and matcher is not None:
            new_ids = jump_forward_token_ids(
                matcher, prompt + output, grammar.vocab, encode, max_tokens=max_tokens - len(output)
            )
            if new_ids:
                if matcher.accept_tokens(new_ids) != len(new_ids):
                    raise DeadEndError(f"jump-forward tokens {new_ids} rejected by the grammar")
                forced_positions.extend(range(len(output), len(output) + len(new_ids)))
                output.extend(new_ids)
                if matcher.is_terminated():
                    return ReferenceOutput(output, "stop", num_calls, forced_positions)
                continue
        logits = logits_fn(prompt + output).reshape(1, -1)[:, :vocab_size].float()  # (1, V)
        num_calls += 1
        if matcher is not None:
            matcher.fill_bitmask(bitmask, 0)
        batch = SamplingBatch.build(
            [params], [prompt], [output], vocab_size, eos_token_ids, [generator], logits.device
        )
        token_id = int(sampler(logits, batch, bitmask).token_ids[0])
        if matcher is not None and not matcher.accept_token(token_id):
            raise DeadEndError(
                f"sampled token {token_id} was not allowed by the grammar at output position "
                f"{len(output)}"
            )
        output.append(token_id)
        # The sampler masks EOS and stop ids until min_tokens outputs exist.
        if token_id in stop_ids:
            return ReferenceOutput(output, "stop", num_calls, forced_positions)
        if params.stop and decode is not None:
            text = decode(output)
            if any(stop in text for stop in params.stop):
                return ReferenceOutput(output, "stop", num_calls, forced_positions)
        if matcher is not None and matcher.is_terminated():
            return ReferenceOutput(output, "stop", num_calls, forced_positions)
    return ReferenceOutput(output, "length", num_calls, forced_positions)
