"""Information extraction: free text -> validated pydantic objects, a whole batch at once.

The JSON grammar of ``Person`` constrains every token, so each output parses and validates:
the names fit ``max_length``, the ages are integers in range. (A 135M model still gets some
facts wrong: the guarantee is on structure, not on content.)

Run: ``python examples/extraction.py``
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import formcast

TEXTS = [
    "Maria Garcia, 34, works as a nurse in Madrid.",
    "The report was written by Tom Baker, a 52-year-old engineer.",
    "Aiko is a 27 year old designer who lives in Osaka.",
]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    job: str = Field(max_length=16)


def main(model: formcast.Model | None = None, max_tokens: int = 48) -> list[Person]:
    model = model or formcast.load()
    extract = formcast.json(model, Person, temperature=0, max_tokens=max_tokens)
    prompts = [f"Extract the person's name, age and job as JSON.\n{text}" for text in TEXTS]
    people = extract.batch(prompts)  # one engine batch: the requests decode together
    for text, person in zip(TEXTS, people, strict=True):
        print(f"{text}\n  -> {person!r}")
    return people


if __name__ == "__main__":
    main()
