"""Reasoning in chat completions: which requests think, under which budget, and with which
grammar (the output splits into ``reasoning_content`` and ``content`` by
:class:`~formcast.grammar.reasoning.ReasoningSplitter`, whole or delta by delta).

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
    return GrammarSpec.reasoning(answer, config)
