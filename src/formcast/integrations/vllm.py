"""formcast grammars inside vLLM, as a vLLM v1 logits-processor plugin.

Registered through the ``vllm.logits_processors`` entry point (installed with
``formcast[vllm]``), or named explicitly: ``vllm serve MODEL --logits-processors
formcast.integrations.vllm:FormcastLogitsProcessor``. A request opts in with one grammar::

    SamplingParams(extra_args={"formcast": {"json_schema": {...}}})           # offline
    client.chat.completions.create(..., extra_body={"vllm_xargs":
        {"formcast": json.dumps({"regex": "[0-9]+"})}})                      # OpenAI server

The value is a dict (or its JSON text, since ``vllm_xargs`` values are strings or numbers)
with exactly one key: ``json_schema`` (a schema), ``regex``, ``choice`` (a list of strings) or
``lark`` (grammar text), optionally ``options`` (passed to the compile function, e.g.
``{"whitespace": "none"}``).

Lifecycle, following vLLM's persistent batch:

- ``validate_params`` (in the API process, per request): the value's shape, the size limits
  (`GrammarLimits`), and a compile over a 256-byte vocabulary, so schema, regex and Lark
  errors come back as HTTP 400 naming the keyword, pointer or position before anything runs.
- ``update_state`` (before each forward pass): removed, added and moved rows are applied in
  vLLM's order; an added row's grammar is submitted to a shared `GrammarCompiler` (compiled
  once per distinct grammar, in background threads, remembered by key); every row's matcher
  is advanced over its new output tokens (vLLM's list is a live reference), and the rows'
  masks start filling in a worker thread while the model runs.
- ``apply`` (after the forward pass): waits for that fill, refreshes any row whose tokens
  changed since (asynchronous scheduling fills in placeholders late), and writes ``-inf``
  into every disallowed logit, with formcast's Triton kernel on CUDA. EOS is allowed exactly
  where the grammar accepts, so vLLM stops there.

Importing this module is light: formcast's grammar machinery (numba, llvmlite) loads when
the processor is built inside vLLM's worker. vLLM 0.32's CPU worker scans every loaded module
at start-up and fails on llvmlite's function wrappers, so a process that imported numba
before creating an in-process ``LLM`` (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) cannot start it.

Limits (vLLM's, not ours): vLLM refuses custom logits processors together with speculative
decoding, and has no hook for jump-forward; ``min_tokens`` bans EOS after the grammar's own
mask, so a grammar that allows only EOS before ``min_tokens`` leaves no token (avoid
combining them). A grammar that fails to compile in the engine despite passing validation
(only a budget can differ) ends its request at once, logged as an error naming the request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import torch
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from formcast.bitmask import allow_only_inplace, apply_token_bitmask_inplace
from formcast.errors import FormcastError, RequestError

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

    from formcast.grammar import Vocabulary
    from formcast.grammar.protocol import Grammar, Matcher
    from formcast.grammar.spec import GrammarSpec

__all__ = ["EXTRA_ARGS_KEY", "FormcastLogitsProcessor", "grammar_spec_of"]

logger = logging.getLogger(__name__)

EXTRA_ARGS_KEY = "formcast"  # SamplingParams.extra_args[EXTRA_ARGS_KEY] holds the grammar
_KINDS = ("choice", "json_schema", "lark", "regex")


def grammar_spec_of(params: SamplingParams) -> GrammarSpec | None:
    """The `GrammarSpec` a request's ``extra_args`` ask for (None: not constrained).

    Raises
    ------
    RequestError
        (a ``ValueError``) naming what is wrong with ``extra_args["formcast"]``.
    """
    extra_args = params.extra_args or {}
    if EXTRA_ARGS_KEY not in extra_args:
        return None
    value = extra_args[EXTRA_ARGS_KEY]
    where = f"extra_args[{EXTRA_ARGS_KEY!r}]"
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise RequestError(f"{where} is a string but not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise RequestError(f"{where} must be an object, got {type(value).__name__}")
    options = value.get("options", {})
    if not isinstance(options, Mapping):
        raise RequestError(f"{where}['options'] must be an object")
    kinds = [key for key in value if key != "options"]
    if len(kinds) != 1 or kinds[0] not in _KINDS:
        raise RequestError(
            f"{where} must hold exactly one of {list(_KINDS)} (and optionally 'options'), "
            f"got keys {sorted(value)}"
        )
    kind = kinds[0]
    source = value[kind]
    expected = {"regex": str, "lark": str, "choice": list}.get(kind)
    if expected is not None and not isinstance(source, expected):
        raise RequestError(f"{where}[{kind!r}] must be a {expected.__name__}")
    if kind == "choice" and not all(isinstance(item, str) for item in source):
        raise RequestError(f"{where}['choice'] must be a list of strings")
    from formcast.grammar.spec import GrammarSpec  # numba: after vLLM's worker set-up

    return getattr(GrammarSpec, kind)(source, **dict(options))


@lru_cache(maxsize=1)
def _byte_vocabulary() -> Vocabulary:
    """256 one-byte tokens and an EOS: grammar errors do not depend on the vocabulary."""
    from formcast.grammar import Vocabulary

    token_bytes = (*(bytes([b]) for b in range(256)), b"")
    return Vocabulary(
        token_bytes=token_bytes,
        eos_token_ids=frozenset({256}),
        special_token_ids=frozenset({256}),
        vocab_size=257,
        kind="byte_level",
        num_tokenizer_tokens=257,
    )


@dataclass
class _Row:
    """One constrained request of the batch."""

    grammar: Future[Grammar]
    output_token_ids: list[int]  # vLLM's live list of the request's output tokens
    description: str
    matcher: Matcher | None = None
    num_accepted: int = 0  # output tokens the matcher has consumed
    is_failed: bool = False  # the grammar did not compile: only EOS is allowed

    def ready_matcher(self, wait: bool) -> Matcher | None:
        """The matcher once the grammar is compiled (waits if ``wait``); None if not ready."""
        if self.matcher is None and not self.is_failed:
            if not wait and not self.grammar.done():
                return None
            try:
                self.matcher = self.grammar.result().matcher()
            except FormcastError as exc:
                logger.error("formcast grammar %s failed to compile: %s", self.description, exc)
                self.is_failed = True
        return self.matcher

    def advance(self) -> bool:
        """Accept output tokens not yet seen (up to a placeholder); True if any were."""
        matcher = self.matcher
        if matcher is None:
            return False
        output = self.output_token_ids
        start = self.num_accepted
        while self.num_accepted < len(output) and output[self.num_accepted] >= 0:
            token_id = output[self.num_accepted]
            if not matcher.is_terminated() and not matcher.accept_token(token_id):
                logger.error(
                    "formcast grammar %s: output token %d at position %d is not allowed "
                    "(another processor or a stop rule let it through); the row is ended",
                    self.description,
                    token_id,
                    self.num_accepted,
                )
                self.is_failed = True
            self.num_accepted += 1
        return self.num_accepted > start


class FormcastLogitsProcessor(LogitsProcessor):
    """vLLM v1 logits processor: formcast grammar masks for requests that ask for one.

    Parameters
    ----------
    vllm_config : VllmConfig
        The engine's configuration (model, tokenizer, batch size).
    device : torch.device
        Where the logits live.
    is_pin_memory : bool
        Whether host buffers may be pinned (the bitmask is pinned where CUDA exists).
    """

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse a malformed or uncompilable grammar with a ``ValueError`` (HTTP 400)."""
        spec = grammar_spec_of(sampling_params)
        if spec is None:
            return
        from formcast.grammar.limits import GrammarLimits

        if spec.recipe is not None:
            spec.recipe.check_size(GrammarLimits())
        spec.compile_fn(_byte_vocabulary())

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        from transformers import AutoTokenizer

        from formcast.engine.structured import GrammarCompiler, MaskFiller
        from formcast.grammar import Vocabulary

        model_config = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(
            model_config.tokenizer,
            revision=model_config.tokenizer_revision,
            trust_remote_code=model_config.trust_remote_code,
        )
        self.vocab_size = model_config.get_vocab_size()
        eos_ids = {tokenizer.eos_token_id} - {None}
        generation_eos = model_config.hf_config.eos_token_id
        if isinstance(generation_eos, int):
            eos_ids.add(generation_eos)
        elif generation_eos:
            eos_ids.update(generation_eos)
        self.vocab = Vocabulary.from_tokenizer(tokenizer, self.vocab_size, sorted(eos_ids))
        self.device = device
        self.compiler = GrammarCompiler(self.vocab)
        self.filler = MaskFiller(self.vocab_size)
        self.rows: dict[int, _Row] = {}  # persistent-batch index -> constrained request
        self._filled_rows: list[int] = []  # rows whose masks the filler is computing
        self.eos_token_ids = sorted(self.vocab.eos_token_ids)
        # host rows for the step's masks, reused (pinned where vLLM pins: non-blocking copy)
        self._host_bitmask = torch.empty(
            (vllm_config.scheduler_config.max_num_seqs, (self.vocab_size + 31) // 32),
            dtype=torch.int32,
            pin_memory=is_pin_memory,
        )

    def is_argmax_invariant(self) -> bool:
        """False: the mask changes greedy choices."""
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Apply the batch's changes, advance matchers, start filling this step's masks."""
        if batch_update is not None:
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for index, params, _, output_token_ids in batch_update.added:
                spec = grammar_spec_of(params)
                if spec is None:
                    self.rows.pop(index, None)
                    continue
                self.rows[index] = _Row(self._submit(spec), output_token_ids, str(spec))
            for first, second, direction in batch_update.moved:
                a, b = self.rows.pop(first, None), self.rows.pop(second, None)
                if a is not None:
                    self.rows[second] = a
                if b is not None and direction == MoveDirectionality.SWAP:
                    self.rows[first] = b
        if not self.rows:
            self._filled_rows = []
            return
        matchers: list[Matcher | None] = []
        self._filled_rows = []
        for index in sorted(self.rows):
            row = self.rows[index]
            matcher = row.ready_matcher(wait=False)
            row.advance()
            if matcher is not None and not row.is_failed and not matcher.is_terminated():
                matchers.append(matcher)
                self._filled_rows.append(index)
        self.filler.start(matchers)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Write ``-inf`` into every logit (B, V) a row's grammar does not allow now."""
        if not self.rows:
            return logits
        filled = self.filler.result()  # (len(filled_rows), W) or None
        indices = sorted(index for index in self.rows if index < logits.shape[0])
        if not indices:
            return logits
        if self._host_bitmask.shape[0] < logits.shape[0]:
            self._host_bitmask = torch.empty(
                (logits.shape[0], self._host_bitmask.shape[1]), dtype=torch.int32
            )
        bitmask = self._host_bitmask[: logits.shape[0]]  # (B, ceil(V / 32)); rows outside
        # `indices` are not read
        position = {index: k for k, index in enumerate(self._filled_rows)}
        for index in indices:
            row = self.rows[index]
            was_ready = row.matcher is not None
            matcher = row.ready_matcher(wait=True)
            is_fresh = row.advance() or not was_ready
            if row.is_failed or matcher is None or matcher.is_terminated():
                # complete (nothing may follow) or failed: EOS, and vLLM stops the request
                allow_only_inplace(bitmask, index, self.eos_token_ids)
            elif filled is not None and index in position and not is_fresh:
                bitmask[index] = filled[position[index]]
            else:
                matcher.fill_bitmask(bitmask, index)
        rows = torch.tensor(indices, dtype=torch.int64, device=logits.device)
        apply_token_bitmask_inplace(
            logits, bitmask.to(logits.device, non_blocking=True), rows, vocab_size=self.vocab_size
        )
        return logits

    def _submit(self, spec: GrammarSpec) -> Future[Grammar]:
        try:
            return self.compiler.submit(spec)
        except FormcastError as exc:
            failed: Future[Grammar] = Future()
            failed.set_exception(exc)
            return failed
