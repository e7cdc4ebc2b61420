"""Reasoning in chat completions: which requests think, under which budget, and how the output
splits into ``reasoning_content`` and ``content`` (whole, or delta by delta when streaming).

The server thinks when it was started with reasoning tags (``--reasoning-tags``, or found in
the chat template: ``"auto"``) and the request does not turn it off
(``chat_template_kwargs={"enable_thinking": false}``, passed to the template as well). The
budget is ``max_reasoning_tokens``, else the one of ``reasoning_effort`` (`EFFORT_BUDGETS`).
With a budget or an output grammar (``response_format``, tools, ``regex``...) the output is
constrained by a `ReasoningGrammar` (the thoughts free, the grammar after the end tag);
without either, the output is only split. When the rendered prompt already ends with the
start tag (templates that open the block), the output starts inside the thoughts.
"""

from __future__ import annotations

from typing import Any

from formcast.grammar.reasoning import ReasoningConfig, effort_budget
from formcast.grammar.spec import GrammarSpec
from formcast.server.errors import bad_request

# the answer grammar of a budgeted request without one: any text
_ANY_TEXT = r"[\s\S]*"


def server_reasoning(tags: str | None, chat_template: str | None) -> ReasoningConfig | None:
    """The server's reasoning tags: ``"auto"`` (``<think>``/``</think>`` when the chat
    template mentions both), ``"none"``/None (off) or ``"START,END"``.

    Raises
    ------
    ValueError
        A malformed ``tags`` value.
    """
    if tags is None or tags == "none":
        return None
    if tags == "auto":
        template = chat_template or ""
        return ReasoningConfig() if "<think>" in template and "</think>" in template else None
    start, sep, end = tags.partition(",")
    if not sep or not end:
        raise ValueError(f"reasoning tags must be 'auto', 'none' or 'START,END', got {tags!r}")
    return ReasoningConfig(start=start, end=end)


def request_reasoning(
    server: ReasoningConfig | None,
    reasoning_effort: str | None,
    max_reasoning_tokens: int | None,
    chat_template_kwargs: dict[str, Any] | None,
) -> tuple[ReasoningConfig | None, bool]:
    """``(config, has_budget)`` of one request; config None: the request does not think.

    Raises
    ------
    APIError
        A budget asked of a server without reasoning tags, an unknown effort, a negative
        budget.
    """
    has_budget = reasoning_effort is not None or max_reasoning_tokens is not None
    if server is None:
        if has_budget:
            param = (
                "max_reasoning_tokens" if max_reasoning_tokens is not None else "reasoning_effort"
            )
            raise bad_request(
                f"'{param}' needs a reasoning model: start the server with --reasoning-tags "
                "(e.g. '<think>,</think>') or a chat template that has them",
                param=param,
            )
        return None, False
    if (chat_template_kwargs or {}).get("enable_thinking") is False:
        return None, False
    budget = None
    if max_reasoning_tokens is not None:
        if max_reasoning_tokens < 0:
            raise bad_request(
                f"max_reasoning_tokens must be >= 0, got {max_reasoning_tokens}",
                param="max_reasoning_tokens",
            )
        budget = max_reasoning_tokens
    elif reasoning_effort is not None:
        try:
            budget = effort_budget(reasoning_effort)
        except ValueError as exc:
            raise bad_request(str(exc), param="reasoning_effort") from exc
    return server.with_budget(budget), has_budget


def opened_by_prompt(config: ReasoningConfig, prompt_text: str) -> ReasoningConfig:
    """``config`` with no start tag when the rendered prompt already opened the block."""
    if config.start and prompt_text.rstrip().endswith(config.start):
        return ReasoningConfig(start="", end=config.end, max_tokens=config.max_tokens)
    return config


def reasoning_spec(
    config: ReasoningConfig, answer: GrammarSpec | None, has_budget: bool
) -> GrammarSpec | None:
    """The output grammar: thoughts then ``answer`` when there is an answer grammar or a
    budget to enforce; None (free text, only split) otherwise."""
    if answer is None and not has_budget:
        return None
    return GrammarSpec.reasoning(answer or GrammarSpec.regex(_ANY_TEXT), config)


class ReasoningSplitter:
    """Splits a streamed output into reasoning and answer pieces as it arrives.

    The start tag is dropped (an output that does not begin with it did not think: all of it
    is answer); a piece that may be the beginning of the end tag is held back until the next
    text shows whether it is. Everything after the end tag is answer.
    """

    def __init__(self, config: ReasoningConfig) -> None:
        self.config = config
        self._pending = ""  # text not yet handed out (a possible start of a tag)
        self._phase = "start" if config.start else "thinking"

    @property
    def is_answering(self) -> bool:
        """True once the end tag was seen."""
        return self._phase == "answer"

    def feed(self, text: str) -> tuple[str, str]:
        """``(reasoning piece, answer piece)`` that ``text`` completes."""
        if self._phase == "answer":
            return "", text
        self._pending += text
        if self._phase == "start":
            start = self.config.start
            if len(self._pending) < len(start) and start.startswith(self._pending):
                return "", ""
            if not self._pending.startswith(start):  # the model did not think: all answer
                answer, self._pending = self._pending, ""
                self._phase = "answer"
                return "", answer
            self._pending = self._pending[len(start) :]
            self._phase = "thinking"
        end = self.config.end
        cut = self._pending.find(end)
        if cut >= 0:
            thoughts, answer = self._pending[:cut], self._pending[cut + len(end) :]
            self._pending = ""
            self._phase = "answer"
            return thoughts, answer
        keep = next(
            (k for k in range(min(len(end) - 1, len(self._pending)), 0, -1)
             if self._pending.endswith(end[:k])),
            0,
        )  # fmt: skip
        thoughts = self._pending[: len(self._pending) - keep]
        self._pending = self._pending[len(thoughts) :]
        return thoughts, ""

    def finish(self) -> str:
        """The reasoning held back at the end of the output (a cut end tag)."""
        rest, self._pending = self._pending, ""
        return rest if self._phase != "answer" else ""


def split_message(config: ReasoningConfig, text: str) -> tuple[str, str]:
    """``(reasoning_content, content)`` of a whole output."""
    splitter = ReasoningSplitter(config)
    thoughts, answer = splitter.feed(text)
    thoughts += splitter.finish()
    return thoughts, answer
