"""``formcast.choice(model, options)``: exactly one of a list of strings, an Enum or a Literal.

Each option is written as text: a ``str`` as itself, an Enum member as its value when that is
a ``str`` (else its name), a non-str Literal value as its JSON spelling (``1``, ``true``).
The call returns the option itself (the Enum member, the Literal value).

Two ways to pick it (``method=``):

- ``"sample"`` (default): constrained generation. The grammar of the options masks every token
  and the model samples (``temperature=0``: greedy) until one option is written. Each step is
  renormalised over the tokens some option allows, so between options that start differently
  the first token decides.
- ``"score"``: the log-probability of every option's whole text under the model, computed
  exactly in one engine batch (a score request per prompt: the prompt's KV is computed once
  and shared by the options, see `formcast.engine.scoring`); the call returns the most
  probable option. `ChoiceGenerator.scores` returns the per-option numbers in either mode.
"""

from __future__ import annotations

import enum
import json
import math
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from formcast.decoding.jump_forward import forced_token_ids
from formcast.engine.outputs import RequestOutput
from formcast.engine.prompt import Prompt
from formcast.errors import OutputError, TokenizerError, UsageError
from formcast.generator import Completion, Generator
from formcast.grammar import GrammarSpec
from formcast.model import Model

ChoiceMethod = Literal["sample", "score"]
CHOICE_METHODS: tuple[str, ...] = typing.get_args(ChoiceMethod)


def option_text(option: Any) -> str:
    """The text the model writes for ``option``."""
    if isinstance(option, enum.Enum):
        return option.value if isinstance(option.value, str) else option.name
    if isinstance(option, str):
        return option
    if option is None or isinstance(option, (bool, int, float)):
        return json.dumps(option)
    raise UsageError(
        f"choice option {option!r} is a {type(option).__name__}; options must be str, "
        "Enum members, or Literal values (str, int, float, bool, None)"
    )


def choice_options(options: Any) -> list[Any]:
    """The options of a list / tuple of str, an Enum class, or a ``Literal[...]`` type."""
    if isinstance(options, type) and issubclass(options, enum.Enum):
        values: list[Any] = list(options)
    elif typing.get_origin(options) is typing.Literal:
        values = list(typing.get_args(options))
    elif isinstance(options, (list, tuple)):
        values = list(options)
    else:
        raise UsageError(
            "formcast.choice expects a list of strings, an Enum class or a Literal[...] type, "
            f"got {options!r}"
        )
    if not values:
        raise UsageError("formcast.choice needs at least one option")
    return values


@dataclass(frozen=True)
class OptionScore:
    """One option's log-probability after a prompt (see `ChoiceGenerator.scores`).

    Attributes
    ----------
    option : Any
        The option as the call returns it (the str, Enum member or Literal value).
    text : str
        The option as written.
    logprob : float
        The score: ``sum(token_logprobs)``, plus ``stop_logprob`` when the generator was
        built with ``include_stop=True``.
    token_ids : tuple[int, ...]
        The option's tokens after the prompt (the tokenizer's own tokenization in context).
    token_logprobs : tuple[float, ...]
        Log-probability of each token given the prompt and the tokens before it.
    stop_logprob : float
        Log-probability that the model stops (any EOS token) right after the option.
    """

    option: Any
    text: str
    logprob: float
    token_ids: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    stop_logprob: float


class ChoiceGenerator(Generator):
    """Writes or scores the options; calls return the chosen option.

    Parameters
    ----------
    model : Model
        From :func:`formcast.load`.
    options : list, tuple, Enum class or Literal type
        See :func:`choice`.
    method : {"sample", "score"}
        ``"sample"``: constrained generation; ``"score"``: the option of highest
        log-probability (see :func:`choice`).
    include_stop : bool
        Scores include the log-probability of stopping right after the option.
    reasoning : bool, dict or ReasoningConfig, optional
        Think first, then choose (``method="sample"`` only; see `Generator`).
    **sampling
        Default sampling options (``method="sample"`` only).

    Raises
    ------
    UsageError
        Malformed or duplicate options, an unknown ``method``, sampling options with
        ``method="score"``.
    """

    def __init__(
        self,
        model: Model,
        options: Any,
        *,
        method: ChoiceMethod = "sample",
        include_stop: bool = True,
        reasoning: Any = None,
        **sampling: Any,
    ) -> None:
        if method not in CHOICE_METHODS:
            raise UsageError(f"choice: method={method!r} is not one of {list(CHOICE_METHODS)}")
        if not isinstance(include_stop, bool):
            raise UsageError(f"choice: include_stop must be a bool, got {include_stop!r}")
        if method == "score":
            if reasoning:
                raise UsageError(
                    "formcast.choice: method='score' scores the options without generating; "
                    "reasoning= needs method='sample'"
                )
            self._refuse_sampling(sampling, "formcast.choice")
        super().__init__(model, reasoning=reasoning, **sampling)
        self.method = method
        self.include_stop = include_stop
        self.options = choice_options(options)
        self.texts = [option_text(o) for o in self.options]
        seen: dict[str, Any] = {}
        for option, spelled in zip(self.options, self.texts, strict=True):
            if spelled in seen:
                raise UsageError(
                    f"choice options {seen[spelled]!r} and {option!r} are both written {spelled!r}"
                )
            if not spelled:
                raise UsageError(f"choice option {option!r} is written as an empty string")
            seen[spelled] = option
        self._by_text = seen
        self.description = f"choice {self.texts!r}"
        if method == "sample":
            _ = self.grammar  # compile now: a bad option set fails at construction

    def _grammar_spec(self) -> GrammarSpec:
        return GrammarSpec.choice(self.texts)

    def parse(self, text: str) -> Any:
        """The option written as ``text``."""
        if text not in self._by_text:
            raise OutputError(f"{text!r} is not one of {self.texts!r}", text=text)
        return self._by_text[text]

    # -- scoring ------------------------------------------------------------------------------

    def _refuse_sampling(self, sampling: dict[str, Any], where: str) -> None:
        if sampling:
            raise UsageError(
                f"{where}: sampling options {sorted(sampling)} do not apply to method='score' "
                "(it computes the model's own log-probabilities; nothing is sampled)"
            )

    def _encode(self, text: str) -> list[int]:
        return list(self.model.tokenizer.encode(text, add_special_tokens=False))

    def option_token_ids(self, prompt_token_ids: Sequence[int]) -> list[list[int]]:
        """Each option's tokens right after ``prompt_token_ids``, as the tokenizer writes the
        option there: the prompt's last few tokens are tokenized again together with the
        option's text, and the option gets the tokens after them (the canonical tokenization
        in context, as jump-forward appends forced text; the prompt's tokens stay as they are).

        Raises
        ------
        TokenizerError
            No tokenization's bytes are exactly the option's text (a normalising tokenizer).
        """
        token_ids: list[list[int]] = []
        for text in self.texts:
            ids = forced_token_ids(
                text.encode("utf-8"),
                prompt_token_ids,
                self.model.vocab,
                self._encode,
                is_final=True,
            )
            if not ids:
                raise TokenizerError(
                    f"choice option {text!r}: the tokenizer has no tokenization whose bytes are "
                    "exactly the option's text"
                )
            token_ids.append(ids)
        return token_ids

    def batch_scores(self, prompts: Sequence[Prompt]) -> list[list[OptionScore]]:
        """Score every option after every prompt (one engine batch); one list per prompt, in
        the options' order.

        Raises
        ------
        UsageError
            ``prompts`` is not a list of prompts, or a prompt is malformed.
        RequestError
            A prompt plus an option does not fit the model's context or the KV cache.
        """
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            raise UsageError(
                f"{self.description}.batch_scores expects a list of prompts, got "
                f"{type(prompts).__name__}"
            )
        llm = self.model.llm
        prompt_token_ids = [llm.encode_prompt(self.model.engine_prompt(p))[1] for p in prompts]
        continuations = [self.option_token_ids(ids) for ids in prompt_token_ids]
        outputs = self.model.score(prompt_token_ids, continuations)
        return [self._option_scores(output) for output in outputs]

    def scores(self, prompt: Prompt) -> list[OptionScore]:
        """Every option's `OptionScore` after ``prompt``, in the options' order.

        Examples
        --------
        >>> sentiment = formcast.choice(model, ["positive", "negative"], method="score")
        >>> [(s.text, round(s.logprob, 2)) for s in sentiment.scores("I loved it!")]
        """
        return self.batch_scores([prompt])[0]

    def _option_scores(self, output: RequestOutput) -> list[OptionScore]:
        scores = []
        for option, text, completion in zip(self.options, self.texts, output.outputs, strict=True):
            token_logprobs = tuple(
                entry[token_id]
                for entry, token_id in zip(completion.logprobs, completion.token_ids, strict=True)
            )
            stop = float(completion.stop_logprob)
            logprob = math.fsum(token_logprobs) + (stop if self.include_stop else 0.0)
            scores.append(
                OptionScore(
                    option, text, logprob, tuple(completion.token_ids), token_logprobs, stop
                )
            )
        return scores

    @staticmethod
    def _best(scores: list[OptionScore]) -> OptionScore:
        return max(scores, key=lambda score: score.logprob)  # ties: the earlier option

    # -- calls --------------------------------------------------------------------------------

    def batch(
        self, prompts: Sequence[Prompt], *, return_exceptions: bool = False, **sampling: Any
    ) -> list[Any]:
        """The option for every prompt, in order (one engine batch).

        ``method="sample"``: as `Generator.batch`. ``method="score"``: the option of highest
        score after each prompt (``return_exceptions`` has nothing to return: scoring has no
        unparsable output).
        """
        if self.method == "sample":
            return super().batch(prompts, return_exceptions=return_exceptions, **sampling)
        self._refuse_sampling(sampling, f"{self.description}.batch")
        return [self._best(scores).option for scores in self.batch_scores(prompts)]

    def complete(self, prompt: Prompt, **sampling: Any) -> Completion:
        """Like ``__call__`` but return the `Completion` (``method="score"``: the best option's
        text and tokens, finish reason ``"stop"``)."""
        if self.method == "sample":
            return super().complete(prompt, **sampling)
        self._refuse_sampling(sampling, f"{self.description}.complete")
        best = self._best(self.scores(prompt))
        return Completion(best.option, best.text, list(best.token_ids), "stop")

    def stream(self, prompt: Prompt, **sampling: Any) -> Iterator[str]:
        """Yield text chunks (``method="score"``: the best option's text, as one chunk)."""
        if self.method == "sample":
            return super().stream(prompt, **sampling)
        return iter([self.complete(prompt, **sampling).text])

    def __repr__(self) -> str:
        if self.method == "sample":
            return super().__repr__()
        return f"<formcast {self.description} generator method='score'>"


def choice(
    model: Model,
    options: Any,
    *,
    method: ChoiceMethod = "sample",
    include_stop: bool = True,
    **sampling: Any,
) -> ChoiceGenerator:
    """Pick one of ``options``; calls return that option.

    Parameters
    ----------
    model : Model
        From :func:`formcast.load`.
    options : list or tuple of str, Enum class, or ``Literal[...]`` type
        A list returns the string; an Enum returns the member; a Literal returns the value.
    method : {"sample", "score"}
        ``"sample"`` (default): constrained generation, driven by the sampling options
        (``temperature=0``: greedy). ``"score"``: compute every option's log-probability after
        the prompt and return the most probable option; deterministic, no sampling options.
    include_stop : bool
        Add to each score the log-probability that the model stops right after the option
        (default True); see Notes.
    **sampling
        Default sampling options for ``method="sample"`` (``temperature``, ``seed``, ...).

    Returns
    -------
    ChoiceGenerator
        Callable on a prompt; also ``.batch(prompts)``, ``.scores(prompt)``,
        ``.batch_scores(prompts)``.

    Raises
    ------
    UsageError
        Malformed or duplicate options, an unknown ``method``, sampling options with
        ``method="score"``.

    Notes
    -----
    What ``method="score"`` computes for an option ``o`` written as tokens ``t_1 .. t_n``
    (the tokenizer's own tokenization of ``o`` right after the prompt)::

        score(o) = sum_i log p(t_i | prompt, t_<i)  [+ log p(stop | prompt, o)]

    with ``p`` the model's full softmax (no temperature, no mask) and ``stop`` any EOS token
    (for a chat model, the end of its turn). With the stop term, ``exp(score(o))`` is the
    exact probability that the model, sampling freely at temperature 1, answers ``o`` and
    nothing more (through that tokenization; other tokenizations of the same text are not
    added, and a model trained on canonical tokenizations gives them little mass); the softmax
    of the scores over the options is that answer's probability given that the answer is one
    of them. Without it (``include_stop=False``), an option is scored as a prefix of a longer
    answer, so ``"positive"`` always scores at least as high as ``"positive review"``.
    Scores are not normalised by length: every token of an option costs its log-probability
    (`OptionScore.token_logprobs` holds them per token).

    This is not the probability that ``method="sample"`` returns ``o``: constrained sampling
    renormalises each step over the tokens some option allows, so it weighs the options by
    their first tokens' share of the allowed mass, whatever the model thinks of the rest.

    Examples
    --------
    >>> sentiment = formcast.choice(model, ["positive", "negative"], temperature=0)
    >>> sentiment("I loved it!")
    'positive'
    >>> formcast.choice(model, Sentiment, method="score").batch(reviews)
    [<Sentiment.POSITIVE: 'positive'>, <Sentiment.NEGATIVE: 'negative'>, ...]
    """
    return ChoiceGenerator(model, options, method=method, include_stop=include_stop, **sampling)
