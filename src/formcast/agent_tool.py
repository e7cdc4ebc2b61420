"""Tool: a typed Python function an `Agent` may call, with the JSON Schema of its calls.

The parameters' annotations become a pydantic model of the arguments (defaults make a
parameter optional; ``Annotated[..., Field(description=...)]`` documents it). The model's
call is validated against that model before the function runs.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping
from typing import Any

from formcast.errors import UsageError

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class Tool:
    """A function the agent can call.

    Attributes
    ----------
    name : str
        What the model writes to call it.
    description : str
        The first paragraph of the docstring (shown to the model).
    arguments_model : type[pydantic.BaseModel]
        Validates a call's arguments.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(fn):
            raise UsageError(f"a tool must be a function, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or fn.__name__
        if not self.name or not set(self.name) <= _NAME_CHARS:
            raise UsageError(f"tool name {self.name!r} must be letters, digits, '_' or '-'")
        doc = inspect.getdoc(fn) or ""
        self.description = description if description is not None else doc.split("\n\n")[0]
        self.signature = inspect.signature(fn)
        self.arguments_model = self._arguments_model()

    def _arguments_model(self) -> Any:
        from pydantic import create_model

        where = f"tool {self.name!r}"
        try:
            hints = typing.get_type_hints(self.fn, include_extras=True)
        except (NameError, TypeError) as exc:
            raise UsageError(f"{where}: cannot resolve its annotations: {exc}") from exc
        fields: dict[str, Any] = {}
        for param in self.signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UsageError(f"{where}: *{param.name} parameters cannot be called by a model")
            if param.name not in hints:
                raise UsageError(
                    f"{where}: parameter {param.name!r} has no type annotation; the model's "
                    "call is constrained by the annotations"
                )
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (hints[param.name], default)
        model_name = "".join(part.capitalize() for part in self.name.replace("-", "_").split("_"))
        return create_model(f"{model_name}Arguments", **fields)

    def arguments_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments object."""
        return self.arguments_model.model_json_schema()

    def invoke(self, arguments: Mapping[str, Any]) -> Any:
        """Validate ``arguments`` and call the function with them."""
        validated = self.arguments_model.model_validate(dict(arguments))
        return self.fn(**{name: getattr(validated, name) for name in self.signature.parameters})

    def observe(self, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """``(observation, is_error)``: the result as text, or the exception as text.

        A tool that raises (or arguments that do not validate) gives ``"error: <Type>:
        <message>"`` so the model can read it and recover.
        """
        try:
            return render_result(self.invoke(arguments)), False
        except Exception as exc:  # reported to the model, kept in the transcript
            return f"error: {type(exc).__name__}: {exc}", True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (as if it were not a tool)."""
        return self.fn(*args, **kwargs)

    def render(self) -> str:
        """One line for the model: ``name(arg: type, ...): description``."""
        hints = typing.get_type_hints(self.fn)  # without Annotated metadata
        params = []
        for param in self.signature.parameters.values():
            text = f"{param.name}: {_type_name(hints[param.name])}"
            if param.default is not param.empty:
                text += f" = {param.default!r}"
            params.append(text)
        line = f"{self.name}({', '.join(params)})"
        return f"{line}: {self.description}" if self.description else line

    def __repr__(self) -> str:
        return f"Tool({self.render()!r})"


def _type_name(tp: Any) -> str:
    """``str``, ``list[int]``, ``Literal['a', 'b']``: short names for the model to read."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return inspect.formatannotation(tp).replace("typing.", "")


def render_result(result: Any) -> str:
    """A tool's result as text for the model: ``str`` as is, other values as JSON."""
    if isinstance(result, str):
        return result
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        result = dump(mode="json")
    return json.dumps(result, ensure_ascii=False, default=str)


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Make a `Tool` from a typed function: ``@formcast.tool`` or ``@formcast.tool(name=...)``."""
    if fn is None:
        return lambda f: Tool(f, name=name, description=description)
    return Tool(fn, name=name, description=description)
