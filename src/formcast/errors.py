"""The formcast exception hierarchy.

Every error formcast raises on purpose derives from `FormcastError`. Errors caused by the
caller's input (a bad schema, a malformed regex, an invalid sampling parameter) also derive
from `ValueError`, so ``except ValueError`` keeps working for code that does not know us.
This module imports nothing from formcast; every layer may import it.
"""

from __future__ import annotations


class FormcastError(Exception):
    """Base class of every error formcast raises on purpose."""


class GrammarError(FormcastError, ValueError):
    """A grammar (regex, Lark text, choice list) cannot be compiled as written.

    ``position`` is the offset in the grammar text where the problem was found, when known.
    """

    def __init__(self, message: str, *, position: int | None = None) -> None:
        self.position = position
        super().__init__(message if position is None else f"{message} (at position {position})")


class SchemaError(GrammarError):
    """A JSON Schema uses a keyword or value formcast cannot enforce exactly.

    ``pointer`` is the JSON pointer of the offending subschema (``""`` for the root).
    """

    def __init__(self, message: str, *, pointer: str = "", keyword: str | None = None) -> None:
        self.pointer = pointer
        self.keyword = keyword
        where = f" at JSON pointer '{pointer or '#'}'"
        super().__init__(message + where)


class CompileBudgetError(GrammarError):
    """Compiling a grammar exceeded its state, time or memory budget."""


class GrammarLimitError(GrammarError):
    """A grammar request is over a size limit (``GrammarLimits``), refused before compiling.

    ``limit_name`` is the limit's field name; the message names it, the value and where.
    """

    def __init__(self, message: str, *, limit_name: str, position: int | None = None) -> None:
        self.limit_name = limit_name
        super().__init__(message, position=position)


class DeadEndError(FormcastError, RuntimeError):
    """A matcher reached a state where no token is allowed: a bug, never silently ignored."""


class SamplingParamsError(FormcastError, ValueError):
    """A sampling parameter is out of range; the message names the field and the value."""

    def __init__(self, field: str, value: object, requirement: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"SamplingParams.{field}={value!r} is invalid: {requirement}")


class ModelLoadError(FormcastError, ValueError):
    """A model name, folder or file cannot be loaded; the message says how to fix it."""


class TokenizerError(FormcastError, ValueError):
    """A tokenizer's vocabulary cannot be mapped to exact bytes."""


class EngineError(FormcastError, RuntimeError):
    """The engine cannot serve a request as configured (e.g. out of KV cache blocks)."""


class EngineConfigError(FormcastError, ValueError):
    """An engine configuration value is invalid; the message names the field and the value."""


class RequestError(FormcastError, ValueError):
    """A generation request cannot be served as given (empty prompt, prompt too long, ...)."""


class RequestLimitError(RequestError):
    """A request asks for more than the engine can ever run at once (``n`` above
    ``max_num_seqs``, ...): refused when it is added, since no amount of waiting would let the
    scheduler admit it.

    ``field`` names the request field at fault, ``value`` its value, ``limit_name`` and
    ``limit`` the engine setting it exceeds; the message names all four.
    """

    def __init__(self, field: str, value: int, limit_name: str, limit: int, why: str) -> None:
        self.field = field
        self.value = value
        self.limit_name = limit_name
        self.limit = limit
        super().__init__(f"{field}={value} is more than {limit_name}={limit}: {why}")


class UsageError(FormcastError, TypeError):
    """The public API was used in a way it cannot serve (a function without a return
    annotation, an unknown sampling option, a tool without typed parameters, ...)."""


class OutputError(FormcastError, RuntimeError):
    """A generation finished but its text cannot be turned into the declared value."""

    def __init__(self, message: str, *, text: str = "") -> None:
        self.text = text
        super().__init__(message)


class IncompleteOutputError(OutputError):
    """Generation stopped (``max_tokens`` or the model's length) before the structure was
    complete; ``text`` holds what was generated. Raise ``max_tokens`` or tighten the schema."""
