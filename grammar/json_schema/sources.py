"""schema_of: a JSON Schema from what users hand us — a dict, JSON text, or a Python type.

Pydantic models, dataclasses, TypedDicts, ``Literal``, ``Enum``, ``list[...]`` and anything
else ``pydantic.TypeAdapter`` understands become their JSON Schema (mode ``validation``).
References through base URIs (``$id``, ``$anchor``) are made local JSON pointers here
(`localize_refs`), so every later stage resolves ``#/...`` only.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.refs import localize_refs


def schema_of(obj: Any) -> dict | bool:
    """JSON Schema of ``obj``: a dict/bool (as is, its ``$ref`` s made local), a JSON string,
    or a Python type.

    Pydantic models, dataclasses, TypedDicts, ``Literal``, ``Enum``, ``list[...]``,
    ``Optional[...]`` and anything else ``pydantic.TypeAdapter`` understands are converted with
    pydantic (mode ``validation``).
    """
    if isinstance(obj, (dict, bool)):
        return localize_refs(obj)
    if isinstance(obj, str):
        try:
            return localize_refs(json.loads(obj))
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema string is not valid JSON: {exc}") from exc
    try:
        from pydantic import BaseModel, TypeAdapter
    except ImportError as exc:  # pragma: no cover - pydantic is a dependency
        raise SchemaError("pydantic is needed to derive a schema from a Python type") from exc
    try:
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return obj.model_json_schema()
        return TypeAdapter(obj).json_schema()
    except Exception as exc:  # pydantic raises several error types for unsupported types
        raise SchemaError(f"cannot derive a JSON Schema from {obj!r}: {exc}") from exc
