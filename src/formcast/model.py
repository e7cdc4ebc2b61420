"""Model: one loaded engine, its tokenizer and vocabulary, a grammar cache, and the request pump.

``formcast.load(...)`` returns a :class:`Model`. Every typed call (``formcast.json``,
``regex``, ``choice``, ``cfg``, ``text``) submits requests here. The pump steps the engine and
files every sequence's deltas under its request id, so several streams and batches can be in
flight on one model at once without losing each other's tokens.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from formcast.engine import LLM
from formcast.engine.models.loader import DEFAULT_MODEL
from formcast.engine.outputs import RequestOutput, StreamDelta
from formcast.engine.prompt import Prompt, check_prompt
from formcast.errors import RequestError, UsageError
from formcast.grammar import Grammar, GrammarSpec
from formcast.samplers import SamplingParams


@dataclass
class _Pending:
    """A request the pump is serving: the deltas not yet taken."""

    deltas: list[StreamDelta] = field(default_factory=list)


class Model:
    """A loaded language model ready for typed generation.

    Attributes
    ----------
    llm : formcast.engine.LLM
        The paged-KV engine.
    tokenizer : Any
        The model's transformers tokenizer.
    vocab : formcast.grammar.Vocabulary
        Exact bytes per token id, over the logits width.
    is_chat : bool
        String prompts are sent as one user message through the chat template.
    """

    def __init__(self, llm: LLM, *, chat: bool | None = None) -> None:
        self.llm = llm
        self.tokenizer = llm.tokenizer
        self.vocab = llm.structured_output.vocab  # the engine's: its grammars must match it
        has_template = bool(getattr(llm.tokenizer, "chat_template", None))
        self.is_chat = has_template if chat is None else bool(chat)
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        config = self.llm.model_config
        return (
            f"Model({config.model_type!r}, layers={config.num_hidden_layers}, "
            f"vocab_size={self.vocab.vocab_size}, device={self.llm.config.device!r}, "
            f"chat={self.is_chat})"
        )

    # -- grammars -----------------------------------------------------------------------------

    def grammar(self, spec: GrammarSpec) -> Grammar:
        """The compiled grammar of ``spec``, from the engine's compile queue (one compile per
        key per process: the HTTP server and the engine share it).

        Raises
        ------
        GrammarError
            The grammar is malformed or unsupported (its own subclass, e.g. `SchemaError`).
        """
        return self.llm.structured_output.compiler.submit(spec).result()

    # -- prompts ------------------------------------------------------------------------------

    def engine_prompt(self, prompt: Prompt) -> Prompt:
        """What the engine gets: a chat model's string prompt becomes one user message.

        Raises
        ------
        UsageError
            A malformed prompt (the engine's :func:`~formcast.engine.prompt.check_prompt`).
        """
        try:
            prompt = check_prompt(prompt)
        except RequestError as exc:
            raise UsageError(str(exc)) from None
        if isinstance(prompt, str) and self.is_chat:
            return [{"role": "user", "content": prompt}]
        return prompt

    # -- running requests ---------------------------------------------------------------------

    def submit(self, prompt: Prompt, params: SamplingParams, grammar: Grammar | None = None) -> str:
        """Queue one request (constrained by ``grammar`` if given); return its id."""
        with self._lock:
            request_id = self.llm.add_request(self.engine_prompt(prompt), params, grammar=grammar)
            self._pending[request_id] = _Pending()
        return request_id

    def _pump(self) -> None:
        """One engine step; file each delta under its request."""
        for delta in self.llm.step():
            pending = self._pending.get(delta.request_id)
            if pending is not None:
                pending.deltas.append(delta)

    def _is_finished(self, request_id: str) -> bool:
        return self.llm.requests[request_id].is_finished

    def cancel(self, request_ids: Sequence[str]) -> None:
        """Abort and forget requests (finished or not)."""
        with self._lock:
            for request_id in request_ids:
                self._pending.pop(request_id, None)
                if request_id in self.llm.requests:
                    self.llm.abort(request_id)
                    del self.llm.requests[request_id]

    def wait(self, request_ids: Sequence[str]) -> list[RequestOutput]:
        """Step the engine until every request finished; return their outputs in order."""
        try:
            with self._lock:
                while not all(self._is_finished(r) for r in request_ids):
                    self._pump()
                outputs = [self.llm.take_output(r) for r in request_ids]
                for request_id in request_ids:
                    self._pending.pop(request_id, None)
            return outputs
        except BaseException:
            self.cancel(request_ids)
            raise

    def run(
        self, prompts: Sequence[Prompt], params: SamplingParams, grammar: Grammar | None = None
    ) -> list[RequestOutput]:
        """Generate for every prompt concurrently (one engine batch); outputs in order."""
        request_ids: list[str] = []
        try:
            for prompt in prompts:
                request_ids.append(self.submit(prompt, params, grammar))
        except BaseException:
            self.cancel(request_ids)
            raise
        return self.wait(request_ids)

    def score(
        self, prompts: Sequence[Prompt], continuations: Sequence[Sequence[Sequence[int]]]
    ) -> list[RequestOutput]:
        """Score token continuations of every prompt (one engine batch); outputs in order.

        Output ``i`` has one completion per continuation of prompt ``i``, with its tokens'
        ``logprobs``, their sum ``cumulative_logprob`` and ``stop_logprob`` (see
        `formcast.engine.LLM.add_score_request`).
        """
        if len(prompts) != len(continuations):
            raise UsageError(
                f"score: {len(prompts)} prompts but {len(continuations)} continuation lists"
            )
        request_ids: list[str] = []
        try:
            with self._lock:
                for prompt, options in zip(prompts, continuations, strict=True):
                    engine_prompt = self.engine_prompt(prompt)
                    request_id = self.llm.add_score_request(engine_prompt, options)
                    self._pending[request_id] = _Pending()
                    request_ids.append(request_id)
        except BaseException:
            self.cancel(request_ids)
            raise
        return self.wait(request_ids)

    def stream(
        self, prompt: Prompt, params: SamplingParams, grammar: Grammar | None = None
    ) -> Iterator[StreamDelta]:
        """Yield the request's deltas as engine steps produce them.

        Closing the iterator early aborts the request.
        """
        request_id = self.submit(prompt, params, grammar)
        try:
            while request_id in self.llm.requests:
                with self._lock:
                    pending = self._pending[request_id]
                    if not pending.deltas:
                        self._pump()
                    deltas, pending.deltas = pending.deltas, []
                for delta in deltas:
                    yield delta
                    if delta.finish_reason is not None:
                        return  # the last delta of the (single) completion
        finally:
            self.cancel([request_id])


def load(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: str | None = None,
    dtype: str | None = None,
    chat: bool | None = None,
    **engine_options: Any,
) -> Model:
    """Load a model for typed generation.

    Parameters
    ----------
    model : str or os.PathLike
        Registry alias (``"smollm2-135m"``, the embedded default), a Hugging Face model
        folder, or a ``.gguf`` file (converted once into the formcast cache).
    device : str, optional
        ``"cpu"``, ``"cuda"``, ...; default: CUDA when available.
    dtype : str, optional
        ``"auto"`` (default: bfloat16 where the hardware runs it natively, else float32),
        ``"float32"``, ``"bfloat16"`` or ``"float16"``.
    chat : bool, optional
        Send string prompts through the chat template as one user message; default: when the
        tokenizer has a chat template.
    **engine_options
        `formcast.engine.EngineConfig` fields (``max_num_seqs``, ``num_kv_blocks``, ...).

    Returns
    -------
    Model

    Examples
    --------
    >>> model = formcast.load()
    >>> formcast.choice(model, ["positive", "negative"])("I loved it!", temperature=0)
    'positive'
    """
    if device is not None:
        engine_options["device"] = device
    if dtype is not None:
        engine_options["dtype"] = dtype
    return Model(LLM(model, **engine_options), chat=chat)
