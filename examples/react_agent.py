"""A ReAct agent whose Thought / Action / Observation format is a Lark grammar.

Each model turn must match ``REACT_GRAMMAR``: one ``Thought:`` line, then either
``Action: <tool>[<argument>]`` naming a known tool or ``Final Answer: ...``. The program runs
the tool and appends an ``Observation:`` line; the grammar makes every turn parseable.

Run: ``python examples/react_agent.py``
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import formcast

REACT_GRAMMAR = r"""
start: "Thought: " THOUGHT "\nAction: " action
action: calculator | lookup | final
calculator: "calculator[" EXPRESSION "]"
lookup: "lookup[" TOPIC "]"
final: "Final Answer: " ANSWER
THOUGHT: /[^\n]{1,60}/
EXPRESSION: /[0-9+\-*\/(). ]{1,30}/
TOPIC: "paris" | "python"
ANSWER: /[^\n]{1,60}/
"""

FACTS = {
    "paris": "Paris is the capital of France, with about 2.1 million inhabitants.",
    "python": "Python is a programming language created by Guido van Rossum in 1991.",
}

SYSTEM = (
    "Answer the question. Each reply is a 'Thought:' line, then an 'Action:' line: either "
    "calculator[expression], lookup[topic] (topics: paris, python), or "
    "'Final Answer: <answer>'. Example:\nThought: I need to compute 2 + 2\n"
    "Action: calculator[2 + 2]"
)
_TURN = re.compile(r"Thought: (.*)\nAction: (?:(calculator|lookup)\[(.*)\]|Final Answer: (.*))")


def calculator(expression: str) -> str:
    # the grammar admits only digits, spaces and + - * / ( ) . here
    try:
        return str(eval(expression, {"__builtins__": {}}))
    except (SyntaxError, ZeroDivisionError) as exc:
        return f"error: {exc}"


def lookup(topic: str) -> str:
    return FACTS[topic]  # the grammar admits only known topics


@dataclass
class ReactTrace:
    """The turns of one run and the final answer (None if the step limit was reached)."""

    answer: str | None
    turns: list[str] = field(default_factory=list)


def main(
    model: formcast.Model | None = None,
    question: str = "What is 12 * 7?",
    max_steps: int = 3,
    max_tokens: int = 64,
) -> ReactTrace:
    model = model or formcast.load()
    step = formcast.cfg(model, REACT_GRAMMAR, temperature=0, max_tokens=max_tokens)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    trace = ReactTrace(answer=None)
    for _ in range(max_steps):
        turn = step(messages)
        trace.turns.append(turn)
        print(turn)
        thought, tool, argument, answer = _TURN.fullmatch(turn).groups()  # always matches
        messages.append({"role": "assistant", "content": turn})
        if answer is not None:
            trace.answer = answer
            break
        observation = calculator(argument) if tool == "calculator" else lookup(argument)
        print(f"Observation: {observation}")
        messages.append({"role": "user", "content": f"Observation: {observation}"})
    return trace


if __name__ == "__main__":
    main()
