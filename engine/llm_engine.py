"""LLM: the engine's front door. ``generate`` / ``stream`` on top of ``add_request`` / ``step``.

One step, top to bottom: requests whose grammar finished compiling join the scheduler; the
scheduler picks token spans (allocating blocks, maybe preempting); a worker thread starts
filling the grammar bitmask rows of the sequences that will be sampled (their matchers only
depend on earlier tokens) while the runner executes copy-on-write copies and the forward pass
and returns logits at the asked positions; the sequences' caches advance and full blocks enter
the prefix cache; ``n > 1`` requests fork after their prompt (matchers fork too); the step
joins the mask worker and the sampler picks tokens with the bitmask applied; matchers advance;
with jump-forward on, tokens the grammar forces are appended without sampling (the next step
prefills them as one span); stop conditions retire sequences and return their blocks; each
sequence's new tokens and text come back as `StreamDelta`s. Every token is committed by the
`Postprocessor` (``formcast.engine.postprocess``), shared with the speculators.

Grammar requests (``grammar=``): EOS is allowed only where the grammar accepts; a terminated
matcher finishes the request with ``"stop"``; ``max_tokens`` on an unfinished structure gives
``"length"`` with ``is_grammar_complete=False``; a dead end raises `DeadEndError` naming the
request, its grammar and the output position. Grammar specs compile in a thread pool and the
request waits outside the scheduler meanwhile, so the other requests keep running.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator
from collections.abc import Sequence as SequenceABC
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

import numpy as np
import torch

from formcast.decoding.beam_search import BeamSearchParams
from formcast.engine.beam_group import BeamSearchManager, beam_sampling_params
from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.detokenizer import IncrementalDetokenizer, token_texts
from formcast.engine.engine_stats import EngineStats
from formcast.engine.model_runner import ModelRunner
from formcast.engine.models.config import ModelConfig
from formcast.engine.models.loader import DEFAULT_MODEL, resolve_model_path
from formcast.engine.outputs import RequestOutput, StreamDelta
from formcast.engine.postprocess import Postprocessor
from formcast.engine.prompt import Prompt, check_prompt
from formcast.engine.request import Request
from formcast.engine.scheduler import Scheduler, SchedulerOutput
from formcast.engine.scoring import ScoreReader, ScoreState
from formcast.engine.sequence import Sequence, SequenceStatus
from formcast.engine.speculative.chain_speculator import Speculator
from formcast.engine.structured import MaskFiller, StructuredOutputManager
from formcast.engine.threads import ThreadGovernor
from formcast.errors import (
    DeadEndError,
    EngineConfigError,
    EngineError,
    RequestError,
    RequestLimitError,
)
from formcast.grammar import Grammar, MaskHook
from formcast.grammar.spec import GrammarLike
from formcast.samplers import Sampler, SamplingBatch, SamplingParams
from formcast.samplers.batch import to_device


class _OutputTokenIds(SequenceABC):
    """The generated ids of ``seqs`` for `SamplingBatch.build`: row ``i`` is copied out of
    ``seqs[i]`` only when read (penalty rows, rows under ``min_tokens``), not every row every
    step (a copy per row grows with the output: quadratic over a long generation)."""

    def __init__(self, seqs: list[Sequence]) -> None:
        self._seqs = seqs

    def __len__(self) -> int:
        return len(self._seqs)

    def __getitem__(self, row: int) -> list[int]:  # type: ignore[override]  # rows only
        return self._seqs[row].output_token_ids


def _build_speculator(llm: LLM, config: Any) -> Speculator | None:
    """The chain speculator, or the tree speculator for ``method="medusa"``."""
    if config is None:
        return None
    if config.method == "medusa":
        from formcast.engine.speculative.tree_speculator import TreeSpeculator

        return TreeSpeculator(llm, config)
    return Speculator(llm, config)


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
        token_texts(tokenizer)  # the detokenizers' byte table: built here, not in a request
        # CPU: the forward's thread pool follows the cores other work leaves free
        self.threads = (
            ThreadGovernor(self.config.num_threads, self.config.adaptive_threads)
            if self.config.device == "cpu"
            else None
        )
        self.runner = ModelRunner(folder, self.model_config, self.config)
        graphs = self.runner.decode_graphs
        # see EngineConfig.jump_forward: off by default where decode steps are graph replays
        self.jump_forward_default = (
            not (graphs is not None and graphs.is_cuda_graph)
            if self.config.jump_forward is None
            else self.config.jump_forward
        )
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
        self.structured_output = StructuredOutputManager(
            tokenizer,
            self.vocab_size,
            self.eos_token_ids,
            self.config.num_grammar_threads,
            limits=self.config.grammar_limits,
            num_workers=self.config.num_grammar_workers,
        )
        self.mask_filler = MaskFiller(self.vocab_size, is_async=self.config.overlap_masks)
        self._stats = EngineStats()
        self.postprocessor = Postprocessor(
            self.config,
            self.requests,
            self.scheduler,
            self.structured_output,
            self.eos_token_ids,
            self._stats,
        )
        self._compiling: list[Sequence] = []  # sequences whose grammar is still compiling
        self._pending_deltas: list[StreamDelta] = []  # finished outside a step (jump-forward)
        self.beams = BeamSearchManager(
            self.scheduler, self.block_manager, tokenizer, self.eos_token_ids
        )
        self.scores = ScoreReader(
            self.requests,
            self.scheduler,
            self.block_manager,
            self.postprocessor,
            tokenizer,
            self.eos_token_ids,
        )
        self.model_path = folder
        self.speculator = _build_speculator(self, self.config.speculative)

    @property
    def stats(self) -> EngineStats:
        """A snapshot of the engine's cumulative counters (see `EngineStats`)."""
        stats = self._stats.copy()
        stats.mask_fill_seconds = self.mask_filler.fill_seconds
        stats.mask_wait_seconds = self.mask_filler.wait_seconds
        stats.num_grammar_compiles = self.structured_output.num_compiles
        return stats

    # -- requests ---------------------------------------------------------------------------

    def encode_prompt(self, prompt: Prompt) -> tuple[str | None, list[int]]:
        """Prompt text (None for token ids) and token ids; chat lists get the chat template.

        Raises
        ------
        RequestError
            A malformed prompt (see :func:`~formcast.engine.prompt.check_prompt`).
        """
        prompt = check_prompt(prompt)
        if isinstance(prompt, str):
            return prompt, list(self.tokenizer.encode(prompt))
        if isinstance(prompt[0], dict):
            text = self.tokenizer.apply_chat_template(
                prompt, add_generation_prompt=True, tokenize=False
            )
            return text, list(self.tokenizer.encode(text, add_special_tokens=False))
        return None, list(prompt)  # token ids

    def add_request(
        self,
        prompt: Prompt,
        sampling_params: SamplingParams | None = None,
        request_id: str | None = None,
        matcher: MaskHook | None = None,
        grammar: GrammarLike | None = None,
        jump_forward: bool | None = None,
        beam_search: BeamSearchParams | None = None,
    ) -> str:
        """Queue a request; return its id.

        Parameters
        ----------
        prompt : str, list[int] or list[dict]
            Text, token ids or chat messages (the chat template is applied).
        sampling_params : SamplingParams, optional
            Default ``SamplingParams()``.
        request_id : str, optional
            Default: a fresh integer string.
        matcher : MaskHook, optional
            Low-level grammar hook: an object with ``fill_bitmask(bitmask, row)`` (int32
            ``(B, ceil(V/32))``, bit set = allowed), ``accept_token(token_id) -> bool``,
            ``is_terminated() -> bool`` and ``fork()``; it constrains every sampled token
            (no jump-forward). Called from the mask worker thread during the forward pass.
        grammar : CompiledGrammar, GrammarSpec or dict, optional
            Constrain the output to a grammar: a compiled grammar (over this engine's
            vocabulary), a `GrammarSpec` (compiled asynchronously, shared by key), or a
            shorthand ``{"json_schema": ...}`` / ``{"regex": ...}`` / ``{"choice": [...]}``
            / ``{"lark": ...}``. One matcher per sequence (forked for ``n > 1``).
        jump_forward : bool, optional
            Append grammar-forced text without sampling; default: ``EngineConfig.jump_forward``
            (on unless decode steps replay CUDA graphs).
        beam_search : BeamSearchParams, optional
            Run beam search instead of sampling (see `formcast.engine.beam_group`); the
            output holds ``num_return_sequences`` completions, best first, with their
            ``cumulative_logprob`` and ``beam_score``. Not with ``sampling_params``.

        Raises
        ------
        RequestLimitError
            ``n`` (or ``beam_search.num_beams``) above ``max_num_seqs``: a request whose
            sequences could never run together.
        RequestError
            Empty prompt, unknown token ids, a prompt with no room to generate within
            ``max_model_len``, a request that cannot fit in the KV cache, a duplicate id,
            both ``matcher`` and ``grammar``, an unusable grammar value.
        """
        if beam_search is not None:
            sampling_params = beam_sampling_params(
                sampling_params, beam_search, jump_forward, self.speculator is not None
            )
        params = sampling_params if sampling_params is not None else SamplingParams()
        self._check_num_seqs(params, beam_search)
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
        if matcher is not None and grammar is not None:
            raise RequestError(f"{where}: pass either matcher= or grammar=, not both")
        compiled = future = None
        if grammar is not None:
            compiled, future, grammar_name = self.structured_output.resolve(grammar, where)
        request = Request(request_id, text, token_ids, params, max_tokens)
        seq = Sequence(request_id, token_ids, params, arrival_time=request.arrival_time)
        seq.generator = self._generator(params, 0)
        seq.matcher = matcher
        seq.num_pending_forks = params.n - 1
        if grammar is not None:
            request.grammar_name = grammar_name
            seq.jump_forward = self.jump_forward_default if jump_forward is None else jump_forward
        if beam_search is not None:
            self.beams.add(request, seq, beam_search)
        self._attach(request, seq)
        self.requests[request_id] = request
        if future is not None:
            request.grammar_future = future
            self._compiling.append(seq)
        elif compiled is not None:
            self._start_grammar(seq, compiled)
        else:
            self.scheduler.add(seq)
        return request_id

    def add_score_request(
        self,
        prompt: Prompt,
        continuations: SequenceABC[SequenceABC[int]],
        request_id: str | None = None,
    ) -> str:
        """Queue a request that scores ``continuations`` of ``prompt`` instead of generating.

        Completion ``k`` of the output is continuation ``k``: its ``token_ids``, ``text``,
        ``logprobs`` (``{token_id: log-prob}`` per token, given the prompt and the tokens before
        it), ``cumulative_logprob`` (their sum) and ``stop_logprob`` (log-probability of any EOS
        token right after it), under the model's own distribution (no sampling parameters, no
        grammar). The prompt is computed once and its KV blocks are shared by the
        continuations (see `formcast.engine.scoring`); a score request takes two steps.

        Parameters
        ----------
        prompt : str, list[int] or list[dict]
            Text, token ids or chat messages (the chat template is applied).
        continuations : sequence of sequences of int
            The token ids to score after the prompt, one non-empty list per continuation.
        request_id : str, optional
            Default: a fresh integer string.

        Raises
        ------
        RequestLimitError
            More continuations than ``max_num_seqs`` (they run in the same step).
        RequestError
            Empty prompt or continuation list, an empty continuation, unknown token ids, a
            prompt plus continuation longer than ``max_model_len``, a request that cannot fit in
            the KV cache, a duplicate id.
        """
        text, token_ids = self.encode_prompt(prompt)
        request_id = str(next(self._request_ids)) if request_id is None else request_id
        where = f"score request {request_id!r}"
        if request_id in self.requests:
            raise RequestError(f"{where}: the id is already in use")
        if not token_ids:
            raise RequestError(f"{where}: the prompt is empty (no tokens)")
        if isinstance(continuations, (str, bytes)) or not isinstance(continuations, SequenceABC):
            raise RequestError(
                f"{where}: continuations must be a list of token id lists, got "
                f"{type(continuations).__name__}"
            )
        if not continuations:
            raise RequestError(f"{where}: no continuations to score")
        limit = self.config.max_num_seqs
        if len(continuations) > limit:
            raise RequestLimitError(
                "len(continuations)",
                len(continuations),
                "max_num_seqs",
                limit,
                "the continuations of a score request run in the same step; score fewer at "
                "once or raise max_num_seqs",
            )
        bm = self.block_manager
        prompt_blocks = len(token_ids) // bm.block_size  # full blocks the continuations share
        needed = bm.blocks_for(len(token_ids))
        checked: list[list[int]] = []
        for k, continuation in enumerate(continuations):
            if isinstance(continuation, (str, bytes)) or not isinstance(continuation, SequenceABC):
                raise RequestError(
                    f"{where}: continuation #{k} must be a list of token ids, got "
                    f"{type(continuation).__name__}"
                )
            ids = list(continuation)
            if not ids:
                raise RequestError(f"{where}: continuation #{k} is empty")
            bad = [
                t
                for t in ids
                if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.vocab_size
            ]
            if bad:
                raise RequestError(
                    f"{where}: continuation #{k} holds {bad[:5]}, not token ids in "
                    f"[0, {self.vocab_size})"
                )
            total = len(token_ids) + len(ids)
            if total > self.config.max_model_len:
                raise RequestError(
                    f"{where}: the prompt ({len(token_ids)} tokens) plus continuation #{k} "
                    f"({len(ids)}) exceed max_model_len={self.config.max_model_len}"
                )
            needed += bm.blocks_for(total) - prompt_blocks
            checked.append(ids)
        usable = bm.num_blocks - bm.watermark_blocks
        if needed > usable:
            raise RequestError(
                f"{where}: needs {needed} KV blocks (a {len(token_ids)}-token prompt shared by "
                f"{len(checked)} continuations) but the cache has {usable} usable; raise "
                "num_kv_blocks or score fewer continuations at once"
            )
        longest = max(len(ids) for ids in checked)
        params = SamplingParams(max_tokens=longest, logprobs=0)
        request = Request(request_id, text, token_ids, params, longest)
        seq = Sequence(request_id, token_ids, params, arrival_time=request.arrival_time)
        seq.score = ScoreState(len(token_ids) - 1, pending=checked)
        seq.num_pending_forks = len(checked) - 1  # admitted with room for its forks
        self._attach(request, seq)
        self.requests[request_id] = request
        self.scheduler.add(seq)
        return request_id

    def _check_num_seqs(self, params: SamplingParams, beam_search: BeamSearchParams | None) -> None:
        """Refuse a request that needs more sequences at once than a step may run.

        Invariant kept for the scheduler: every request's ``1 + num_pending_forks +
        num_reserved_seqs`` is at most ``max_num_seqs``, so an idle engine always admits the
        first waiting sequence (the ``n`` completions fork right after the prompt and the
        beams of a beam search all run together; neither can be admitted in parts).

        Raises
        ------
        RequestLimitError
            ``n`` or ``num_beams`` above ``max_num_seqs``.
        """
        limit = self.config.max_num_seqs
        if beam_search is not None and beam_search.num_beams > limit:
            raise RequestLimitError(
                "num_beams",
                beam_search.num_beams,
                "max_num_seqs",
                limit,
                "a beam search runs all its beams in every step; lower num_beams or raise "
                "max_num_seqs",
            )
        if params.n > limit:
            raise RequestLimitError(
                "n",
                params.n,
                "max_num_seqs",
                limit,
                "the n completions of a request run in the same steps and a step runs at most "
                "max_num_seqs sequences; lower n or raise max_num_seqs",
            )

    def _start_grammar(self, seq: Sequence, grammar: Grammar) -> None:
        """Give ``seq`` its matcher, jump over forced text at the start, then queue it."""
        seq.grammar = grammar
        seq.matcher = grammar.matcher()
        reason = self.postprocessor.jump_forward(seq)
        if reason is None:
            self.scheduler.add(seq)
            return
        # finished before its first forward pass (e.g. a grammar that forces everything)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        request = self.requests[seq.request_id]
        request.finish_time = time.monotonic()
        self._pending_deltas.append(self.postprocessor.delta(seq))

    def _admit_compiled(self) -> None:
        """Move sequences whose grammar finished compiling into the scheduler.

        Raises
        ------
        FormcastError
            The compile error of a request's grammar (that request is aborted first).
        """
        ready = [s for s in self._compiling if self.requests[s.request_id].grammar_future.done()]
        for seq in ready:
            self._compiling.remove(seq)
            request = self.requests[seq.request_id]
            future, request.grammar_future = request.grammar_future, None
            error = future.exception()
            if error is None:
                try:
                    self.structured_output.check_compiled(
                        future.result(), f"request {seq.request_id!r}"
                    )
                except RequestError as exc:
                    error = exc
            if error is not None:
                seq.status = SequenceStatus.FINISHED
                seq.finish_reason = "abort"
                request.finish_time = time.monotonic()
                if hasattr(error, "add_note"):
                    error.add_note(
                        f"while compiling {request.grammar_name} for request {seq.request_id!r}"
                    )
                raise error
            self._start_grammar(seq, future.result())

    def _generator(self, params: SamplingParams, index: int) -> torch.Generator | None:
        if params.seed is None:
            return None
        generator = torch.Generator(device=self.runner.device)
        generator.manual_seed((params.seed + index) % _SEED_MODULUS)
        return generator

    def _attach(self, request: Request, seq: Sequence) -> None:
        request.seqs.append(seq)
        params = request.sampling_params
        request.detokenizers[seq.seq_id] = IncrementalDetokenizer(
            self.tokenizer, request.prompt_token_ids, params.stop, params.skip_special_tokens
        )

    def abort(self, request_id: str) -> None:
        """Stop a request now; its blocks return to the pool, its output keeps what it had."""
        request = self.requests.get(request_id)
        if request is None:
            raise RequestError(f"abort: unknown request id {request_id!r}")
        if request.beam_group is not None:
            self.beams.abort(request)  # parked beams; the loop retires the others
        for seq in request.seqs:
            if seq in self._compiling:
                self._compiling.remove(seq)
                seq.status = SequenceStatus.FINISHED
                seq.finish_reason = "abort"
            elif not seq.is_finished:
                self.scheduler.finish(seq, "abort")
        request.finish_time = request.finish_time or time.monotonic()

    def reset_prefix_cache(self) -> int:
        """Forget the prefix cache (as vLLM's ``LLM.reset_prefix_cache``): later requests
        compute their prompts afresh. Blocks of running sequences keep their content.

        Returns
        -------
        int
            Cached blocks forgotten.
        """
        return self.block_manager.reset_prefix_cache()

    def has_unfinished_requests(self) -> bool:
        """True while any request waits (also for its grammar) or runs."""
        return self.scheduler.has_unfinished or bool(self._compiling)

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
        self._pending_deltas = [d for d in self._pending_deltas if d.request_id != request_id]
        return output

    # -- the step ------------------------------------------------------------------------------

    def step(self) -> list[StreamDelta]:
        """Run one engine step; return each sampled sequence's new tokens and text.

        When nothing can run but grammars are compiling, waits for the first to finish.
        """
        self._admit_compiled()
        if self.threads is not None:
            self.threads.tick()
        deltas, self._pending_deltas = self._pending_deltas, []
        if self.speculator is not None:
            self.speculator.propose()  # drafts join the running sequences' next spans
        plan = self.scheduler.schedule()
        if self.speculator is not None:
            self.speculator.fit_plan(plan)
        if plan.is_empty:
            if self.scheduler.waiting and not self.scheduler.running and not plan.preempted:
                raise EngineError(
                    "the next waiting request cannot be admitted although the engine is idle"
                )
            if self._compiling:
                futures = [self.requests[s.request_id].grammar_future for s in self._compiling]
                wait(futures, return_when=FIRST_COMPLETED)
            return deltas
        # masks of the rows sampled this step are filled while the model runs
        self.mask_filler.start(self._rows_to_sample(plan))
        begin = time.perf_counter()
        copies = self.block_manager.take_pending_copies()
        trees = None if self.speculator is None else self.speculator.trees
        if trees:  # token-tree spans (Medusa): node depths and ancestor masks
            logits = self.runner.execute(plan.scheduled, copies, trees=trees)
        else:
            logits = self.runner.execute(plan.scheduled, copies)
        self._stats.forward_seconds += time.perf_counter() - begin
        self._stats.num_steps += 1
        bitmask = self.mask_filler.result()
        seqs: list[Sequence] = []
        rows: list[int] = []
        scored: list[tuple[Sequence, int, int]] = []  # score requests' spans: read, not sampled
        row = 0
        for item in plan.scheduled:
            seq = item.seq
            if item.is_verification:  # a speculative span: the speculator samples it
                row += item.num_logits
                continue
            seq.num_cached_tokens += item.num_new_tokens
            seq.num_steps += 1
            self.block_manager.commit_inplace(seq)
            row += item.num_logits
            if seq.score is not None:
                if item.num_logits:
                    scored.append((seq, row - item.num_logits, item.num_logits))
                continue
            if not item.num_logits or seq.num_cached_tokens < seq.num_tokens:
                continue  # mid-prefill chunk: nothing to sample yet
            # the span's last logits row is the next-token distribution
            seqs.append(seq)
            rows.append(row - 1)
            if seq.num_pending_forks:
                for child in self._fork(seq):
                    seqs.append(child)
                    rows.append(row - 1)
        if scored:
            deltas += self.scores.read(scored, logits)
        if self.speculator is not None:
            deltas += self.speculator.verify(plan, logits)
        if not seqs:
            return deltas
        if rows != list(range(logits.shape[0])):
            (row_ids,) = to_device([np.asarray(rows, dtype=np.int64)], logits.device)
            logits = logits[row_ids]
        if bitmask is not None and bitmask.shape[0] != len(seqs):
            raise EngineError(
                f"the mask worker filled {bitmask.shape[0]} rows for {len(seqs)} sampled sequences"
            )
        if self.beams.has_groups:  # beam search takes its rows; the rest are sampled
            seqs, logits, bitmask, beam_deltas = self.beams.take_rows(seqs, logits, bitmask)
            deltas += beam_deltas
            if not seqs:
                return deltas
        return deltas + self._sample_and_update(seqs, logits, bitmask)

    @staticmethod
    def _rows_to_sample(plan: SchedulerOutput) -> list[MaskHook | None]:
        """Matcher (or None) of each row the step will sample, in sampling order.

        A span that reaches its sequence's end is sampled; a parent with pending forks is
        followed by its children, whose matchers are forks at the same state (same row).
        """
        matchers: list[MaskHook | None] = []
        for item in plan.scheduled:
            seq = item.seq
            if item.is_verification or seq.score is not None:
                continue  # the speculator fills its own mask rows; score rows are read
            if item.num_logits and seq.num_cached_tokens + item.num_new_tokens == seq.num_tokens:
                matchers.extend([seq.matcher] * (1 + seq.num_pending_forks))
        return matchers

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
            child.grammar = parent.grammar
            child.jump_forward = parent.jump_forward
            child.num_forced_tokens = parent.num_forced_tokens
            child.num_streamed_tokens = parent.num_streamed_tokens
            child.logprobs = list(parent.logprobs)
            self.block_manager.fork_inplace(parent, child)
            request.seqs.append(child)
            # the parent may hold jump-forward text already: continue from its state
            request.detokenizers[child.seq_id] = request.detokenizers[parent.seq_id].fork()
            children.append(child)
        parent.num_pending_forks = 0
        self.scheduler.insert_running_after(parent, children)
        return children

    def _sample_and_update(
        self, seqs: list[Sequence], logits: torch.Tensor, bitmask: torch.Tensor | None
    ) -> list[StreamDelta]:
        params = [seq.sampling_params for seq in seqs]
        batch = SamplingBatch.build(
            params,
            [seq.prompt_token_ids for seq in seqs],
            _OutputTokenIds(seqs),  # copied out only for rows with penalties or min_tokens
            self.vocab_size,
            self.eos_token_ids,
            [seq.generator for seq in seqs],
            self.runner.device,
        )
        try:  # a host bitmask goes to the device inside the sampler, without blocking
            sampled = self.sampler(logits, batch, token_bitmask=bitmask)
        except DeadEndError as exc:
            raise self.postprocessor.dead_end(seqs, bitmask, exc) from exc
        return self.postprocessor.commit_sampled(seqs, sampled)

    # -- batch calls ---------------------------------------------------------------------------

    def _submit(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        sampling_params: SamplingParams | SequenceABC[SamplingParams] | None,
        grammar: GrammarLike | None = None,
        jump_forward: bool | None = None,
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
        if isinstance(grammar, (list, tuple)):
            grammar_list = list(grammar)
            if len(grammar_list) != len(prompt_list):
                raise RequestError(
                    f"got {len(grammar_list)} grammars for {len(prompt_list)} prompts"
                )
        else:
            grammar_list = [grammar] * len(prompt_list)
        request_ids: list[str] = []
        try:
            for prompt, params, one_grammar in zip(
                prompt_list, params_list, grammar_list, strict=True
            ):
                request_ids.append(
                    self.add_request(prompt, params, grammar=one_grammar, jump_forward=jump_forward)
                )
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
        grammar: GrammarLike | None = None,
        jump_forward: bool | None = None,
    ) -> list[RequestOutput]:
        """Run prompts to completion; one `RequestOutput` per prompt, in order.

        ``prompts``: a string, a token id list, a chat message list, or a list of those.
        ``sampling_params``: one for all prompts or one per prompt (default: SamplingParams()).
        ``grammar``: one grammar for all prompts or a list with one per prompt (None entries:
        unconstrained); see `add_request`. ``jump_forward``: see `add_request`.

        A grammar spec that fails to compile raises its error (naming the request) and drops
        the call's requests.
        """
        request_ids = self._submit(prompts, sampling_params, grammar, jump_forward)
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
        grammar: GrammarLike | None = None,
        jump_forward: bool | None = None,
    ) -> Iterator[StreamDelta]:
        """Yield `StreamDelta`s (new tokens and text per completion) as steps produce them.

        ``grammar`` / ``jump_forward`` as in `generate`. A delta may carry several tokens
        (jump-forward). Closing the iterator early aborts the prompts' unfinished requests.
        """
        request_ids = self._submit(prompts, sampling_params, grammar, jump_forward)
        mine = set(request_ids)
        try:
            while not all(self.requests[r].is_finished for r in request_ids) or any(
                d.request_id in mine for d in self._pending_deltas
            ):
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
