"""@formcast.function: every supported return type comes back as a value of that type; the
prompt is the body's string or the docstring template; misuse fails at decoration time."""

from __future__ import annotations

import dataclasses
import enum
import threading
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import formcast


class Pet(BaseModel):
    name: str = Field(max_length=12)
    legs: int = Field(ge=0, le=8)


@dataclasses.dataclass
class Size:
    width: int
    height: int


class Contact(TypedDict):
    email: str
    is_active: bool


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


SHORT = {"temperature": 0, "max_tokens": 24}


@pytest.fixture(scope="module")
def functions(model):
    @formcast.function(model, **SHORT)
    def pet(kind: str) -> Pet:
        """Describe a typical {kind} as JSON."""

    @formcast.function(model, **SHORT)
    def size(thing: str) -> Size:
        return f"Give the width and height in cm of a {thing}."

    @formcast.function(model, **SHORT)
    def contact(name: str) -> Contact:
        """Invent a contact record for {name}."""

    @formcast.function(model, **SHORT)
    def mood(text: str) -> Mood:
        """Is the writer happy or sad? {text}"""

    @formcast.function(model, **SHORT)
    def answer(question: str) -> Literal["yes", "no"]:
        """{question}"""

    @formcast.function(model, **SHORT)
    def primes(
        count: int,
    ) -> Annotated[list[Annotated[int, Field(ge=0, le=99)]], Field(max_length=4)]:
        """List {count} prime numbers."""

    @formcast.function(model, **SHORT)
    def year(event: str) -> int:
        """In which year did {event}?"""

    @formcast.function(model, **SHORT)
    def ratio(text: str) -> float:
        """Give the number in: {text}"""

    @formcast.function(model, **SHORT)
    def is_fruit(word: str) -> bool:
        """Is {word} a fruit?"""

    @formcast.function(model, **SHORT)
    def capital(country: str) -> str:
        """What is the capital of {country}?"""

    return locals()


@pytest.mark.parametrize(
    ("name", "argument", "check"),
    [
        ("pet", "cat", lambda v: isinstance(v, Pet)),
        ("size", "book", lambda v: isinstance(v, Size) and type(v.width) is int),
        ("contact", "Ann", lambda v: isinstance(v, dict) and type(v["is_active"]) is bool),
        ("mood", "I won the lottery!", lambda v: isinstance(v, Mood)),
        ("answer", "Is fire hot?", lambda v: v in ("yes", "no")),
        ("primes", 3, lambda v: isinstance(v, list) and all(type(i) is int for i in v)),
        ("year", "the Berlin wall fall", lambda v: type(v) is int),
        ("ratio", "one and a half", lambda v: isinstance(v, float)),
        ("is_fruit", "apple", lambda v: type(v) is bool),
        ("capital", "France", lambda v: isinstance(v, str)),
    ],
)
def test_each_return_type(functions, name, argument, check):
    value = functions[name](argument)
    assert check(value), (name, value)


def test_prompt_rendering(model, functions):
    assert functions["pet"].prompt("dog") == "Describe a typical dog as JSON."
    assert functions["size"].prompt(thing="door") == "Give the width and height in cm of a door."

    @formcast.function(model)
    def describe(pet: Pet, tags: list[str], note: str = "none") -> str:
        """Pet: {pet}. Tags: {tags}. Name: {pet.name}. Note: {note}. Braces: {{}}."""

    prompt = describe.prompt(Pet(name="Rex", legs=4), ["a", "b"])
    assert prompt == (
        'Pet: {"name": "Rex", "legs": 4}. Tags: ["a", "b"]. Name: Rex. Note: none. Braces: {}.'
    )
    assert describe.__name__ == "describe" and describe.return_type is str


def test_batch_of_calls(functions):
    values = functions["mood"].batch([{"text": "Best day ever!"}, {"text": "I lost my keys."}])
    assert all(isinstance(v, Mood) for v in values)


def test_misuse_errors(model):
    with pytest.raises(formcast.UsageError, match="no return annotation"):

        @formcast.function(model)
        def no_annotation(x: str):
            """{x}"""

    with pytest.raises(formcast.UsageError, match="return type is None"):

        @formcast.function(model)
        def returns_none(x: str) -> None:
            """{x}"""

    with pytest.raises(formcast.UsageError, match="is not supported"):

        @formcast.function(model)
        def unsupported(x: str) -> threading.Lock:
            """{x}"""

    with pytest.raises(formcast.UsageError, match=r"use @formcast.function\(model\)"):

        @formcast.function
        def no_model(x: str) -> int:
            """{x}"""

    @formcast.function(model)
    def bad_template(x: str) -> int:
        """{y}"""

    with pytest.raises(formcast.UsageError, match=r"uses \{y\} but the arguments are \['x'\]"):
        bad_template("1")

    @formcast.function(model)
    def no_prompt(x: str) -> int:
        pass

    with pytest.raises(formcast.UsageError, match="no prompt"):
        no_prompt("1")

    @formcast.function(model)
    def wrong_body(x: str) -> int:
        return 3

    with pytest.raises(formcast.UsageError, match="body returned int"):
        wrong_body("1")

    with pytest.raises(formcast.UsageError, match="missing a required argument"):
        bad_template()
