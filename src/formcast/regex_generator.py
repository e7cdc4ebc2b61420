"""``formcast.regex(model, pattern)``: text that fullmatches a regular expression."""

from __future__ import annotations

from typing import Any

from formcast.errors import UsageError
from formcast.generator import Generator
from formcast.grammar import GrammarSpec
from formcast.model import Model


class RegexGenerator(Generator):
    """Generates strings that fullmatch ``pattern`` (Python ``re`` semantics; ``ascii``
    makes ``\\d \\w \\s`` and case folding ASCII-only, as ``re.ASCII``)."""

    def __init__(self, model: Model, pattern: str, *, ascii: bool = False, **sampling: Any) -> None:
        if not isinstance(pattern, str):
            raise UsageError(f"formcast.regex expects a pattern str, got {type(pattern).__name__}")
        super().__init__(model, **sampling)
        # the (?a) flag group first: a global flag must start the pattern, and Python's
        # re takes several flag groups in a row there
        self.pattern = f"(?a){pattern}" if ascii else pattern
        self.description = f"regex {pattern!r}"
        _ = self.grammar  # compile now: a bad pattern fails here, with its position

    def _grammar_spec(self) -> GrammarSpec:
        return GrammarSpec.regex(self.pattern)


def regex(model: Model, pattern: str, *, ascii: bool = False, **sampling: Any) -> RegexGenerator:
    """Constrain the output to fullmatch ``pattern``; calls return the matched ``str``.

    Parameters
    ----------
    model:
        A loaded :class:`~formcast.model.Model`.
    pattern:
        A Python ``re`` pattern, Unicode by default: ``\\d`` is any Unicode decimal digit
        (``'🯸'`` and ``'٣'`` included), ``\\w`` any Unicode word character.
    ascii:
        ``True``: ``\\d \\w \\s`` and case-insensitive matching are ASCII-only (``re.ASCII``,
        the same as starting the pattern with ``(?a)``); what most patterns for phone numbers,
        dates or identifiers mean.
    **sampling:
        Sampling options (``temperature``, ``max_tokens``, ...).

    Examples
    --------
    >>> phone = formcast.regex(model, r"\\(\\d{3}\\) \\d{3}-\\d{4}", ascii=True, temperature=0)
    >>> phone("Invent a phone number.")
    '(555) 123-4567'
    """
    return RegexGenerator(model, pattern, ascii=ascii, **sampling)
