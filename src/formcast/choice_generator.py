"""``formcast.choice(model, options)``: exactly one of a list of strings, an Enum or a Literal.

Each option is written as text: a ``str`` as itself, an Enum member as its value when that is
a ``str`` (else its name), a non-str Literal value as its JSON spelling (``1``, ``true``).
The call returns the option itself (the Enum member, the Literal value).
"""

from __future__ import annotations

import enum
import json
import typing
from typing import Any

from formcast.errors import OutputError, UsageError
from formcast.generator import Generator
from formcast.grammar import GrammarSpec
from formcast.model import Model


def option_text(option: Any) -> str:
    """The text the model writes for ``option``."""
    if isinstance(option, enum.Enum):
        return option.value if isinstance(option.value, str) else option.name
    if isinstance(option, str):
        return option
    if option is None or isinstance(option, (bool, int, float)):
        return json.dumps(option)
    raise UsageError(
        f"choice option {option!r} is a {type(option).__name__}; options must be str, "
        "Enum members, or Literal values (str, int, float, bool, None)"
    )


def choice_options(options: Any) -> list[Any]:
    """The options of a list / tuple of str, an Enum class, or a ``Literal[...]`` type."""
    if isinstance(options, type) and issubclass(options, enum.Enum):
        values: list[Any] = list(options)
    elif typing.get_origin(options) is typing.Literal:
        values = list(typing.get_args(options))
    elif isinstance(options, (list, tuple)):
        values = list(options)
    else:
        raise UsageError(
            "formcast.choice expects a list of strings, an Enum class or a Literal[...] type, "
            f"got {options!r}"
        )
    if not values:
        raise UsageError("formcast.choice needs at least one option")
    return values


class ChoiceGenerator(Generator):
    """Generates exactly one option's text; calls return the option."""

    def __init__(self, model: Model, options: Any, **sampling: Any) -> None:
        super().__init__(model, **sampling)
        self.options = choice_options(options)
        self.texts = [option_text(o) for o in self.options]
        seen: dict[str, Any] = {}
        for option, spelled in zip(self.options, self.texts, strict=True):
            if spelled in seen:
                raise UsageError(
                    f"choice options {seen[spelled]!r} and {option!r} are both written {spelled!r}"
                )
            if not spelled:
                raise UsageError(f"choice option {option!r} is written as an empty string")
            seen[spelled] = option
        self._by_text = seen
        self.description = f"choice {self.texts!r}"
        _ = self.grammar

    def _grammar_spec(self) -> GrammarSpec:
        return GrammarSpec.choice(self.texts)

    def parse(self, text: str) -> Any:
        """The option written as ``text``."""
        if text not in self._by_text:
            raise OutputError(f"{text!r} is not one of {self.texts!r}", text=text)
        return self._by_text[text]


def choice(model: Model, options: Any, **sampling: Any) -> ChoiceGenerator:
    """Constrain the output to one of ``options``; calls return that option.

    ``options``: a list of strings, an ``Enum`` class (returns the member) or a
    ``Literal[...]`` type (returns the value).

    Examples
    --------
    >>> sentiment = formcast.choice(model, ["positive", "negative"], temperature=0)
    >>> sentiment("I loved it!")
    'positive'
    """
    return ChoiceGenerator(model, options, **sampling)
