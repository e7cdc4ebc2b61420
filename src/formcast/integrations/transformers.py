"""formcast grammars inside transformers' ``model.generate``.

`GrammarLogitsProcessor` masks every row of ``generate``'s scores with the tokens a formcast
grammar allows after that row's generated tokens; `generate` is the one-line helper. Works with
greedy search, sampling, beam search and batches of left-padded prompts, on CPU or CUDA models
(the bitmask is copied to the scores' device).

Rows are followed by their generated tokens, not by their position in the batch: the matcher
of a row is keyed by the tuple of its tokens after the prompt, and a row's matcher is its
parent's (one token shorter) forked and advanced by the new token. Beam search reorders,
duplicates and drops rows between steps; keys make that correct without knowing how. Only the
keys of the current step are kept, so memory is one matcher per live row.

A row whose grammar has terminated (it produced EOS, and ``generate`` pads it with
``pad_token_id`` while other rows go on) is left unmasked: ``generate`` overwrites its token.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from formcast.bitmask import (
    allocate_token_bitmask,
    allow_only_inplace,
    apply_token_bitmask_inplace,
)
from formcast.errors import RequestError
from formcast.grammar import Vocabulary, caches
from formcast.grammar.protocol import Grammar, Matcher
from formcast.grammar.spec import GrammarLike, GrammarSpec

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["GrammarLogitsProcessor", "generate"]

# tokenizer -> {(logits width, EOS ids): Vocabulary}; building one takes ~0.2-0.4 s
_VOCABULARIES: weakref.WeakKeyDictionary[Any, dict[tuple[int, tuple[int, ...]], Vocabulary]]
_VOCABULARIES = weakref.WeakKeyDictionary()
_VOCABULARIES_LOCK = threading.Lock()


def _clear_vocabularies() -> None:
    with _VOCABULARIES_LOCK:
        _VOCABULARIES.clear()


caches.register(
    "integrations.transformers.vocabularies",
    "weak keys: entries live as long as their tokenizer",
    _clear_vocabularies,
)


def vocabulary_of(
    tokenizer: PreTrainedTokenizerBase, vocab_size: int, eos_token_ids: Sequence[int]
) -> Vocabulary:
    """The (memoised) `Vocabulary` of ``tokenizer`` for logits of width ``vocab_size``."""
    key = (vocab_size, tuple(eos_token_ids))
    with _VOCABULARIES_LOCK:
        vocab = _VOCABULARIES.get(tokenizer, {}).get(key)
    if vocab is None:
        vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size, eos_token_ids)
        with _VOCABULARIES_LOCK:
            _VOCABULARIES.setdefault(tokenizer, {})[key] = vocab
    return vocab


class GrammarLogitsProcessor(LogitsProcessor):
    """transformers ``LogitsProcessor`` that keeps every row inside a formcast grammar.

    Parameters
    ----------
    grammar : Grammar | GrammarSpec | dict
        A compiled grammar, a `GrammarSpec`, or a one-key dict such as
        ``{"json_schema": {...}}``, ``{"regex": "..."}``, ``{"choice": [...]}`` or
        ``{"lark": "..."}``; specs are compiled over the tokenizer's vocabulary at the
        first call, when the logits width is known.
    tokenizer : PreTrainedTokenizerBase
        The model's fast tokenizer.
    eos_token_ids : Collection[int] | None
        Ids that end generation where the grammar accepts; by default the tokenizer's EOS
        (pass the model's ``generation_config.eos_token_id`` if it differs).
    prompt_length : int | None
        Length of the (padded) prompt in ``input_ids``; by default the length at the first
        call. Make a new processor for each ``generate`` call.

    Raises
    ------
    RequestError
        At a call, if a row's generated tokens leave the grammar (the processor was reused
        across ``generate`` calls, or another processor let a disallowed token through).
    """

    def __init__(
        self,
        grammar: GrammarLike,
        tokenizer: PreTrainedTokenizerBase,
        eos_token_ids: Collection[int] | None = None,
        prompt_length: int | None = None,
    ) -> None:
        self.grammar_source = GrammarSpec.coerce(grammar)
        self.tokenizer = tokenizer
        self.eos_token_ids = sorted(
            set(eos_token_ids) if eos_token_ids is not None else {tokenizer.eos_token_id}
        )
        self.prompt_length = prompt_length
        self.grammar: Grammar | None = None
        # generated tokens of a live row -> the matcher after them (never advanced in place)
        self._matchers: dict[tuple[int, ...], Matcher] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Mask ``scores`` (B, V) in place to the tokens each row's grammar allows next."""
        num_rows, vocab_size = scores.shape
        if self.grammar is None:
            self.grammar = self._compile(vocab_size)
        if self.prompt_length is None:
            self.prompt_length = input_ids.shape[1]
        generated = input_ids[:, self.prompt_length :].tolist()  # (B, T) one host copy
        bitmask = allocate_token_bitmask(num_rows, vocab_size)  # (B, ceil(V / 32)) all ones
        matchers: dict[tuple[int, ...], Matcher] = {}
        for row, token_ids in enumerate(generated):
            key = tuple(token_ids)
            matcher = matchers.get(key) or self._matcher_after(key)
            matchers[key] = matcher
            if matcher.is_terminated():  # complete, or ended and padded: EOS only
                allow_only_inplace(bitmask, row, self.eos_token_ids)
            else:
                matcher.fill_bitmask(bitmask, row)
        self._matchers = matchers
        apply_token_bitmask_inplace(scores, bitmask.to(scores.device, non_blocking=True))
        return scores

    def _compile(self, vocab_size: int) -> Grammar:
        source = self.grammar_source
        if isinstance(source, Grammar):
            if source.vocab_size != vocab_size:
                raise RequestError(
                    f"the grammar was compiled for {source.vocab_size} logits, the model has "
                    f"{vocab_size}"
                )
            return source
        return source.compile_fn(vocabulary_of(self.tokenizer, vocab_size, self.eos_token_ids))

    def _matcher_after(self, key: tuple[int, ...]) -> Matcher:
        """The matcher after the generated tokens ``key``, from the longest known prefix."""
        assert self.grammar is not None
        start = len(key)
        while start > 0 and key[:start] not in self._matchers:
            start -= 1
        base = self._matchers.get(key[:start])
        matcher = base.fork() if base is not None else self.grammar.matcher()
        for position in range(start, len(key)):
            if matcher.is_terminated():
                break  # padding after the end: generate fills it, the grammar is done
            if not matcher.accept_token(key[position]):
                raise RequestError(
                    f"generated token {key[position]} at output position {position} is not "
                    f"allowed by the grammar {self.grammar_source}; use a new "
                    "GrammarLogitsProcessor for each generate call"
                )
        return matcher


def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt: str | Sequence[str],
    schema: Any = None,
    *,
    grammar: GrammarLike | None = None,
    chat: bool = True,
    max_new_tokens: int = 256,
    **generate_kwargs: Any,
) -> str | list[str]:
    """Generate text that follows a JSON schema (or any formcast grammar) with ``model.generate``.

    Parameters
    ----------
    model, tokenizer
        A transformers causal LM and its fast tokenizer.
    prompt : str | Sequence[str]
        One prompt (returns one string) or several (returns a list, batched with left
        padding); with ``num_return_sequences=k`` a list of ``k`` outputs per prompt.
    schema : dict | type | None
        A JSON schema, a pydantic model or a Python type; exactly one of ``schema`` and
        ``grammar``.
    grammar : Grammar | GrammarSpec | dict | None
        Any other formcast grammar (``{"regex": ...}``, ``{"choice": [...]}``, ...).
    chat : bool
        Wrap each prompt as a user message with the tokenizer's chat template.
    max_new_tokens : int
        Token budget per output; an output cut by it may be incomplete.
    **generate_kwargs
        Passed to ``model.generate`` (``do_sample``, ``num_beams``, ``temperature``, ...).

    Examples
    --------
    >>> text = generate(model, tokenizer, "A user named Ada, 36.", {"type": "object", ...})
    """
    if (schema is None) == (grammar is None):
        raise RequestError("pass exactly one of schema= and grammar=")
    spec = GrammarSpec.json_schema(schema) if schema is not None else grammar
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    if chat:
        prompts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
            for text in prompts
        ]
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        inputs = tokenizer(prompts, return_tensors="pt", padding=len(prompts) > 1)
    finally:
        tokenizer.padding_side = padding_side
    inputs = inputs.to(model.device)
    eos = model.generation_config.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [tokenizer.eos_token_id])
    processor = GrammarLogitsProcessor(spec, tokenizer, eos_token_ids=eos_ids)
    output_ids = model.generate(
        **inputs,
        logits_processor=LogitsProcessorList([processor]),
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0],
        **generate_kwargs,
    )
    new_ids = output_ids[:, inputs["input_ids"].shape[1] :]
    texts = tokenizer.batch_decode(new_ids, skip_special_tokens=True)
    return texts[0] if isinstance(prompt, str) and len(texts) == 1 else texts
