"""Text the target model generates itself, and the hidden states Medusa heads learn from.

`generate_text` answers prompts with the engine (a `HiddenRecorder` keeps the final-norm
states the LM head saw at each sampled position, so no second pass is needed);
`teacher_force` gets the same states from a transformers model for cached or foreign text.
`HiddenCorpus` flattens them into rows: row ``j`` = position ``p``, ``next_ids[j]`` = token
``p + 1``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from formcast.errors import EngineConfigError


@dataclass
class GeneratedText:
    """Chat prompts' token ids and the model's answers (one list per sequence)."""

    prompt_ids: list[list[int]] = field(default_factory=list)
    output_ids: list[list[int]] = field(default_factory=list)
    # optional, recorded during generation: per sequence (len(output), H) float32 final-norm
    # states of the positions that sampled each output token (see `HiddenRecorder`)
    hidden: list[torch.Tensor] | None = None

    @property
    def num_output_tokens(self) -> int:
        """Total answer tokens."""
        return sum(len(o) for o in self.output_ids)


class HiddenRecorder:
    """Records the final-norm hidden rows the engine's LM head sees, per request.

    Wraps one engine instance's ``runner.execute`` (to learn the step's scheduled sequences)
    and ``runner.model.compute_logits`` (whose input rows are the hidden states of the
    positions asked for, ``num_logits`` per scheduled span, in scheduled order). In plain
    decoding these are exactly the positions that sample each output token, so the states
    come for free instead of a second teacher-forcing pass.
    """

    def __init__(self, llm: Any) -> None:
        self.rows: dict[str, list[torch.Tensor]] = {}
        self._scheduled: list[Any] = []
        runner, model = llm.runner, llm.runner.model
        execute, compute_logits = runner.execute, model.compute_logits

        def recording_execute(scheduled: list[Any], copies: Any = ()) -> torch.Tensor:
            self._scheduled = scheduled
            return execute(scheduled, copies)

        def recording_logits(hidden: torch.Tensor) -> torch.Tensor:
            first = 0
            for item in self._scheduled:
                if item.num_logits:
                    rows = hidden[first : first + item.num_logits].float().cpu().clone()
                    self.rows.setdefault(item.seq.request_id, []).append(rows)
                first += item.num_logits
            return compute_logits(hidden)

        runner.execute = recording_execute
        model.compute_logits = recording_logits

    def take(self, request_id: str) -> torch.Tensor | None:
        """The recorded rows of a request ``(num_rows, H)`` (None if nothing was recorded)."""
        rows = self.rows.pop(request_id, None)
        return None if rows is None else torch.cat(rows)


def generate_text(
    llm: Any,
    prompts: list[str],
    *,
    max_tokens: int,
    seed: int,
    deadline: float | None = None,
    batch_size: int = 32,
    temperatures: tuple[float, ...] = (0.0, 0.8),
    log: Callable[[str], None] = print,
    recorder: HiddenRecorder | None = None,
) -> GeneratedText:
    """Answer ``prompts`` (as chat messages) with the engine, batch by batch.

    Prompt ``j`` is decoded at ``temperatures[j % len(temperatures)]`` (seeded per prompt).
    Stops after the batch during which ``deadline`` (``time.monotonic()``) passes. With
    ``recorder`` (a `HiddenRecorder` on ``llm``), ``data.hidden`` gets each answer's states.
    """
    from formcast.samplers import SamplingParams

    data = GeneratedText(hidden=[] if recorder is not None else None)
    started = time.monotonic()
    for first in range(0, len(prompts), batch_size):
        chunk = prompts[first : first + batch_size]
        chats = [[{"role": "user", "content": p}] for p in chunk]
        params = [
            SamplingParams(
                temperature=temperatures[(first + j) % len(temperatures)],
                max_tokens=max_tokens,
                seed=seed * 1_000_003 + first + j,
            )
            for j in range(len(chunk))
        ]
        for out in llm.generate(chats, params):
            states = None if recorder is None else recorder.take(out.request_id)
            if recorder is not None and (states is None or len(states) != len(out.token_ids)):
                continue  # not one row per output token (e.g. preempted): skip this answer
            data.prompt_ids.append(list(out.prompt_token_ids))
            data.output_ids.append(list(out.token_ids))
            if data.hidden is not None:
                data.hidden.append(states)
        elapsed = time.monotonic() - started
        log(
            f"  generated {len(data.output_ids)}/{len(prompts)} answers, "
            f"{data.num_output_tokens} tokens, {data.num_output_tokens / elapsed:.0f} tok/s"
        )
        if deadline is not None and time.monotonic() > deadline:
            break
    return data


@dataclass
class HiddenCorpus:
    """Teacher-forced final-norm hidden states of answer positions, flattened.

    Row ``j`` is position ``p`` of some sequence: ``hidden[j] = h_p`` ``(H,)`` and
    ``next_ids[j]`` the token at ``p + 1``. Rows of one sequence are contiguous;
    ``last_row[j]`` is the last row of ``j``'s sequence, so head ``i``'s target at row ``j``
    (token ``p + i + 2`` = ``next_ids[j + i + 1]``) exists iff ``j + i + 1 <= last_row[j]``.
    """

    hidden: torch.Tensor  # (N, H) float32
    next_ids: torch.Tensor  # (N,) int64
    last_row: torch.Tensor  # (N,) int64

    @property
    def num_rows(self) -> int:
        """N."""
        return int(self.next_ids.shape[0])


def recorded_corpus(data: GeneratedText) -> HiddenCorpus:
    """The `HiddenCorpus` of text generated with a `HiddenRecorder` (no second pass)."""
    if data.hidden is None:
        raise EngineConfigError("recorded_corpus needs text generated with a HiddenRecorder")
    return _corpus(
        [h for h, o in zip(data.hidden, data.output_ids, strict=True) if o],
        [torch.tensor(o) for o in data.output_ids if o],
    )


def _corpus(hidden: list[torch.Tensor], nexts: list[torch.Tensor]) -> HiddenCorpus:
    lengths = torch.tensor([len(n) for n in nexts])
    last_row = torch.repeat_interleave(lengths.cumsum(0) - 1, lengths)
    return HiddenCorpus(torch.cat(hidden).float(), torch.cat(nexts).long(), last_row.long())


@torch.no_grad()
def teacher_force(
    model: Any, data: GeneratedText, *, batch_tokens: int = 4096, log: Callable = print
) -> HiddenCorpus:
    """Run prompt + answer through a transformers causal LM; keep the answer rows.

    Rows kept per sequence: positions ``len(prompt) - 1`` (whose next token is the first
    answer token) to ``len(seq) - 2``. ``model.model(...)`` gives the final-norm states.
    """
    sequences = [p + o for p, o in zip(data.prompt_ids, data.output_ids, strict=True)]
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    pieces: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    device = next(model.parameters()).device
    started, done = time.monotonic(), 0
    batch: list[int] = []

    def flush() -> None:
        width = max(len(sequences[i]) for i in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for row, i in enumerate(batch):  # right padding: positions stay 0..L-1
            ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
            mask[row, : len(sequences[i])] = 1
        states = model.model(
            input_ids=ids.to(device), attention_mask=mask.to(device)
        ).last_hidden_state  # (B, W, H)
        for row, i in enumerate(batch):
            start, length = len(data.prompt_ids[i]) - 1, len(sequences[i])
            rows = states[row, start : length - 1].float().cpu()
            pieces[i] = (rows, torch.tensor(sequences[i][start + 1 : length]))

    for i in order:
        if batch and (len(batch) + 1) * len(sequences[i]) > batch_tokens:
            flush()
            done += len(batch)
            batch = []
            if done % 64 < 8:
                log(f"  teacher-forced {done}/{len(sequences)} sequences")
        batch.append(i)
    if batch:
        flush()
    kept = [i for i in range(len(sequences)) if len(pieces[i][1])]
    corpus = _corpus([pieces[i][0] for i in kept], [pieces[i][1] for i in kept])
    log(f"  teacher forcing: {corpus.num_rows} rows in {time.monotonic() - started:.0f}s")
    return corpus


def teacher_force_states(
    model: Any, data: GeneratedText, *, log: Callable[[str], None] = print
) -> list[torch.Tensor]:
    """Per-answer hidden rows ``(len(output), H)`` by teacher forcing (see `teacher_force`)."""
    corpus = teacher_force(model, data, log=log)
    lengths = [len(o) for o in data.output_ids if o]
    pieces = iter(corpus.hidden.split(lengths))
    return [next(pieces) if o else torch.zeros(0, corpus.hidden.shape[1]) for o in data.output_ids]
