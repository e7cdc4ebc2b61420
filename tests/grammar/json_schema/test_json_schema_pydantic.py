"""pydantic models and Python types: schema_of, the regex, and parse_as round trips."""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field, conint, constr
from typing_extensions import TypedDict

from formcast.grammar.json_schema.compile import json_schema_to_regex, parse_as, schema_of
from tests.grammar.schema_oracle import validator


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip: constr(pattern=r"^[0-9]{5}$")  # type: ignore[valid-type]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: conint(ge=0, le=9)  # type: ignore[valid-type]


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Person(BaseModel):
    name: str
    age: int | None = None
    color: Color = Color.RED
    address: Address
    tags: list[str] = []
    scores: dict[str, float] = {}
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def _rx(tp):
    return re.compile(json_schema_to_regex(tp))


def test_nested_model_round_trip():
    p = Person(name="Ann", address=Address(street="Main", zip="12345"),
               pet=Cat(kind="cat", lives=3), tags=["a"], scores={"x": 1.5})  # fmt: skip
    text = p.model_dump_json()
    assert _rx(Person).fullmatch(text)
    assert parse_as(text, Person) == p
    assert validator(schema_of(Person)).is_valid(p.model_dump(mode="json"))
    bad = text.replace('"12345"', '"1234"')
    assert not _rx(Person).fullmatch(bad)
    assert not _rx(Person).fullmatch(text.replace('"lives":3', '"lives":10'))


def test_discriminated_union_and_literal():
    rx = _rx(Cat | Dog)
    assert rx.fullmatch('{"kind":"dog","good":true}')
    assert not rx.fullmatch('{"kind":"dog","lives":1}')


def test_types():
    assert _rx(int | list[Point]).fullmatch('[{"x":1,"y":2}]')
    assert _rx(int | list[Point]).fullmatch("-3")
    assert not _rx(list[Point]).fullmatch('[{"y":2,"x":1}]')  # schema property order
    assert _rx(Movie).fullmatch('{"title":"A","year":1999}')
    assert _rx(Color).fullmatch('"blue"') and not _rx(Color).fullmatch('"green"')
    assert _rx(int | None).fullmatch("null")
    assert _rx(Literal["a", "b"]).fullmatch('"b"')
    assert parse_as('{"x":1,"y":2}', Point) == Point(1, 2)
