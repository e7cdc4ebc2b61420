"""``formcast.regex(model, pattern)``: text that fullmatches a regular expression."""

from __future__ import annotations

from typing import Any

from formcast.errors import UsageError
from formcast.generator import Generator
from formcast.grammar import GrammarSpec
from formcast.model import Model


class RegexGenerator(Generator):
    """Generates strings that fullmatch ``pattern`` (Python ``re`` semantics)."""

    def __init__(self, model: Model, pattern: str, **sampling: Any) -> None:
        if not isinstance(pattern, str):
            raise UsageError(f"formcast.regex expects a pattern str, got {type(pattern).__name__}")
        super().__init__(model, **sampling)
        self.pattern = pattern
        self.description = f"regex {pattern!r}"
        _ = self.grammar  # compile now: a bad pattern fails here, with its position

    def _grammar_spec(self) -> GrammarSpec:
        return GrammarSpec.regex(self.pattern)


def regex(model: Model, pattern: str, **sampling: Any) -> RegexGenerator:
    """Constrain the output to fullmatch ``pattern``; calls return the matched ``str``.

    Examples
    --------
    >>> phone = formcast.regex(model, r"\\(\\d{3}\\) \\d{3}-\\d{4}", temperature=0)
    >>> phone("Invent a phone number.")
    '(555) 123-4567'
    """
    return RegexGenerator(model, pattern, **sampling)
