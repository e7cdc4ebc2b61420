"""``formcast.json(model, target)``: JSON that validates against a schema, parsed into a value.

``target`` is a pydantic model (calls return an instance), a JSON Schema dict or JSON string
(calls return plain ``dict`` / ``list`` / ...), or any type pydantic's ``TypeAdapter``
understands: dataclasses, ``TypedDict``, ``list[...]``, ``Literal``, ``Enum``, primitives
(calls return a value of that type). ``stream_partial`` yields the growing object while it is
generated.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Iterator
from typing import Any

from formcast.engine.prompt import Prompt
from formcast.errors import OutputError, UsageError
from formcast.generator import Generator
from formcast.grammar import GrammarSpec, schema_of
from formcast.model import Model
from formcast.partial_json import NOTHING, parse_partial_json


def _is_pydantic_model(target: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(target, type) and issubclass(target, BaseModel)


class JsonGenerator(Generator):
    """Generates JSON valid against ``target``'s schema; calls return the parsed value.

    Parameters
    ----------
    model : Model
    target : type, dict, bool or str
        Pydantic model, Python type, JSON Schema (dict / bool) or JSON Schema text.
    whitespace : int, optional
        ``None`` (default): compact JSON; ``N``: up to N whitespace characters at each
        structural position.
    strict : bool
        An object schema without ``additionalProperties`` allows no extra keys (default).
    any_order : bool
        ``False`` (default): object members in the schema's ``properties`` order. ``True``:
        in any order, each at most once, the required ones present (see
        ``compile_json_schema``).
    **sampling
        Default sampling options.
    """

    def __init__(
        self,
        model: Model,
        target: Any,
        *,
        whitespace: int | None = None,
        strict: bool = True,
        any_order: bool = False,
        **sampling: Any,
    ) -> None:
        super().__init__(model, **sampling)
        self.target = target
        self.schema = schema_of(target)
        self.is_typed = not isinstance(target, (dict, bool, str))
        self.whitespace = whitespace
        self.strict = strict
        self.any_order = any_order
        title = self.schema.get("title") if isinstance(self.schema, dict) else None
        self.description = f"json {title or getattr(target, '__name__', 'schema')}"
        self._adapter: Any = None
        _ = self.grammar  # compile now: an unsupported schema fails here

    def _grammar_spec(self) -> GrammarSpec:
        # options at their defaults are left out, so the key equals the server's for the
        # same schema (one compile per process whichever door a schema comes in by)
        options: dict[str, Any] = {"strict": self.strict}
        if self.whitespace is not None:
            options["whitespace"] = self.whitespace
        if self.any_order:
            options["any_order"] = True
        return GrammarSpec.json_schema(self.schema, **options)

    def _type_adapter(self) -> Any:
        if self._adapter is None:
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(self.target)
        return self._adapter

    def parse(self, text: str) -> Any:
        """Parse a complete JSON text into the target's value (validated)."""
        from pydantic import ValidationError

        try:
            if not self.is_typed:
                return jsonlib.loads(text)
            if _is_pydantic_model(self.target):
                return self.target.model_validate_json(text)
            return self._type_adapter().validate_json(text)
        except (ValidationError, ValueError) as exc:
            raise OutputError(
                f"{self.description}: output does not validate: {exc}", text=text
            ) from exc

    def validate(self, obj: Any) -> Any:
        """Turn a plain JSON value (e.g. the last `stream_partial` snapshot) into the target's
        value: a model instance, a dataclass, ... (plain JSON targets return ``obj``)."""
        if not self.is_typed:
            return obj
        from pydantic import ValidationError

        try:
            if _is_pydantic_model(self.target):
                return self.target.model_validate(obj)
            return self._type_adapter().validate_python(obj)
        except ValidationError as exc:
            raise OutputError(f"{self.description}: value does not validate: {exc}") from exc

    def stream_partial(self, prompt: Prompt, **sampling: Any) -> Iterator[Any]:
        """Yield the value parsed so far each time it grows, as plain JSON data.

        Snapshots are ``dict`` / ``list`` / ``str`` / numbers (see
        :func:`formcast.partial_json.parse_partial_json`); the last one is the complete
        value. Pass it to :meth:`validate` for the typed value. A cut output raises
        `IncompleteOutputError` after the last snapshot. Under ``reasoning`` the snapshots are
        of the answer (none while the model thinks).
        """
        text = ""
        last: Any = NOTHING
        for chunk in self.stream(prompt, **sampling):
            text += chunk
            if self.reasoning is not None and self.reasoning.end not in text:
                continue  # still thinking: no answer yet
            snapshot = parse_partial_json(self.answer_text(text))
            if snapshot is not NOTHING and snapshot != last:
                last = snapshot
                yield snapshot


def json(model: Model, target: Any, **options: Any) -> JsonGenerator:
    """Constrain the output to JSON valid against ``target``; calls return the parsed value.

    ``target``: a pydantic model (returns an instance), a JSON Schema dict (returns a dict),
    or a type (dataclass, TypedDict, ``list[int]``, ``Literal``, ...). Options:
    ``whitespace``, ``strict``, ``any_order`` (see `JsonGenerator`) and sampling options.

    Examples
    --------
    >>> class Person(pydantic.BaseModel):
    ...     name: str
    ...     age: int
    >>> formcast.json(model, Person, temperature=0)("John is 32.")
    Person(name='John', age=32)
    """
    if target is None:
        raise UsageError("formcast.json needs a target: a pydantic model, a type or a schema")
    return JsonGenerator(model, target, **options)
