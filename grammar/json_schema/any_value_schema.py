"""any_value_schema: a ``$ref`` target that accepts every JSON value, recognised as such.

Real schemas spell "any JSON value" as a recursive definition (pydantic's ``JsonValue``,
TypeScript ``JSONValue`` types, the ``value`` of a config file's free-form field)::

    {"anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
               {"type": "array", "items": {"$ref": "#/$defs/value"}},
               {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}}]}

Its language is that of the schema ``true``. Compiled as written it is recursive, so the whole
document takes the structural (context-free) route; recognised, the reference compiles as
``true`` does (the regex route's unbounded any-value, or the structural route's own).

`is_any_value_target` decides it by a fixed point: assuming the target accepts everything, its
references to itself accept everything too, and the branches must then cover every type with
no assertion left (``integer`` is within ``number``). An object branch without
``additionalProperties`` covers objects only where extra properties are allowed (``strict``
off: formcast's strict mode closes such objects). Anything else (another keyword, a bound, a
``format``, tuple ``items``) is not recognised and compiles as written, exactly.
"""

from __future__ import annotations

from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.refs import resolve_ref

_ALL_TYPES = frozenset({"null", "boolean", "number", "string", "array", "object"})
# keywords that assert nothing about the instance (and the containers of definitions)
_INERT = frozenset(
    {
        "title", "description", "$comment", "examples", "default", "deprecated", "readOnly",
        "writeOnly", "$id", "id", "$schema", "$anchor", "definitions", "$defs",
    }
)  # fmt: skip
_BRANCH_KEYS = frozenset({"type", "items", "additionalProperties"})


def is_any_value_target(root: Any, target: Any, target_ptr: str, *, strict: bool) -> bool:
    """True if the ``$ref`` target ``target`` (at ``target_ptr`` in ``root``) accepts every
    JSON value, its references to itself included (see module docstring)."""
    if not isinstance(target, dict):
        return target is True
    keys = set(target) - _INERT
    if keys == {"anyOf"} or keys == {"oneOf"}:
        (key,) = keys
        branches = target[key]
        if not isinstance(branches, list) or not branches:
            return False
    elif keys and keys <= _BRANCH_KEYS:
        key, branches = "type", [target]
    else:
        return False
    covered: set[str] = set()  # every type some branch takes, "number" taking "integer"
    for branch in branches:
        types = _branch_types(root, branch, target_ptr, strict)
        if types is None:
            return False
        if "number" in types:
            types.add("integer")
        if key == "oneOf" and covered & types:
            return False  # a value of both branches would match two: not every value
        covered |= types
    return _ALL_TYPES <= covered


def _branch_types(root: Any, branch: Any, target_ptr: str, strict: bool) -> set[str] | None:
    """The types ``branch`` accepts every value of (under the fixed-point assumption; a
    type name as the schema spells it), or None if it asserts anything else."""
    if not isinstance(branch, dict) or set(branch) - _INERT - _BRANCH_KEYS:
        return None
    kinds = branch.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        return None
    types = set(kinds)
    if "items" in branch and (
        "array" not in types or not _is_self(root, branch["items"], target_ptr)
    ):
        return None
    if "additionalProperties" in branch:
        if "object" not in types or not _is_self(root, branch["additionalProperties"], target_ptr):
            return None
    elif "object" in types and strict:
        return None  # strict: an object without additionalProperties is closed
    return types


def _is_self(root: Any, sub: Any, target_ptr: str) -> bool:
    """Is ``sub`` any value under the assumption: ``true``, ``{}``, or a reference to the
    target itself (nothing else beside it)?"""
    if sub is True or sub == {}:
        return True
    if (
        not isinstance(sub, dict)
        or set(sub) - _INERT != {"$ref"}
        or not isinstance(sub["$ref"], str)
    ):
        return False
    try:
        _, pointer = resolve_ref(root, sub["$ref"], target_ptr)
    except SchemaError:
        return False  # (the compile reports it where the reference is used)
    return pointer == target_ptr
