"""``allOf`` and sibling keywords as a true intersection: merge schemas keyword by keyword.

``merge(schemas)`` returns one schema whose instances are exactly those valid against every
input (or raises ``SchemaError`` for a combination it cannot intersect exactly). Subschemas
under the same property or array position are combined lazily as ``{"allOf": [...]}``.
Every input must already have its top-level ``$ref`` resolved and be a dict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.values import equality_key

_ANNOTATIONS = {
    "title", "description", "default", "examples", "example", "$comment", "$schema", "$id",
    "id", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "$defs", "definitions", "$anchor", "discriminator",
}  # fmt: skip
# Keywords with validation meaning (everything else is an annotation or unknown: ignored).
VALIDATION_KEYWORDS = {
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
    "minContains", "maxContains", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf",
    "not", "if", "then", "else", "$ref", "nullable", "dependencies", "dependentRequired",
    "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", "disallow", "extends", "divisibleBy",
}  # fmt: skip
_MAX_KEYS = ("maxLength", "maxItems", "maxProperties", "maxContains")
_MIN_KEYS = ("minLength", "minItems", "minProperties", "minContains")


def _all(*schemas: Any) -> Any:
    """Lazy intersection of subschemas (``True`` parts dropped)."""
    parts = [s for s in schemas if s is not True and s != {}]
    if any(p is False for p in parts):
        return False
    if not parts:
        return True
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _types(s: dict) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def merge(
    schemas: list[dict], pointer: str, pattern_matches: Callable[[str, str], bool]
) -> dict | bool:
    """Intersection of ``schemas`` as one schema (``False`` if provably empty)."""
    out: dict[str, Any] = {}
    for s in schemas:
        for key, value in s.items():
            if key not in VALIDATION_KEYWORDS or key in ("properties", "patternProperties"):
                continue
            if key == "additionalProperties":
                continue
            if key not in out:
                out[key] = value
                continue
            out[key] = _combine(key, out[key], value, pointer)
            if out[key] is False and key in ("type", "enum"):
                return False
    # objects: properties, patternProperties and additionalProperties interact per schema
    names: list[str] = []
    for s in schemas:
        for n in s.get("properties", {}) or {}:
            if n not in names:
                names.append(n)
    with_patterns = [s for s in schemas if s.get("patternProperties")]
    if len(with_patterns) > 1:
        raise SchemaError(
            "allOf of several patternProperties cannot be merged exactly",
            pointer=pointer,
            keyword="patternProperties",
        )
    if with_patterns and any(
        s.get("additionalProperties", True) not in (True, {})
        for s in schemas
        if s is not with_patterns[0]
    ):
        raise SchemaError(
            "patternProperties with another branch's additionalProperties cannot be merged",
            pointer=pointer,
            keyword="patternProperties",
        )
    if names:
        props = {}
        for n in names:
            parts = []
            for s in schemas:
                own = s.get("properties", {}) or {}
                if n in own:
                    parts.append(own[n])
                    continue
                matched = [
                    sub for pattern, sub in (s.get("patternProperties") or {}).items()
                    if pattern_matches(pattern, n)
                ]  # fmt: skip
                parts += matched or [s.get("additionalProperties", True)]
            props[n] = _all(*parts)
        out["properties"] = props
    if with_patterns:
        out["patternProperties"] = with_patterns[0]["patternProperties"]
    additional = [s["additionalProperties"] for s in schemas if "additionalProperties" in s]
    if additional:
        out["additionalProperties"] = _all(*additional)
    return out


def _combine(key: str, a: Any, b: Any, pointer: str) -> Any:
    if key == "type":
        ta = {a} if isinstance(a, str) else set(a)
        tb = {b} if isinstance(b, str) else set(b)
        both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) else set())
        both |= {"integer"} if ("number" in ta and "integer" in tb) else set()
        return sorted(both) if both else False
    if key in ("enum", "const"):
        va = [a] if key == "const" else list(a)
        vb = [b] if key == "const" else list(b)
        keys_b = {equality_key(v) for v in vb}
        kept = [v for v in va if equality_key(v) in keys_b]
        if key == "const":
            return a if kept else _Impossible()
        return kept if kept else False
    if key == "required":
        return list(dict.fromkeys(list(a) + list(b)))
    if key in _MAX_KEYS:
        return min(a, b)
    if key in _MIN_KEYS:
        return max(a, b)
    if key in ("minimum", "exclusiveMinimum") and not isinstance(a, bool):
        return max(a, b)
    if key in ("maximum", "exclusiveMaximum") and not isinstance(a, bool):
        return min(a, b)
    if key == "multipleOf":
        if a == b:
            return a
        if float(a).is_integer() and float(b).is_integer():
            return math.lcm(int(a), int(b))
    if key == "uniqueItems":
        return bool(a) or bool(b)
    if key in ("items", "additionalItems", "propertyNames", "contains", "not"):
        if isinstance(a, list) or isinstance(b, list):
            if key == "items":
                return _merge_item_lists(a, b, pointer)
        elif key != "contains":
            return _all(a, b) if key != "not" else {"anyOf": [a, b]}
    if key in ("prefixItems",):
        return _merge_item_lists(a, b, pointer)
    if key in ("anyOf", "oneOf"):
        return {"__product__": [(key, a), (key, b)]} if False else _product(key, a, b, pointer)
    if key == "allOf":
        return list(a) + list(b)
    if a == b:
        return a
    raise SchemaError(
        f"cannot intersect two different {key!r} values exactly", pointer=pointer, keyword=key
    )


class _Impossible:
    """Marker for an unsatisfiable ``const`` intersection (compiled to the empty language)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Impossible)

    def __hash__(self) -> int:
        return 0


def is_impossible(value: Any) -> bool:
    """True if a merged ``const`` can never be satisfied."""
    return isinstance(value, _Impossible)


def _merge_item_lists(a: Any, b: Any, pointer: str) -> list:
    if not (isinstance(a, list) and isinstance(b, list)):
        raise SchemaError(
            "items in list form and schema form cannot be merged exactly here",
            pointer=pointer,
            keyword="items",
        )
    n = max(len(a), len(b))
    return [
        _all(*(x[i] for x in (a, b) if i < len(x))) if any(i < len(x) for x in (a, b)) else True
        for i in range(n)
    ]


def _product(key: str, a: list, b: list, pointer: str) -> list:
    if len(a) * len(b) > 32:
        raise SchemaError(
            f"intersection of two {key} lists is too large to expand", pointer=pointer, keyword=key
        )
    return [_all(x, y) for x in a for y in b]
