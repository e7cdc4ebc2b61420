"""A tool-using agent: calculator, unit conversion and a small local knowledge base.

Every action the model writes is constrained to one of the tools' call schemas (or the final
answer), so a call can never name a missing tool, a unit we do not know, or a topic that is
not in the knowledge base. The transcript shows what happened.

Run: ``python examples/tool_agent.py``
"""

from __future__ import annotations

import ast
import operator
from typing import Annotated, Literal

from pydantic import BaseModel, Field

import formcast

KNOWLEDGE_BASE = {
    "eiffel tower": "The Eiffel Tower in Paris is 330 metres tall and opened in 1889.",
    "mount everest": "Mount Everest is 8849 metres high, on the Nepal-China border.",
    "great wall": "The Great Wall of China is about 21196 kilometres long.",
}
_TO_METRES = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.344}
_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.dump(node)}")


def calculator(expression: Annotated[str, Field(pattern=r"^[0-9+\-*/(). ]{1,30}$")]) -> float:
    """Evaluate an arithmetic expression such as 3 * (4 + 5)."""
    return _evaluate(ast.parse(expression, mode="eval").body)


def convert_units(
    value: float, from_unit: Literal["m", "km", "ft", "mi"], to_unit: Literal["m", "km", "ft", "mi"]
) -> float:
    """Convert a length between metres, kilometres, feet and miles."""
    return round(value * _TO_METRES[from_unit] / _TO_METRES[to_unit], 3)


def lookup(topic: Literal["eiffel tower", "mount everest", "great wall"]) -> str:
    """Look a landmark up in the knowledge base."""
    return KNOWLEDGE_BASE[topic]


class Answer(BaseModel):
    text: str = Field(max_length=80)


TASKS = [
    "How tall is the Eiffel Tower in feet?",
    "What is 17 * 23?",
]


def main(
    model: formcast.Model | None = None, tasks: list[str] = TASKS, max_steps: int = 4
) -> list[formcast.AgentResult]:
    model = model or formcast.load()
    agent = formcast.Agent(
        model,
        [calculator, convert_units, lookup],
        answer_type=Answer,
        max_steps=max_steps,
        temperature=0,
        max_tokens=64,
    )
    results = []
    for task in tasks:
        result = agent.run(task)
        print(f"task: {task}\n{result.transcript()}\n")
        results.append(result)
    return results


if __name__ == "__main__":
    main()
