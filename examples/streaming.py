"""Streaming: text chunks as they are generated, and a JSON object growing field by field.

Run: ``python examples/streaming.py``
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import formcast


class Recipe(BaseModel):
    title: str = Field(max_length=32)
    ingredients: list[str] = Field(min_length=1, max_length=3)
    minutes: int = Field(ge=1, le=240)


def main(model: formcast.Model | None = None, max_tokens: int = 64) -> Recipe:
    model = model or formcast.load()
    poem = formcast.text(model, temperature=0, max_tokens=24)
    for chunk in poem.stream("Write one short sentence about the sea."):
        print(chunk, end="", flush=True)
    print()

    recipe = formcast.json(model, Recipe, temperature=0, max_tokens=max_tokens)
    snapshot = None
    for snapshot in recipe.stream_partial("Give me a simple pancake recipe."):
        print("  ", snapshot)  # plain dicts that only ever grow
    result = recipe.validate(snapshot)  # the last snapshot is complete: a Recipe
    print(repr(result))
    return result


if __name__ == "__main__":
    main()
