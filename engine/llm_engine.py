"""LLM: the engine's front door. ``generate`` / ``stream`` on top of ``add_request`` / ``step``.

One step, top to bottom: the scheduler picks token spans (allocating blocks, maybe
preempting); the runner executes copy-on-write copies and the forward pass and returns logits
at the asked positions; the sequences' caches advance and full blocks enter the prefix cache;
``n > 1`` requests fork after their prompt; the sampler picks tokens (a per-sequence token
bitmask from an attached matcher is applied first); stop conditions retire sequences and
return their blocks; each sequence's new tokens and text come back as `StreamDelta`s.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator
from collections.abc import Sequence as SequenceABC
from typing import Any

import torch

from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.detokenizer import IncrementalDetokenizer
from formcast.engine.loader import DEFAULT_MODEL, resolve_model_path
from formcast.engine.model_config import ModelConfig
from formcast.engine.model_runner import ModelRunner
from formcast.engine.outputs import RequestOutput, StreamDelta
from formcast.engine.request import Request
from formcast.engine.scheduler import Scheduler
from formcast.engine.sequence import Sequence
from formcast.errors import EngineConfigError, EngineError, RequestError
from formcast.samplers import Sampler, SamplingBatch, SamplingParams

Prompt = str | list[int] | list[dict[str, Any]]
_SEED_MODULUS = 2**64


class LLM:
    """A paged-KV inference engine over one model.

    Parameters
    ----------
    model : str or os.PathLike
        Registry alias (``"smollm2-135m"``), Hugging Face model folder or ``.gguf`` file.
    tokenizer : Any, optional
        A transformers tokenizer; default: the one in the model folder.
    **config
        `EngineConfig` fields (``max_num_seqs``, ``block_size``, ``dtype``, ...).

    Examples
    --------
    >>> llm = LLM("smollm2-135m", max_num_seqs=16)
    >>> out = llm.generate(["The capital of France is"], SamplingParams(temperature=0))
    >>> out[0].text
    """

    def __init__(
        self, model: str | os.PathLike[str] = DEFAULT_MODEL, tokenizer: Any = None, **config: Any
    ) -> None:
        unknown = sorted(set(config) - EngineConfig.field_names())
        if unknown:
            raise EngineConfigError(
                f"unknown engine option(s) {unknown}; known: {sorted(EngineConfig.field_names())}"
            )
        self.config = EngineConfig(**config)
        folder = resolve_model_path(model)
        self.model_config = ModelConfig.from_folder(folder)
        limit = self.model_config.max_position_embeddings
        if self.config.max_model_len is None:
            self.config.max_model_len = limit
        elif self.config.max_model_len > limit:
            raise EngineConfigError(
                f"EngineConfig.max_model_len={self.config.max_model_len} exceeds the model's "
                f"max_position_embeddings={limit}"
            )
        if (
            not self.config.enable_chunked_prefill
            and self.config.max_num_batched_tokens < self.config.max_model_len
        ):
            raise EngineConfigError(
                f"EngineConfig.max_num_batched_tokens={self.config.max_num_batched_tokens} is "
                f"below max_model_len={self.config.max_model_len}; enable chunked prefill or "
                "raise the budget"
            )
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(folder)
        self.tokenizer = tokenizer
        self.runner = ModelRunner(folder, self.model_config, self.config)
        self.block_manager = BlockManager(
            self.runner.num_kv_blocks,
            self.config.block_size,
            enable_prefix_caching=self.config.enable_prefix_caching,
            watermark=self.config.watermark,
        )
        self.scheduler = Scheduler(self.config, self.block_manager)
        self.sampler = Sampler()
        eos = set(self.model_config.eos_token_ids)
        if getattr(tokenizer, "eos_token_id", None) is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_token_ids = tuple(sorted(eos))
        self.vocab_size = self.model_config.vocab_size
        self.requests: dict[str, Request] = {}
        self._request_ids = itertools.count()

    # -- requests ---------------------------------------------------------------------------

    def encode_prompt(self, prompt: Prompt) -> tuple[str | None, list[int]]:
        """Prompt text (None for token ids) and token ids; chat lists get the chat template."""
        if isinstance(prompt, str):
            return prompt, list(self.tokenizer.encode(prompt))
        if hasattr(prompt, "tolist"):
            prompt = prompt.tolist()
        if isinstance(prompt, (list, tuple)) and prompt and isinstance(prompt[0], dict):
            text = self.tokenizer.apply_chat_template(
                list(prompt), add_generation_prompt=True, tokenize=False
            )
            return text, list(self.tokenizer.encode(text, add_special_tokens=False))
        if isinstance(prompt, (list, tuple)) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt
        ):
            return None, list(prompt)
        raise RequestError(
            f"a prompt must be a str, a list of token ids or a list of chat messages, "
            f"got {type(prompt).__name__}"
        )

    def add_request(
        self,
        prompt: Prompt,
        sampling_params: SamplingParams | None = None,
        request_id: str | None = None,
        matcher: Any = None,
    ) -> str:
        """Queue a request; return its id.

        ``matcher`` (optional) is the grammar hook: an object with ``fill_bitmask(bitmask,
        row)`` (int32 ``(B, ceil(V/32))``, bit set = allowed), ``accept_token(token_id) ->
        bool``, ``is_terminated() -> bool`` and ``fork()``; it constrains every sampled token.

        Raises
        ------
        RequestError
            Empty prompt, unknown token ids, a prompt with no room to generate within
            ``max_model_len``, a request that cannot fit in the KV cache, a duplicate id.
        """
        params = sampling_params if sampling_params is not None else SamplingParams()
        text, token_ids = self.encode_prompt(prompt)
        request_id = str(next(self._request_ids)) if request_id is None else request_id
        where = f"request {request_id!r}"
        if request_id in self.requests:
            raise RequestError(f"{where}: the id is already in use")
        if not token_ids:
            raise RequestError(f"{where}: the prompt is empty (no tokens)")
        bad = [t for t in token_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise RequestError(f"{where}: token ids {bad[:5]} are outside [0, {self.vocab_size})")
        max_len = self.config.max_model_len
        if len(token_ids) >= max_len:
            raise RequestError(
                f"{where}: the prompt has {len(token_ids)} tokens but max_model_len is {max_len} "
                "(at least one token must be generated)"
            )
        room = max_len - len(token_ids)
        max_tokens = room if params.max_tokens is None else min(params.max_tokens, room)
        bm = self.block_manager
        needed = bm.blocks_for(len(token_ids) + max_tokens)
        usable = bm.num_blocks - bm.watermark_blocks
        if needed > usable:
            raise RequestError(
                f"{where}: needs up to {needed} KV blocks ({len(token_ids)} prompt + {max_tokens} "
                f"new tokens) but the cache has {usable} usable; raise num_kv_blocks or lower "
                "max_tokens"
            )
        request = Request(request_id, text, token_ids, params, max_tokens)
        seq = Sequence(request_id, token_ids, params, arrival_time=request.arrival_time)
        seq.generator = self._generator(params, 0)
        seq.matcher = matcher
        seq.num_pending_forks = params.n - 1
        self._attach(request, seq)
        self.requests[request_id] = request
        self.scheduler.add(seq)
        return request_id

    def _generator(self, params: SamplingParams, index: int) -> torch.Generator | None:
        if params.seed is None:
            return None
        generator = torch.Generator(device=self.runner.device)
        generator.manual_seed((params.seed + index) % _SEED_MODULUS)
        return generator

    def _attach(self, request: Request, seq: Sequence) -> None:
        request.seqs.append(seq)
        request.detokenizers[seq.seq_id] = IncrementalDetokenizer(
            self.tokenizer, request.prompt_token_ids, request.sampling_params.stop
        )

    def abort(self, request_id: str) -> None:
        """Stop a request now; its blocks return to the pool, its output keeps what it had."""
        request = self.requests.get(request_id)
        if request is None:
            raise RequestError(f"abort: unknown request id {request_id!r}")
        for seq in request.seqs:
            if not seq.is_finished:
                self.scheduler.finish(seq, "abort")
        request.finish_time = request.finish_time or time.monotonic()

    def has_unfinished_requests(self) -> bool:
        """True while any request waits or runs."""
        return self.scheduler.has_unfinished

    def get_output(self, request_id: str) -> RequestOutput:
        """Current output of a request (finished or not)."""
        if request_id not in self.requests:
            raise RequestError(f"unknown request id {request_id!r}")
        return self.requests[request_id].output()

    def take_output(self, request_id: str) -> RequestOutput:
        """Output of a finished (or aborted) request, forgetting the request."""
        output = self.get_output(request_id)
        if not output.finished:
            raise RequestError(f"request {request_id!r} is still running; abort it first")
        del self.requests[request_id]
        return output

    # -- the step ------------------------------------------------------------------------------

    def step(self) -> list[StreamDelta]:
        """Run one engine step; return each sampled sequence's new token and text."""
        plan = self.scheduler.schedule()
        if plan.is_empty:
            if self.scheduler.waiting and not self.scheduler.running and not plan.preempted:
                raise EngineError(
                    "the next waiting request cannot be admitted although the engine is idle"
                )
            return []
        logits = self.runner.execute(plan.scheduled, self.block_manager.take_pending_copies())
        seqs: list[Sequence] = []
        rows: list[int] = []
        row = 0
        for item in plan.scheduled:
            seq = item.seq
            seq.num_cached_tokens += item.num_new_tokens
            self.block_manager.commit_inplace(seq)
            row += item.num_logits
            if not item.num_logits or seq.num_cached_tokens < seq.num_tokens:
                continue  # mid-prefill chunk: nothing to sample yet
            # the span's last logits row is the next-token distribution
            seqs.append(seq)
            rows.append(row - 1)
            if seq.num_pending_forks:
                for child in self._fork(seq):
                    seqs.append(child)
                    rows.append(row - 1)
        if not seqs:
            return []
        if rows != list(range(logits.shape[0])):
            logits = logits[torch.tensor(rows, device=logits.device)]
        return self._sample_and_update(seqs, logits)

    def _fork(self, parent: Sequence) -> list[Sequence]:
        request = self.requests[parent.request_id]
        children = []
        for index in range(1, parent.num_pending_forks + 1):
            child = Sequence(
                parent.request_id,
                parent.prompt_token_ids,
                parent.sampling_params,
                arrival_time=parent.arrival_time,
                index=index,
                token_ids=list(parent.token_ids),
            )
            child.generator = self._generator(parent.sampling_params, index)
            child.matcher = parent.matcher.fork() if parent.matcher is not None else None
            self.block_manager.fork_inplace(parent, child)
            self._attach(request, child)
            children.append(child)
        parent.num_pending_forks = 0
        self.scheduler.insert_running_after(parent, children)
        return children

    def _token_bitmask(self, seqs: list[Sequence]) -> torch.Tensor | None:
        if all(seq.matcher is None for seq in seqs):
            return None
        num_words = (self.vocab_size + 31) // 32
        bitmask = torch.full((len(seqs), num_words), -1, dtype=torch.int32)
        for row, seq in enumerate(seqs):
            if seq.matcher is not None:
                seq.matcher.fill_bitmask(bitmask, row)
        return bitmask.to(self.runner.device)

    def _sample_and_update(self, seqs: list[Sequence], logits: torch.Tensor) -> list[StreamDelta]:
        params = [seq.sampling_params for seq in seqs]
        batch = SamplingBatch.build(
            params,
            [seq.prompt_token_ids for seq in seqs],
            [seq.output_token_ids for seq in seqs],
            self.vocab_size,
            self.eos_token_ids,
            [seq.generator for seq in seqs],
            self.runner.device,
        )
        sampled = self.sampler(logits, batch, token_bitmask=self._token_bitmask(seqs))
        token_ids = sampled.token_ids.tolist()
        want_logprobs = any(p.logprobs is not None for p in params)
        chosen_logprobs = sampled.logprobs.tolist() if want_logprobs else None
        top_ids = top_lps = None
        if want_logprobs and sampled.top_logprob_ids is not None:
            top_ids = sampled.top_logprob_ids.tolist()
            top_lps = sampled.top_logprobs.tolist()
        now = time.monotonic()
        deltas = []
        for i, seq in enumerate(seqs):
            token_id = token_ids[i]
            p = params[i]
            seq.append_token(token_id)
            if seq.first_token_time is None:
                seq.first_token_time = now
            entry = None
            if p.logprobs is not None:
                entry = {token_id: chosen_logprobs[i]}
                if top_ids is not None:
                    for k in range(min(p.logprobs, len(top_ids[i]))):
                        entry.setdefault(top_ids[i][k], top_lps[i][k])
                seq.logprobs.append(entry)
            if seq.matcher is not None and not seq.matcher.accept_token(token_id):
                raise EngineError(
                    f"request {seq.request_id!r}: the matcher rejected token {token_id} that its "
                    "own bitmask allowed"
                )
            reason = self._check_stop(seq, token_id)
            request = self.requests[seq.request_id]
            detokenizer = request.detokenizers[seq.seq_id]
            if reason is not None:
                self.scheduler.finish(seq, reason)
                if request.is_finished:
                    request.finish_time = now
            deltas.append(
                StreamDelta(
                    seq.request_id,
                    seq.index,
                    [token_id],
                    detokenizer.take_delta(seq.is_finished),
                    seq.finish_reason,
                    [entry] if entry is not None else None,
                )
            )
        return deltas

    def _check_stop(self, seq: Sequence, token_id: int) -> str | None:
        """Finish reason after ``token_id`` was appended (None: keep going)."""
        p = seq.sampling_params
        request = self.requests[seq.request_id]
        detokenizer = request.detokenizers[seq.seq_id]
        # the sampler masks EOS and stop ids while fewer than min_tokens outputs existed
        may_stop = seq.num_output_tokens > p.min_tokens
        if token_id in p.stop_token_ids and may_stop:
            request.stop_reasons[seq.seq_id] = token_id
            detokenizer.flush()
            return "stop"
        if token_id in self.eos_token_ids and not p.ignore_eos and may_stop:
            detokenizer.flush()
            return "stop"
        stop_string = detokenizer.append(token_id, may_stop)
        if stop_string is not None:
            request.stop_reasons[seq.seq_id] = stop_string
            return "stop"
        if (
            seq.num_output_tokens >= request.max_tokens
            or seq.num_tokens >= self.config.max_model_len
        ):
            detokenizer.flush()
            return "length"
        if seq.matcher is not None and seq.matcher.is_terminated():
            detokenizer.flush()
            return "stop"
        return None

    # -- batch calls ---------------------------------------------------------------------------

    def _submit(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        sampling_params: SamplingParams | SequenceABC[SamplingParams] | None,
    ) -> list[str]:
        prompt_list = _as_prompt_list(prompts)
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params] * len(prompt_list)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompt_list):
                raise RequestError(
                    f"got {len(params_list)} SamplingParams for {len(prompt_list)} prompts"
                )
        request_ids: list[str] = []
        try:
            for prompt, params in zip(prompt_list, params_list, strict=True):
                request_ids.append(self.add_request(prompt, params))
        except BaseException:
            self._drop(request_ids)
            raise
        return request_ids

    def _drop(self, request_ids: Iterable[str]) -> None:
        for request_id in request_ids:
            if request_id in self.requests:
                self.abort(request_id)
                del self.requests[request_id]

    def generate(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        sampling_params: SamplingParams | SequenceABC[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """Run prompts to completion; one `RequestOutput` per prompt, in order.

        ``prompts``: a string, a token id list, a chat message list, or a list of those.
        ``sampling_params``: one for all prompts or one per prompt (default: SamplingParams()).
        """
        request_ids = self._submit(prompts, sampling_params)
        try:
            while not all(self.requests[r].is_finished for r in request_ids):
                self.step()
        except BaseException:
            self._drop(request_ids)
            raise
        return [self.take_output(r) for r in request_ids]

    def stream(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        sampling_params: SamplingParams | SequenceABC[SamplingParams] | None = None,
    ) -> Iterator[StreamDelta]:
        """Yield `StreamDelta`s (new tokens and text per completion) as steps produce them.

        Closing the iterator early aborts the prompts' unfinished requests.
        """
        request_ids = self._submit(prompts, sampling_params)
        mine = set(request_ids)
        try:
            while not all(self.requests[r].is_finished for r in request_ids):
                for delta in self.step():
                    if delta.request_id in mine:
                        yield delta
        finally:
            self._drop(request_ids)


def _as_prompt_list(prompts: Any) -> list[Prompt]:
    if isinstance(prompts, str):
        return [prompts]
    if hasattr(prompts, "tolist"):
        prompts = prompts.tolist()
    if not isinstance(prompts, (list, tuple)):
        raise RequestError(f"prompts must be a str or a list, got {type(prompts).__name__}")
    if prompts and isinstance(prompts[0], (int, dict)) and not isinstance(prompts[0], bool):
        return [list(prompts)]  # one token id prompt or one chat
    return list(prompts)
