"""Every example runs on the real model (short limits) and returns values of its declared type."""

from __future__ import annotations

import re

import lark
import pytest
from example_loader import EXAMPLES, load_example

import formcast


def test_extraction(model):
    example = load_example("extraction")
    people = example.main(model)
    assert len(people) == len(example.TEXTS)
    assert all(isinstance(p, example.Person) for p in people)


def test_classification(model):
    example = load_example("classification")
    labels = example.main(model)
    assert len(labels) == len(example.REVIEWS)
    assert all(isinstance(label, example.Sentiment) for label in labels)


def test_streaming(model, capsys):
    example = load_example("streaming")
    recipe = example.main(model)
    assert isinstance(recipe, example.Recipe)
    assert 1 <= len(recipe.ingredients) <= 3
    assert repr(recipe) in capsys.readouterr().out


def test_tool_agent(model):
    example = load_example("tool_agent")
    results = example.main(model, tasks=["What is 17 * 23?"], max_steps=2)
    (result,) = results
    assert isinstance(result, formcast.AgentResult)
    assert isinstance(result.answer, example.Answer)  # the last step is forced to answer
    for step in result.tool_calls:
        assert step.tool in ("calculator", "convert_units", "lookup")
        if step.tool == "calculator":
            assert re.fullmatch(r"[0-9+\-*/(). ]{1,30}", step.arguments["expression"])
        if step.tool == "lookup":
            assert step.arguments["topic"] in example.KNOWLEDGE_BASE


def test_react_agent(model):
    example = load_example("react_agent")
    trace = example.main(model, max_steps=2)
    assert isinstance(trace, example.ReactTrace) and 1 <= len(trace.turns) <= 2
    parser = lark.Lark(example.REACT_GRAMMAR)  # the oracle for every turn
    for turn in trace.turns:
        parser.parse(turn)
    assert trace.answer is None or isinstance(trace.answer, str)


def test_demo_runs_extraction_and_classification(model, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # demo.py imports its sibling examples
    monkeypatch.setattr(formcast, "load", lambda *args, **kwargs: model)
    load_example("demo").main()
    out = capsys.readouterr().out
    assert "== extraction" in out and "Person(name=" in out and "== classification" in out


@pytest.mark.parametrize(
    "name",
    ["extraction", "classification", "streaming", "tool_agent", "reasoning", "parallel_tools"],
)
def test_examples_need_no_path_hacks(name):
    source = (EXAMPLES / f"{name}.py").read_text()
    assert "sys.path" not in source and 'if __name__ == "__main__":' in source


def test_reasoning_example(model):
    example = load_example("reasoning")
    results = example.main(model, max_thought_tokens=12)
    assert len(results) == len(example.QUESTIONS)
    for result in results:
        assert isinstance(result, formcast.Reasoned)
        assert isinstance(result.value, example.Answer) and isinstance(result.reasoning, str)


def test_parallel_tools_example(model):
    example = load_example("parallel_tools")
    (result,) = example.main(model, max_steps=2)
    assert isinstance(result, formcast.AgentResult)
    calls = [
        (step.index, step.tool, tuple(sorted(step.arguments.items()))) for step in result.tool_calls
    ]
    assert len(calls) == len(set(calls))  # no call repeated inside an action
    for step in result.tool_calls:
        assert step.tool in ("get_weather", "local_hour") and not step.is_error
