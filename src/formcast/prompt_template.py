"""render_template: a ``str.format`` template filled with a function's arguments.

``{name}`` renders a ``str`` as itself and structured values as JSON (pydantic models,
dataclasses, dicts, lists), so a model sees data in the form it is best at reading.
``{name.attr}``, ``{name[0]}`` and format specs (``{x:.2f}``) work as in ``str.format``;
literal braces are doubled (``{{`` and ``}}``).
"""

from __future__ import annotations

import dataclasses
import json
import string
from collections.abc import Mapping
from typing import Any

from formcast.errors import UsageError


def render_value(value: Any) -> str:
    """Text of one argument: JSON for structured data, ``str()`` for everything else."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return json.dumps(dump(mode="json"), ensure_ascii=False)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value), ensure_ascii=False, default=str)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


class _Formatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec:
            return format(value, format_spec)
        return render_value(value)


def render_template(template: str, arguments: Mapping[str, Any], *, where: str = "") -> str:
    """Fill ``template`` with ``arguments`` (see module docstring).

    Raises
    ------
    UsageError
        The template names an argument that does not exist, or is malformed.
    """
    prefix = f"{where}: " if where else ""
    try:
        return _Formatter().vformat(template, (), dict(arguments))
    except KeyError as exc:
        raise UsageError(
            f"{prefix}the prompt template uses {{{exc.args[0]}}} but the arguments are "
            f"{sorted(arguments)} (double literal braces: '{{{{' and '}}}}')"
        ) from exc
    except (IndexError, ValueError, AttributeError) as exc:
        raise UsageError(f"{prefix}cannot render the prompt template: {exc}") from exc
