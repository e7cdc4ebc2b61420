"""``reasoning=`` on every call kind, on the real model: free thoughts between the tags, the
budget honoured to the token, then an answer checked by an independent oracle (jsonschema,
re.fullmatch, the option list)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from pydantic import BaseModel, Field

import formcast
from formcast.errors import GrammarError, UsageError
from formcast.generator import Reasoned
from formcast.grammar.reasoning import ReasoningConfig

GREEDY = {"temperature": 0}


class City(BaseModel):
    name: str = Field(max_length=16)
    population: int = Field(ge=0, le=99_999_999)


def _thought_tokens(model, completion, config: ReasoningConfig) -> int:
    """How many of the completion's tokens hold a byte strictly between the tags."""
    data = completion.text.encode()
    lo = len(config.start.encode())
    hi = lo + data[lo:].find(config.end.encode())
    count, offset = 0, 0
    for token_id in completion.token_ids:
        size = len(model.vocab.token_bytes[token_id])
        if max(offset, lo) < min(offset + size, hi):
            count += 1
        offset += size
    return count


@pytest.mark.parametrize("budget", [0, 6, 20])
def test_json_thinks_within_budget_then_answers(model, budget):
    config = ReasoningConfig(max_tokens=budget)
    generator = formcast.json(model, City, reasoning=config, max_tokens=80, **GREEDY)
    completion = generator.complete("Think about Paris, then describe it as JSON.")
    result = completion.value
    assert isinstance(result, Reasoned) and isinstance(result.value, City)
    assert completion.text.startswith("<think>")
    thoughts, answer = config.split(completion.text)
    assert result.reasoning == thoughts
    jsonschema.validate(json.loads(answer), City.model_json_schema())
    assert _thought_tokens(model, completion, config) <= budget
    if budget == 0:
        assert thoughts == ""


def test_every_call_kind_takes_reasoning(model):
    config = {"max_tokens": 5}
    picked = formcast.choice(model, ["yes", "no"], reasoning=config, **GREEDY)("Is ice cold?")
    assert isinstance(picked, Reasoned) and picked.value in ("yes", "no")
    code = formcast.regex(model, r"[A-Z]{3}-[0-9]{2}", reasoning=config, **GREEDY)("A code:")
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{2}", code.value)
    free = formcast.text(model, reasoning=config, max_tokens=24, **GREEDY).complete("Hi")
    assert free.text.startswith("<think>") and "</think>" in free.text
    lark = formcast.cfg(model, 'start: "a" | "b"', reasoning=config, **GREEDY)("a or b?")
    assert lark.value in ("a", "b")


def test_function_decorator_takes_reasoning(model):
    @formcast.function(model, reasoning=ReasoningConfig(max_tokens=4), **GREEDY)
    def capital(country: str) -> City:
        """The capital of {country} and its population, as JSON."""

    result = capital("France")
    assert isinstance(result, Reasoned) and isinstance(result.value, City)


def test_stream_partial_shows_only_the_answer(model):
    generator = formcast.json(model, City, reasoning={"max_tokens": 8}, max_tokens=80, **GREEDY)
    snapshots = list(generator.stream_partial("Describe Lima as JSON."))
    assert snapshots and all(isinstance(s, dict) for s in snapshots)
    assert generator.validate(snapshots[-1]).name


def test_prompt_opened_reasoning(model):
    """``start=""``: the template already opened the block; the output starts thinking."""
    config = ReasoningConfig(start="", max_tokens=3)
    completion = formcast.regex(model, "(yes|no)", reasoning=config, **GREEDY).complete(
        "Is water wet? <think>"
    )
    assert not completion.text.startswith("<think>")
    assert re.fullmatch(r"[\s\S]*</think>(yes|no)", completion.text)


def test_bad_reasoning_options_are_refused(model):
    with pytest.raises(GrammarError, match="unknown reasoning option"):
        formcast.json(model, City, reasoning={"tokens": 3})
    with pytest.raises(UsageError, match="method='sample'"):
        formcast.choice(model, ["a", "b"], method="score", reasoning=True)
