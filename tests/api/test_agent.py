"""Agent and Tool: every action is a valid tool call or a typed final answer; the loop stops at
the answer or the step limit; transcripts hold what happened; misuse is refused early."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

import formcast
from formcast.agent_tool import Tool


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shout(word: str, times: int = 1) -> str:
    """Repeat a word in capitals."""
    return " ".join([word.upper()] * times)


def fail(reason: Literal["disk", "network"]) -> str:
    """Always fails."""
    raise RuntimeError(f"{reason} is down")


class Verdict(BaseModel):
    value: int = Field(ge=-1000, le=1000)


def test_run_produces_valid_calls_and_a_typed_answer(model):
    agent = formcast.Agent(
        model, [add, shout], answer_type=Verdict, max_steps=2, temperature=0, max_tokens=40
    )
    result = agent.run("What is 2 + 3?")
    assert result.stop_reason == "final_answer"  # the last step is forced to answer
    assert isinstance(result.answer, Verdict)
    assert result.steps[-1].kind == "final_answer" and result.steps[-1].answer == result.answer
    for step in result.tool_calls:
        tool = agent.tools[step.tool]
        tool.arguments_model.model_validate(step.arguments)  # arguments always validate
        assert step.observation == str(tool.invoke(step.arguments))
    # the chat holds system, task, then one assistant message per step (+ observations)
    assert [m["role"] for m in result.messages[:2]] == ["system", "user"]
    assert sum(m["role"] == "assistant" for m in result.messages) == len(result.steps)
    assert "[1]" in result.transcript()


def test_step_limit_without_forcing(model):
    agent = formcast.Agent(
        model, [add], max_steps=1, force_final_answer=False, temperature=0, max_tokens=40
    )
    result = agent.run("Add 1 and 2 with the tool.")
    assert result.stop_reason in ("final_answer", "max_steps")
    if result.stop_reason == "max_steps":
        assert result.answer is None and result.steps[0].kind == "tool"
    else:
        assert isinstance(result.answer, str)


def test_tool_schema_invoke_and_errors():
    tool = Tool(shout)
    schema = tool.arguments_schema()
    assert schema["required"] == ["word"] and schema["properties"]["times"]["default"] == 1
    assert tool.invoke({"word": "hi", "times": 2}) == "HI HI"
    assert tool.render() == "shout(word: str, times: int = 1): Repeat a word in capitals."
    with pytest.raises(Exception, match="times"):
        tool.invoke({"word": "hi", "times": "many"})
    assert Tool(fail).observe({"reason": "disk"}) == ("error: RuntimeError: disk is down", True)
    observation, is_error = Tool(add).observe({"a": 1})
    assert is_error and observation.startswith("error: ValidationError") and "b" in observation
    assert Tool(add).observe({"a": 1, "b": 2}) == ("3", False)


def test_misuse_is_refused(model):
    def untyped(x):
        return x

    def star(*args: int) -> int:
        return 0

    with pytest.raises(formcast.UsageError, match="parameter 'x' has no type annotation"):
        formcast.Agent(model, [untyped])
    with pytest.raises(formcast.UsageError, match=r"\*args parameters"):
        formcast.Agent(model, [star])
    with pytest.raises(formcast.UsageError, match="two tools are named 'add'"):
        formcast.Agent(model, [add, Tool(shout, name="add")])
    with pytest.raises(formcast.UsageError, match="max_steps=0"):
        formcast.Agent(model, [add], max_steps=0)
    with pytest.raises(formcast.UsageError, match="list of functions"):
        formcast.Agent(model, add)


def test_parallel_actions_are_distinct_calls_run_together(model):
    """The action grammar accepts several distinct calls in one action and never the same
    call twice (uniqueItems); a run executes every call of an action and answers them in one
    message."""
    agent = formcast.Agent(
        model, [add, shout], answer_type=Verdict, parallel_tool_calls=True, max_parallel_calls=3,
        max_steps=2, temperature=0, max_tokens=96,
    )  # fmt: skip
    grammar = agent.action.grammar

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return matcher.accept_bytes(text.encode()) and matcher.is_accepting()

    one = '{"tool":"add","arguments":{"a":1,"b":2}}'
    other = '{"tool":"shout","arguments":{"word":"hi","times":2}}'
    assert accepts(f'{{"tool_calls":[{one},{other}]}}')
    assert accepts(f'{{"tool_calls":[{one}]}}')
    assert not accepts(f'{{"tool_calls":[{one},{one}]}}')  # the same call twice
    assert not accepts(f'{{"tool_calls":[{one},{other},{one.replace("1", "5")},{one}]}}')
    assert not accepts('{"tool_calls":[]}')
    result = agent.run("Add 2 and 3, and shout the word go.")
    for step in result.tool_calls:
        assert step.tool in ("add", "shout") and not step.is_error
    by_action: dict[int, list] = {}
    for step in result.tool_calls:
        by_action.setdefault(step.index, []).append(step)
    for index, steps in by_action.items():
        reply = result.messages[2 * index + 1]["content"]  # after the action's assistant message
        assert reply.count("Result of") == len(steps)
    with pytest.raises(formcast.UsageError, match="max_parallel_calls"):
        formcast.Agent(model, [add], parallel_tool_calls=True, max_parallel_calls=1)
