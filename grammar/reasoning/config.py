"""ReasoningConfig: where a model's free reasoning starts and ends, and its token budget.

Reasoning models (Qwen3, DeepSeek-R1, SmolLM3, gpt-oss style templates) write their thoughts
between two tags and then the answer. formcast lets the thoughts run free and constrains only
the answer; ``max_tokens`` bounds the thoughts: once that many tokens were sampled inside them,
the end tag is forced (jump-forward) and the answer begins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formcast.errors import GrammarError

# OpenAI's ``reasoning_effort`` levels -> a thinking budget in tokens ("none": the block is
# closed at once). vLLM and SGLang leave the mapping to the model; these are formcast's.
EFFORT_BUDGETS: dict[str, int] = {
    "none": 0,
    "minimal": 64,
    "low": 512,
    "medium": 2048,
    "high": 8192,
}


@dataclass(frozen=True)
class ReasoningConfig:
    """Free reasoning before the constrained answer.

    Parameters
    ----------
    start : str
        The tag that opens the reasoning; the output must begin with it. ``""`` when the
        prompt already opened it (a chat template that ends the generation prompt with
        ``<think>``): the output then starts inside the reasoning.
    end : str
        The tag that closes it; its first occurrence ends the reasoning and the answer follows
        right after it.
    max_tokens : int, optional
        The most tokens sampled inside the reasoning (those holding bytes after the start tag;
        text written by jump-forward is not counted); then the rest of the end tag is forced.
        None: no budget.

    Examples
    --------
    >>> formcast.json(model, Person, reasoning=ReasoningConfig(max_tokens=256))
    """

    start: str = "<think>"
    end: str = "</think>"
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.start, str) or not isinstance(self.end, str):
            raise GrammarError("reasoning start and end tags must be strings")
        if not self.end:
            raise GrammarError("the reasoning end tag must not be empty (it ends the reasoning)")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 0
        ):
            raise GrammarError(
                f"reasoning max_tokens must be a non-negative integer or None, got "
                f"{self.max_tokens!r}"
            )

    @classmethod
    def of(cls, value: Any) -> ReasoningConfig | None:
        """Read ``reasoning=``: None / False (off), True (``<think>`` ... ``</think>``), a
        config, or a dict of its fields.

        Raises
        ------
        GrammarError
            For any other value or an unknown field (names it).
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"start", "end", "max_tokens"})
            if unknown:
                raise GrammarError(
                    f"unknown reasoning option(s) {unknown}: expected start, end, max_tokens"
                )
            return cls(**value)
        raise GrammarError(
            f"reasoning= expects True, a ReasoningConfig or a dict, got {type(value).__name__}"
        )

    def with_budget(self, max_tokens: int | None) -> ReasoningConfig:
        """The same tags with another budget."""
        return ReasoningConfig(self.start, self.end, max_tokens)

    def split(self, text: str) -> tuple[str, str]:
        """``(reasoning, answer)`` of a whole generated text: the thoughts without their tags
        and everything after the first end tag (see `ReasoningSplitter`: a text that does not
        begin with the start tag did not think; one whose end tag never came is all thoughts).
        """
        from formcast.grammar.reasoning.splitter import ReasoningSplitter

        splitter = ReasoningSplitter(self)
        thoughts, answer = splitter.feed(text)
        return thoughts + splitter.finish(), answer

    def to_json(self) -> dict[str, Any]:
        """The fields as plain data (request recipes, cache keys)."""
        return {"start": self.start, "end": self.end, "max_tokens": self.max_tokens}


def effort_budget(effort: str) -> int:
    """The thinking budget of an OpenAI ``reasoning_effort`` level.

    Raises
    ------
    GrammarError
        For a level not in `EFFORT_BUDGETS` (names the levels).
    """
    found = EFFORT_BUDGETS.get(effort)
    if found is None:
        raise GrammarError(
            f"unknown reasoning_effort {effort!r}: expected one of {sorted(EFFORT_BUDGETS)}"
        )
    return found
