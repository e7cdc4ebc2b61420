"""Generator: a grammar, a parser and default sampling options bound to a model.

Every typed call (``formcast.text/regex/choice/cfg/json``) is a `Generator` subclass that
supplies ``_grammar_spec`` (a :class:`~formcast.grammar.GrammarSpec`, or None for free text)
and ``parse`` (text -> value). The grammar is compiled by the engine's compile queue, the same
route and cache the HTTP server uses. The base class runs prompts through the model, one at a
time (``__call__``), as one concurrent engine batch (``batch``) or as a stream of text chunks
(``stream``), and checks that a constrained output is complete before parsing it (the engine
reports ``is_grammar_complete``): a generation cut by ``max_tokens`` raises
`IncompleteOutputError` instead of returning a truncated value.

``reasoning=`` (every call kind): the model first thinks freely between two tags (a
:class:`~formcast.grammar.reasoning.ReasoningConfig`, optionally with a token budget), then
writes the constrained answer; calls return `Reasoned` (the value and the thoughts).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from formcast.engine.outputs import CompletionOutput
from formcast.engine.prompt import Prompt
from formcast.errors import IncompleteOutputError, OutputError, UsageError
from formcast.grammar import Grammar, GrammarSpec
from formcast.grammar.reasoning import ReasoningConfig
from formcast.model import Model
from formcast.sampling import check_sampling_options, make_sampling_params


@dataclass
class Completion:
    """One generation: its ``value`` (as the call returns it), raw ``text`` and tokens."""

    value: Any
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass(frozen=True)
class Reasoned:
    """The value of a call made with ``reasoning=``: the parsed answer and the thoughts.

    Attributes
    ----------
    value : Any
        What the call returns without reasoning (a model instance, a dict, a str, ...).
    reasoning : str
        The text between the reasoning tags (tags excluded).
    """

    value: Any
    reasoning: str


class Generator:
    """Base of the typed calls; free text when not subclassed (see :func:`text`).

    Parameters
    ----------
    model : Model
        From :func:`formcast.load`.
    reasoning : bool, dict or ReasoningConfig, optional
        Think first: free text between the tags (``True``: ``<think>`` ... ``</think>``), then
        the constrained answer; calls return `Reasoned`.
    **sampling
        Default sampling options (`formcast.samplers.SamplingParams` fields: ``temperature``,
        ``top_p``, ``max_tokens``, ``seed``, ``stop``, ...); call-time keywords override them.
    """

    description = "text"

    def __init__(self, model: Model, *, reasoning: Any = None, **sampling: Any) -> None:
        if not isinstance(model, Model):
            raise UsageError(
                f"expected a formcast Model (from formcast.load()), got {type(model).__name__}"
            )
        self.model = model
        self.reasoning: ReasoningConfig | None = ReasoningConfig.of(reasoning)
        self.sampling = check_sampling_options(sampling, type(self).__name__)
        make_sampling_params(self.sampling, {})  # validate the defaults now

    # -- to override --------------------------------------------------------------------------

    def _grammar_spec(self) -> GrammarSpec | None:
        """The grammar request (None: unconstrained text)."""
        return None

    def parse(self, text: str) -> Any:
        """Turn a complete generated text into the call's value (here: the text itself)."""
        return text

    # -- grammar ------------------------------------------------------------------------------

    @property
    def grammar(self) -> Grammar | None:
        """The compiled grammar (compiled once per process by the engine), or None."""
        spec = self.grammar_spec
        return None if spec is None else self.model.grammar(spec)

    @functools.cached_property
    def grammar_spec(self) -> GrammarSpec | None:
        """The grammar request, built once (its key serialises the schema: not per call);
        under ``reasoning`` the answer's spec behind the thoughts."""
        spec = self._grammar_spec()
        if self.reasoning is None:
            return spec
        return GrammarSpec.reasoning(spec, self.reasoning)

    def answer_text(self, text: str) -> str:
        """The part of a generated text that is the answer (after the reasoning, if any)."""
        return text if self.reasoning is None else self.reasoning.split(text)[1]

    def _check_complete(
        self, text: str, token_ids: Sequence[int], finish_reason: str, is_complete: bool | None
    ) -> None:
        """Raise unless the engine reported the output a complete sentence of the grammar
        (``is_complete`` None: no grammar)."""
        if is_complete is None or is_complete:
            return
        if finish_reason == "length":
            raise IncompleteOutputError(
                f"{self.description}: generation hit the token limit after {len(token_ids)} "
                f"tokens before the output was complete (raise max_tokens, or bound the "
                f"structure, e.g. maxLength / maxItems): {text!r}",
                text=text,
            )
        raise OutputError(
            f"{self.description}: generation ended ({finish_reason}) before the output was "
            f"complete (a stop string or stop token cut it?): {text!r}",
            text=text,
        )

    def _value(self, output: CompletionOutput) -> Any:
        self._check_complete(
            output.text, output.token_ids, output.finish_reason or "", output.is_grammar_complete
        )
        if self.reasoning is None:
            return self.parse(output.text)
        thoughts, answer = self.reasoning.split(output.text)
        return Reasoned(self.parse(answer), thoughts)

    # -- calls --------------------------------------------------------------------------------

    def __call__(self, prompt: Prompt, **sampling: Any) -> Any:
        """Generate for one prompt and return the value.

        Raises
        ------
        IncompleteOutputError
            ``max_tokens`` (or the model's length) cut the output before it was complete.
        OutputError
            The output is complete but cannot be parsed into the value (e.g. a pydantic
            validator rejected it).
        """
        return self.batch([prompt], **sampling)[0]

    def complete(self, prompt: Prompt, **sampling: Any) -> Completion:
        """Like ``__call__`` but return the `Completion` (value, raw text, token ids)."""
        params = make_sampling_params(self.sampling, sampling)
        output = self.model.run([prompt], params, self.grammar)[0].outputs[0]
        value = self._value(output)
        return Completion(value, output.text, list(output.token_ids), output.finish_reason or "")

    def batch(
        self, prompts: Sequence[Prompt], *, return_exceptions: bool = False, **sampling: Any
    ) -> list[Any]:
        """Generate for all prompts concurrently (one engine batch); values in order.

        With ``return_exceptions=True`` a failed output is returned as its exception object
        (`IncompleteOutputError`, `OutputError`) in its slot instead of being raised.
        """
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            raise UsageError(
                f"{self.description}.batch expects a list of prompts, got {type(prompts).__name__}"
            )
        params = make_sampling_params(self.sampling, sampling)
        outputs = self.model.run(list(prompts), params, self.grammar)
        values: list[Any] = []
        for output in outputs:
            try:
                values.append(self._value(output.outputs[0]))
            except OutputError as exc:
                if not return_exceptions:
                    raise
                values.append(exc)
        return values

    def stream(self, prompt: Prompt, **sampling: Any) -> Iterator[str]:
        """Yield text chunks as they are generated.

        After the last chunk, a constrained output that was cut short raises
        `IncompleteOutputError` (the chunks already seen are its ``text``).
        """
        params = make_sampling_params(self.sampling, sampling)
        text_parts: list[str] = []
        token_ids: list[int] = []
        finish_reason = "abort"
        grammar = self.grammar
        is_complete: bool | None = None if grammar is None else False
        for delta in self.model.stream(prompt, params, grammar):
            token_ids.extend(delta.token_ids)
            if delta.finish_reason is not None:
                finish_reason = delta.finish_reason
                is_complete = delta.is_grammar_complete
            if delta.text:
                text_parts.append(delta.text)
                yield delta.text
        self._check_complete("".join(text_parts), token_ids, finish_reason, is_complete)

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.sampling.items())
        return f"<formcast {self.description} generator{' ' + options if options else ''}>"


def text(model: Model, **sampling: Any) -> Generator:
    """Free-text generation: ``formcast.text(model)(prompt) -> str``.

    Examples
    --------
    >>> formcast.text(model, max_tokens=32)("Write a haiku about the sea.")
    """
    return Generator(model, **sampling)
