"""Agent: a tool-using loop whose every action is constrained to a valid tool call or answer.

Each turn the model writes one JSON action, constrained to the union (``anyOf``) of

- ``{"tool": "<name>", "arguments": {...}}`` for every tool, arguments per its signature, and
- ``{"final_answer": <answer_type>}``, and with ``parallel_tool_calls=True``
- ``{"tool_calls": [<call>, ...]}``: several distinct calls at once (``uniqueItems``: never
  the same call twice), run concurrently (threads) and answered in one message,

so a call can never name a missing tool or carry malformed arguments. The loop runs the tool,
sends the result back as the next user message, and stops at a final answer; on the last
allowed step the action is constrained to the final answer alone (unless
``force_final_answer=False``, which stops with ``stop_reason="max_steps"``). Every step is
kept in `AgentResult.steps` and the full chat in `AgentResult.messages`.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from formcast.agent_tool import Tool
from formcast.errors import UsageError
from formcast.json_generator import JsonGenerator
from formcast.model import Model

DEFAULT_OBSERVATION = (
    "Result of {tool}: {observation}\nIf this answers the task, reply with the final_answer; "
    "otherwise call another tool."
)
DEFAULT_SYSTEM = (
    "You solve the user's task step by step using tools. Each reply is one JSON action: "
    '{"tool": <name>, "arguments": {...}} to call a tool, or {"final_answer": ...} '
    "once you know the answer. Tools:\n{tools}"
)


@dataclass
class AgentStep:
    """One action of the agent and what came of it.

    ``kind`` is ``"tool"`` (then ``tool``, ``arguments``, ``observation`` are set, and
    ``is_error`` tells whether the tool raised) or ``"final_answer"`` (then ``answer``).
    ``text`` is the raw JSON the model wrote.
    """

    index: int
    kind: str
    text: str
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    observation: str | None = None
    is_error: bool = False
    answer: Any = None

    def __str__(self) -> str:
        if self.kind == "final_answer":
            return f"[{self.index}] final answer: {self.answer!r}"
        args = json.dumps(self.arguments, ensure_ascii=False)
        return f"[{self.index}] {self.tool}({args}) -> {self.observation}"


@dataclass
class AgentResult:
    """The outcome of `Agent.run`.

    ``answer`` is the final answer (of the agent's ``answer_type``), or None when the step
    limit stopped the run (``stop_reason`` is ``"final_answer"`` or ``"max_steps"``).
    """

    answer: Any
    stop_reason: str
    steps: list[AgentStep] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)

    @property
    def tool_calls(self) -> list[AgentStep]:
        """The steps that called a tool."""
        return [step for step in self.steps if step.kind == "tool"]

    def transcript(self) -> str:
        """The steps, one per line."""
        return "\n".join(str(step) for step in self.steps)


def _create_model(name: str, **fields: Any) -> Any:
    from pydantic import create_model

    return create_model(name, **fields)


class Agent:
    """A tool-using agent (see the module docstring).

    Parameters
    ----------
    model : Model
    tools : sequence of callables or `Tool`
        Typed Python functions (every parameter annotated).
    answer_type : type
        Type of the final answer (default ``str``): any type `formcast.json` accepts.
    system : str, optional
        System prompt; ``{tools}`` in it is replaced by one line per tool.
    max_steps : int
        Most actions (tool calls plus the final answer).
    force_final_answer : bool
        Constrain the last allowed action to the final answer (default True).
    parallel_tool_calls : bool
        Let one action call several tools (``{"tool_calls": [...]}``, at most
        ``max_parallel_calls``), run concurrently.
    max_parallel_calls : int
        Most calls in one parallel action.
    **sampling
        Sampling options for every action (``temperature``, ``max_tokens``, ...).

    Examples
    --------
    >>> def add(a: float, b: float) -> float:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> agent = formcast.Agent(model, [add], temperature=0, max_tokens=48)
    >>> result = agent.run("What is 2 + 3?")
    >>> result.answer, result.transcript()
    """

    def __init__(
        self,
        model: Model,
        tools: Sequence[Callable[..., Any] | Tool],
        *,
        answer_type: Any = str,
        system: str | None = None,
        max_steps: int = 6,
        force_final_answer: bool = True,
        parallel_tool_calls: bool = False,
        max_parallel_calls: int = 8,
        **sampling: Any,
    ) -> None:
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
            raise UsageError(f"Agent tools must be a list of functions, got {type(tools).__name__}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise UsageError(f"Agent max_steps={max_steps!r} must be an int >= 1")
        self.tools = {}
        for item in tools:
            tool = item if isinstance(item, Tool) else Tool(item)
            if tool.name in self.tools:
                raise UsageError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.max_steps = max_steps
        self.observation_template = DEFAULT_OBSERVATION
        self.force_final_answer = force_final_answer
        self.answer_type = answer_type
        tool_lines = "\n".join(f"- {tool.render()}" for tool in self.tools.values())
        template = DEFAULT_SYSTEM if system is None else system
        if system is None and parallel_tool_calls:
            template += '\nTo call several tools at once, reply {"tool_calls": [<action>, ...]}.'
        self.system = template.replace("{tools}", tool_lines)
        final = _create_model("FinalAnswer", final_answer=(answer_type, ...))
        calls = [
            _create_model(
                f"{tool.arguments_model.__name__.removesuffix('Arguments')}Call",
                tool=(typing.Literal[tool.name], ...),
                arguments=(tool.arguments_model, ...),
            )
            for tool in self.tools.values()
        ]
        self._final_model = final
        self.parallel_tool_calls = parallel_tool_calls
        options = [*calls, final]
        if parallel_tool_calls:
            if not isinstance(max_parallel_calls, int) or max_parallel_calls < 2:
                raise UsageError(f"Agent max_parallel_calls={max_parallel_calls!r} must be >= 2")
            from pydantic import Field

            one_call = typing.Union[tuple(calls)] if len(calls) > 1 else calls[0]  # noqa: UP007
            many = list[one_call]  # type: ignore[valid-type]
            self._parallel_model = _create_model(
                "ParallelCalls",
                # uniqueItems: the grammar never repeats a call (same tool, same arguments)
                tool_calls=(
                    many,
                    Field(
                        min_length=1,
                        max_length=max_parallel_calls,
                        json_schema_extra={"uniqueItems": True},
                    ),
                ),
            )
            options.append(self._parallel_model)
        action_type = typing.Union[tuple(options)]  # noqa: UP007 (built at run time)
        self.action = JsonGenerator(model, action_type, **sampling)
        self.final_action = JsonGenerator(model, final, **sampling)

    def run(self, task: str | list[dict[str, str]]) -> AgentResult:
        """Solve ``task`` (a string, or chat messages to continue); return the result.

        Raises
        ------
        IncompleteOutputError
            An action was cut by ``max_tokens`` (raise it, or bound the answer type).
        """
        if isinstance(task, str):
            messages = [
                {"role": "system", "content": self.system},
                {"role": "user", "content": task},
            ]
        else:
            messages = [dict(m) for m in task]
        steps: list[AgentStep] = []
        for index in range(1, self.max_steps + 1):
            is_last = index == self.max_steps
            generator = self.final_action if is_last and self.force_final_answer else self.action
            completion = generator.complete(messages)
            action, text = completion.value, completion.text
            messages.append({"role": "assistant", "content": text})
            if isinstance(action, self._final_model):
                steps.append(AgentStep(index, "final_answer", text, answer=action.final_answer))
                return AgentResult(action.final_answer, "final_answer", steps, messages)
            if self.parallel_tool_calls and isinstance(action, self._parallel_model):
                requested = [(c.tool, c.arguments.model_dump()) for c in action.tool_calls]
            else:
                requested = [(action.tool, action.arguments.model_dump())]
            with ThreadPoolExecutor(max_workers=len(requested)) as pool:
                futures = [
                    pool.submit(self._call_tool, index, text, name, arguments)
                    for name, arguments in requested
                ]
                new_steps = [future.result() for future in futures]
            steps.extend(new_steps)
            results = "\n".join(f"Result of {s.tool}: {s.observation}" for s in new_steps)
            messages.append({"role": "user", "content": results})
        return AgentResult(None, "max_steps", steps, messages)

    def _call_tool(self, index: int, text: str, name: str, arguments: dict[str, Any]) -> AgentStep:
        observation, is_error = self.tools[name].observe(arguments)
        return AgentStep(index, "tool", text, name, arguments, observation, is_error)

    def __repr__(self) -> str:
        return f"Agent(tools={list(self.tools)}, max_steps={self.max_steps})"
