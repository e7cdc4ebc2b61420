"""Information extraction: free text -> validated pydantic objects, a whole batch at once.

The JSON grammar of ``Person`` constrains every token, so each output parses and validates:
the names fit ``max_length``, the ages are integers in range. The guarantee is on structure,
not on content: the facts come from the model. The embedded 135M model gets them right when
the prompt is plain text with one worked example (load it with ``chat=False``, no chat
template); asked through its chat template it writes whole phrases into ``job``.

Run: ``python examples/extraction.py``
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import formcast

TEXTS = [
    "Maria Garcia, 34, works as a nurse in Madrid.",
    "The report was written by Tom Baker, a 52-year-old engineer.",
    "Aiko is a 27 year old designer who lives in Osaka.",
    "At 61, the chef Pierre Blanc still cooks every night.",
]

# one worked example, then the text to extract from; the model continues after "JSON: "
EXAMPLE = (
    "Text: Jack Smith is a 40-year-old plumber from Leeds.\n"
    'JSON: {"name": "Jack Smith", "age": 40, "job": "plumber"}\n\n'
)


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    job: str = Field(max_length=16)


def main(model: formcast.Model | None = None, max_tokens: int = 48) -> list[Person]:
    model = model or formcast.load(chat=False)
    extract = formcast.json(model, Person, temperature=0, max_tokens=max_tokens)
    prompts = [f"{EXAMPLE}Text: {text}\nJSON: " for text in TEXTS]
    people = extract.batch(prompts)  # one engine batch: the requests decode together
    for text, person in zip(TEXTS, people, strict=True):
        print(f"{text}\n  -> {person!r}")
    return people


if __name__ == "__main__":
    main()
