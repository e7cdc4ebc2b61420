"""What the client-library scripts and their tests share: the models, the prompt, the protocol.

Each ``*_cases.py`` script runs in a client virtual environment (not formcast's), reads the
server from ``FORMCAST_BASE_URL`` (``http://host:port/v1``) and ``FORMCAST_MODEL``, runs one
case named on its command line and prints one JSON object on its last stdout line (`emit`).
The tests validate that object's payload against these same models.

``Person`` nests a model and an Enum, so its JSON Schema has ``$defs`` and ``$ref`` s (which
once broke tool calls); every string is length-bounded and every number range-bounded, so a
135M model's output stays short and always completes within ``MAX_TOKENS``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

BASE_URL_VAR = "FORMCAST_BASE_URL"
MODEL_VAR = "FORMCAST_MODEL"
MAX_TOKENS = 200

PROMPT = (
    "Extract the person: Ada Lovelace, 36 years old, lives in London, United Kingdom. "
    "Her request is high priority."
)
WEATHER_PROMPT = "What is the weather in Paris, in celsius?"


class Priority(str, Enum):
    """A closed set of strings: an ``enum`` in ``$defs``."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Address(BaseModel):
    """The nested model."""

    city: str = Field(min_length=1, max_length=24)
    country: str = Field(min_length=1, max_length=24)


class Person(BaseModel):
    """What the structured-output cases extract."""

    name: str = Field(min_length=1, max_length=24)
    age: int = Field(ge=0, le=120)
    priority: Priority
    address: Address


class Unit(str, Enum):
    """Temperature unit of the weather tool."""

    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class WeatherQuery(BaseModel):
    """Arguments of the ``get_weather`` tool: a string and an Enum (``$defs`` again)."""

    city: str = Field(min_length=1, max_length=24)
    unit: Unit


def server() -> tuple[str, str]:
    """``(base_url, model_name)`` from the environment the test sets."""
    try:
        return os.environ[BASE_URL_VAR], os.environ[MODEL_VAR]
    except KeyError as exc:
        raise SystemExit(f"{exc.args[0]} is not set (the tests in tests/clients set it)") from exc


def emit(**payload: Any) -> None:
    """Print the case's result as one JSON line (the test reads the last stdout line)."""
    sys.stdout.write("\n" + json.dumps(payload) + "\n")
    sys.stdout.flush()


def run_case(cases: dict[str, Any], distributions: list[str]) -> None:
    """Run the case named by ``sys.argv[1]`` (one of ``cases``) and emit its payload, with
    the installed versions of ``distributions``."""
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(cases)}}}")
    versions = {name: importlib.metadata.version(name) for name in distributions}
    emit(case=sys.argv[1], versions=versions, **cases[sys.argv[1]]())
