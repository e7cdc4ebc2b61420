"""Think first, then answer in a schema: free reasoning between <think> tags (bounded in
tokens), then JSON that always validates.

The thoughts are not constrained at all; the answer after ``</think>`` is. With a budget the
end tag is forced once the model has thought for that many tokens, so a model that would
ramble still answers. Calls return ``formcast.Reasoned``: ``.value`` (the typed answer) and
``.reasoning`` (the thoughts).

Run: ``python examples/reasoning.py``
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

import formcast

QUESTIONS = [
    "A train leaves at 9:40 and the trip takes 85 minutes. When does it arrive?",
    "Is a tomato a fruit or a vegetable? Answer with your confidence.",
]


class Answer(BaseModel):
    answer: str = Field(max_length=40)
    kind: Literal["time", "fact", "opinion"]
    confidence: int = Field(ge=0, le=100)


def main(model: formcast.Model | None = None, max_thought_tokens: int = 48) -> list:
    """Answer every question after a bounded thought; returns the `formcast.Reasoned` results."""
    model = model or formcast.load()
    solve = formcast.json(
        model,
        Answer,
        reasoning=formcast.ReasoningConfig(max_tokens=max_thought_tokens),
        temperature=0,
        max_tokens=max_thought_tokens + 60,
    )
    results = solve.batch(QUESTIONS)
    for question, result in zip(QUESTIONS, results, strict=True):
        print(f"Q: {question}\n  thought: {result.reasoning.strip()!r}\n  answer: {result.value!r}")
    return results


if __name__ == "__main__":
    main()
