"""StructuralTagError: a structural tag request that cannot be compiled, with its JSON pointer."""

from __future__ import annotations

from formcast.errors import GrammarError


class StructuralTagError(GrammarError):
    """A structural tag (or one of its format nodes) is malformed or unsupported.

    A `~formcast.errors.GrammarError`, hence a `~formcast.errors.FormcastError` and a
    ``ValueError``. The message starts with ``pointer``, the JSON pointer of the offending
    node in the request (``/format/elements/2/content: unknown type 'foo'``).

    Parameters
    ----------
    pointer : str
        JSON pointer of the bad node (``""`` for the whole request).
    message : str
        What is wrong with it.
    """

    def __init__(self, pointer: str, message: str) -> None:
        self.pointer = pointer
        self.reason = message
        super().__init__(f"{pointer or '/'}: {message}")
