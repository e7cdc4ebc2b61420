"""Keyword value types: every keyword's value checked against what the specification allows.

A schema such as ``{"properties": "x"}`` or ``{"minimum": "zero"}`` is not a schema; without
this check it surfaced as an ``AttributeError`` or ``ValueError`` deep inside the compiler,
or (``"required": "ab"``, a string iterated as ``["a", "b"]``) silently as a wrong language.
:func:`check_keyword_types` walks the whole document once, before compiling, and raises
:class:`~formcast.errors.SchemaError` naming the keyword and its JSON pointer. Only keywords
formcast reads are checked (unknown keywords are annotations); ``$defs`` / ``definitions``
are walked too, so a malformed definition is reported even where nothing uses it yet.

The same walk warns of draft-03 keywords (``extends``, ``disallow``, ``divisibleBy``): a
draft-03 document is refused (``refs.detect_draft``), and in every later draft they are
unknown keywords, which validators ignore; formcast ignores them as those drafts say, and
says so, since a schema that writes one most likely meant its draft-03 sense.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.refs import escape_pointer_token

_TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")
# keywords of draft 03 alone: unknown (ignored) in the drafts formcast reads
DRAFT3_KEYWORDS = ("extends", "disallow", "divisibleBy")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    """A non-negative integer (``2.0`` counts, as the specification allows)."""
    is_integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return _is_number(value) and is_integral and value >= 0


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict | bool)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TYPE_NAMES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(t, str) and t in _TYPE_NAMES for t in value)
    )


# keyword -> (test of its value, what the value must be)
_SCALAR_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (_is_type, f"a type name or a non-empty array of type names {_TYPE_NAMES}"),
    "minimum": (_is_number, "a number"),
    "maximum": (_is_number, "a number"),
    "multipleOf": (lambda v: _is_number(v) and v > 0, "a number > 0"),
    "minLength": (_is_count, "a non-negative integer"),
    "maxLength": (_is_count, "a non-negative integer"),
    "minItems": (_is_count, "a non-negative integer"),
    "maxItems": (_is_count, "a non-negative integer"),
    "minProperties": (_is_count, "a non-negative integer"),
    "maxProperties": (_is_count, "a non-negative integer"),
    "minContains": (_is_count, "a non-negative integer"),
    "maxContains": (_is_count, "a non-negative integer"),
    "pattern": (lambda v: isinstance(v, str), "a string (an ECMA-262 regular expression)"),
    "format": (lambda v: isinstance(v, str), "a string"),
    "$ref": (lambda v: isinstance(v, str), "a string (a URI reference)"),
    "uniqueItems": (lambda v: isinstance(v, bool), "a boolean"),
    "nullable": (lambda v: isinstance(v, bool), "a boolean"),
    "enum": (lambda v: isinstance(v, list), "an array"),
    "required": (
        lambda v: isinstance(v, list) and all(isinstance(name, str) for name in v),
        "an array of strings",
    ),
    "dependentRequired": (
        lambda v: isinstance(v, dict) and all(_is_names(names) for names in v.values()),
        "an object whose values are arrays of strings",
    ),
}
# keywords whose value is one schema
_SCHEMA_KEYWORDS = (
    "additionalProperties", "additionalItems", "not", "contains", "propertyNames",
    "if", "then", "else", "unevaluatedProperties", "unevaluatedItems",
)  # fmt: skip
# keywords whose value is an object of schemas
_SCHEMA_MAP_KEYWORDS = (
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
)  # fmt: skip
# keywords whose value is a non-empty array of schemas
_SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")


def check_keyword_types(root: Any, draft: str = "draft2020-12") -> None:
    """Raise ``SchemaError`` at the first keyword whose value has the wrong type; warn of
    each draft-03 keyword (ignored, see the module docstring).

    Parameters
    ----------
    root:
        The schema document (a dict or a bool).
    draft:
        Its draft (``refs.detect_draft``): draft 4 spells ``exclusiveMinimum`` /
        ``exclusiveMaximum`` as booleans, later drafts as numbers.

    Raises
    ------
    SchemaError
        Naming the keyword, what its value must be, and the JSON pointer of the schema.
    """
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        schema, pointer = stack.pop()
        if isinstance(schema, bool):
            continue
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {type(schema).__name__}",
                pointer=pointer,
            )
        _check_scalars(schema, pointer, draft)
        for keyword in DRAFT3_KEYWORDS:
            if keyword in schema:
                warnings.warn(
                    f"formcast: {keyword!r} at JSON pointer '{pointer or '#'}' is a draft-03 "
                    f"keyword, unknown in {draft} (the schema's draft): ignored, as that "
                    "draft's validators ignore it (draft-03 schemas are not supported)",
                    UserWarning,
                    stacklevel=4,
                )
        stack.extend(subschemas(schema, pointer))


def _fail(keyword: str, value: Any, must_be: str, pointer: str) -> SchemaError:
    shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
    return SchemaError(
        f"{keyword!r} must be {must_be}, got {shown}", pointer=pointer, keyword=keyword
    )


def _check_scalars(schema: dict, pointer: str, draft: str) -> None:
    for keyword, (is_valid, must_be) in _SCALAR_RULES.items():
        if keyword in schema and not is_valid(schema[keyword]):
            raise _fail(keyword, schema[keyword], must_be, pointer)
    for keyword in ("exclusiveMinimum", "exclusiveMaximum"):
        if keyword not in schema:
            continue
        value = schema[keyword]
        if draft == "draft4" and not isinstance(value, bool):
            raise _fail(keyword, value, "a boolean (draft 4)", pointer)
        if draft != "draft4" and not (_is_number(value) or isinstance(value, bool)):
            raise _fail(keyword, value, "a number", pointer)


def subschemas(schema: dict, pointer: str) -> list[tuple[Any, str]]:
    """The ``(subschema, pointer)`` pairs directly below ``schema`` (at ``pointer``), in the
    keywords that hold schemas (not inside ``const`` / ``enum`` / ``default`` data).

    Raises
    ------
    SchemaError
        A keyword that holds schemas has a value of the wrong shape.
    """
    found: list[tuple[Any, str]] = []
    for keyword in _SCHEMA_KEYWORDS:
        if keyword in schema:
            value = schema[keyword]
            if not _is_schema(value):
                raise _fail(keyword, value, "a schema (an object or a boolean)", pointer)
            found.append((value, f"{pointer}/{keyword}"))
    for keyword in _SCHEMA_MAP_KEYWORDS:
        if keyword in schema:
            value = schema[keyword]
            if not isinstance(value, dict):
                raise _fail(keyword, value, "an object whose values are schemas", pointer)
            found += [
                (sub, f"{pointer}/{keyword}/{escape_pointer_token(name)}")
                for name, sub in value.items()
            ]
    for keyword in _SCHEMA_LIST_KEYWORDS:
        if keyword in schema:
            value = schema[keyword]
            if not isinstance(value, list) or not value:
                raise _fail(keyword, value, "a non-empty array of schemas", pointer)
            found += [(sub, f"{pointer}/{keyword}/{i}") for i, sub in enumerate(value)]
    if "dependencies" in schema:  # draft 4..7: a name array or a schema per property name
        value = schema["dependencies"]
        must_be = "an object whose values are arrays of strings or schemas"
        if not isinstance(value, dict):
            raise _fail("dependencies", value, must_be, pointer)
        for name, dep in value.items():
            if _is_schema(dep):
                found.append((dep, f"{pointer}/dependencies/{escape_pointer_token(name)}"))
            elif not _is_names(dep):
                raise _fail("dependencies", value, must_be, pointer)
    if "items" in schema:
        items = schema["items"]
        if isinstance(items, list):  # draft <= 2019-09 tuple form
            found += [(sub, f"{pointer}/items/{i}") for i, sub in enumerate(items)]
        elif _is_schema(items):
            found.append((items, f"{pointer}/items"))
        else:
            raise _fail("items", items, "a schema or an array of schemas", pointer)
    return found


def has_string_patterns(root: Any) -> bool:
    """Does some subschema of ``root`` (reached through the keywords that hold schemas)
    have a ``pattern`` or ``format``? True as well for a malformed keyword (the compiler
    reports it)."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        schema, pointer = stack.pop()
        if not isinstance(schema, dict):
            continue
        if isinstance(schema.get("pattern"), str) or isinstance(schema.get("format"), str):
            return True
        try:
            stack += subschemas(schema, pointer)
        except SchemaError:
            return True
    return False
