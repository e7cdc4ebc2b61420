"""``allOf`` and sibling keywords as a true intersection: merge schemas keyword by keyword.

``merge(schemas)`` returns one schema whose instances are exactly those valid against every
input (or raises ``SchemaError`` for a combination it cannot intersect exactly). Subschemas
under the same property or array position are combined lazily as ``{"allOf": [...]}``.
Every input must already have its top-level ``$ref`` resolved and be a dict.

Dependency keywords merge per trigger name ``K``: "``K`` present => ``A``" and "``K`` present
=> ``B``" is "``K`` present => ``A`` and ``B``" (name lists united, schemas intersected; a
``dependencies`` name list ``L`` is the schema ``{"required": L}``). The two formcast-private
keywords of :mod:`~formcast.grammar.json_schema.dependencies` (``ORDER_KEY``, ``APPLIED_KEY``:
lists of strings) are concatenated without repeats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.number_ranges import to_fraction
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
    "$recursiveRef",
}  # fmt: skip
# formcast-private keywords (not JSON Schema; see the dependencies module): the member order of
# an object whose dependencies are being expanded, and the dependentSchemas already merged
ORDER_KEY = "$formcast:order"
APPLIED_KEY = "$formcast:applied"
# formcast-private: more `contains` schemas beside `contains` (allOf parts that each asked for
# an item of their own; arrays.array_tree writes every order they can be met in)
CONTAINS_ALSO_KEY = "$formcast:contains_also"
# formcast-private: more ``pattern`` values beside ``pattern`` (allOf parts with patterns of
# their own: a string must match each; the string compiler intersects their automata)
PATTERNS_ALSO_KEY = "$formcast:patterns_also"
_PRIVATE_LISTS = (ORDER_KEY, APPLIED_KEY, CONTAINS_ALSO_KEY, PATTERNS_ALSO_KEY)
# formcast-private (see the complement module): the object has some member whose key none of its
# declared names is, with a value valid against this schema (a closed object's negation)
SOME_EXTRA_KEY = "$formcast:some_extra"
_ITEM_KEYS = ("items", "prefixItems", "additionalItems")
_MAX_KEYS = ("maxLength", "maxItems", "maxProperties", "maxContains")
_MIN_KEYS = ("minLength", "minItems", "minProperties", "minContains")


def _all(*schemas: Any) -> Any:
    """Lazy intersection of subschemas (``True`` parts and repeated parts dropped: ``S`` and
    ``S`` is ``S``, which keeps a recursive ``$ref`` merged with itself a plain ``$ref``)."""
    parts: list[Any] = []
    for s in schemas:
        if s is not True and s != {} and not any(s is p or s == p for p in parts):
            parts.append(s)
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
            if key in _PRIVATE_LISTS:
                out[key] = list(dict.fromkeys([*out.get(key, []), *value]))
                continue
            if key == "contains" and key in out and out[key] != value:
                if any("minContains" in t or "maxContains" in t for t in schemas):
                    raise SchemaError(
                        "cannot intersect two different 'contains' values with minContains "
                        "or maxContains exactly",
                        pointer=pointer,
                        keyword="contains",
                    )
                also = out.setdefault(CONTAINS_ALSO_KEY, [])
                if value not in also:
                    also.append(value)
                continue
            if key == "pattern" and key in out and out[key] != value and isinstance(value, str):
                also = out.setdefault(PATTERNS_ALSO_KEY, [])
                if value not in also:
                    also.append(value)
                continue
            if key == SOME_EXTRA_KEY:
                if key in out and out[key] != value:
                    raise SchemaError(
                        "two negated closed objects whose extra members differ cannot be "
                        "merged exactly",
                        pointer=pointer,
                        keyword="additionalProperties",
                    )
                out[key] = value
                continue
            if key not in VALIDATION_KEYWORDS or key in ("properties", "patternProperties"):
                continue
            if key == "additionalProperties" or key in _ITEM_KEYS:
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
    if len(with_patterns) > 1 and any(_is_closed(s) for s in with_patterns):
        # its additionalProperties would hold only for keys its own patterns miss, which
        # one patternProperties / additionalProperties pair cannot say
        raise SchemaError(
            "allOf of several patternProperties, one of them beside a closed "
            "additionalProperties, cannot be merged exactly",
            pointer=pointer,
            keyword="patternProperties",
        )
    # a schema without patterns holds its additionalProperties for every key it does not
    # declare, whatever pattern of another schema the key matches: conjoined into each
    # pattern's schema (exact unless a pattern also matches one of its declared names,
    # which the merged pattern would then wrongly cover)
    uniform = [s for s in schemas if not s.get("patternProperties") and _is_closed(s)]
    for s in uniform if with_patterns else ():
        for pattern in (p for t in with_patterns for p in t["patternProperties"]):
            declared = [n for n in s.get("properties", {}) or {} if pattern_matches(pattern, n)]
            if declared:
                raise SchemaError(
                    f"patternProperties {pattern!r} matches the declared property "
                    f"{declared[0]!r} of a schema with a closed additionalProperties: the "
                    "allOf cannot be merged exactly",
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
        # every additionalProperties is open when there are several: a key's value must then
        # satisfy every matching pattern's schema of every branch, which is what one
        # patternProperties holding all their patterns says (equal patterns intersected)
        patterns: dict[str, list[Any]] = {}
        for s in with_patterns:
            for pattern, sub in s["patternProperties"].items():
                patterns.setdefault(pattern, []).append(sub)
        closed = [s["additionalProperties"] for s in uniform]
        out["patternProperties"] = {
            pattern: _all(*subs, *closed) for pattern, subs in patterns.items()
        }
    if any(key in s for s in schemas for key in _ITEM_KEYS):
        out.update(_merge_items(schemas))
    additional = [s["additionalProperties"] for s in schemas if "additionalProperties" in s]
    if additional:
        out["additionalProperties"] = _all(*additional)
    return out


def _is_closed(s: dict) -> bool:
    """Does ``s`` constrain the values of keys it neither declares nor matches?"""
    return s.get("additionalProperties", True) not in (True, {})


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
    if key in ("dependentRequired", "dependentSchemas", "dependencies"):
        return _merge_dependencies(a, b)
    if key in _MAX_KEYS:
        return min(a, b)
    if key in _MIN_KEYS:
        return max(a, b)
    if key in ("minimum", "exclusiveMinimum") and not isinstance(a, bool):
        return max(a, b)
    if key in ("maximum", "exclusiveMaximum") and not isinstance(a, bool):
        return min(a, b)
    if key == "multipleOf" and _is_number(a) and _is_number(b):
        return _common_multiple(a, b, pointer)
    if key == "uniqueItems":
        return bool(a) or bool(b)
    if key in ("propertyNames", "not"):
        return _all(a, b) if key != "not" else {"anyOf": [a, b]}
    if key in ("anyOf", "oneOf"):
        return _product(key, a, b, pointer)
    if key == "allOf":
        return list(a) + list(b)
    if a == b:
        return a
    raise SchemaError(
        f"cannot intersect two different {key!r} values exactly", pointer=pointer, keyword=key
    )


def _merge_dependencies(a: dict, b: dict) -> dict:
    """Per trigger name: "``K`` present => both": name lists united, schemas intersected."""
    out = dict(a)
    for name, dep in b.items():
        if name not in out:
            out[name] = dep
        elif isinstance(out[name], list) and isinstance(dep, list):
            out[name] = list(dict.fromkeys([*out[name], *dep]))
        else:  # a schema (dependentSchemas, or dependencies with a schema on either side)
            out[name] = _all(*(
                {"required": d} if isinstance(d, list) else d for d in (out[name], dep)
            ))  # fmt: skip
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _common_multiple(a: float, b: float, pointer: str) -> int | float:
    """``multipleOf`` whose multiples are exactly the common multiples of ``a`` and ``b``.

    With ``a = p1/q1`` and ``b = p2/q2`` in lowest terms (exact decimals; floats through their
    shortest ``repr``), ``x/a`` and ``x/b`` are integers iff ``x`` is a multiple of
    ``lcm(p1, p2) / gcd(q1, q2)``. An integral result is an ``int``; a fractional one is the
    float whose ``repr`` is exactly it (``SchemaError`` if no float is).
    """
    if a == b:
        return a
    exact_a, exact_b = to_fraction(a), to_fraction(b)
    common = Fraction(
        math.lcm(exact_a.numerator, exact_b.numerator),
        math.gcd(exact_a.denominator, exact_b.denominator),
    )
    if common.denominator == 1:
        return common.numerator
    as_float = float(common)
    if to_fraction(as_float) != common:
        raise SchemaError(
            f"the common multiple {common} of multipleOf {a} and {b} is not a float",
            pointer=pointer,
            keyword="multipleOf",
        )
    return as_float


class _Impossible:
    """Marker for an unsatisfiable ``const`` intersection (compiled to the empty language)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Impossible)

    def __hash__(self) -> int:
        return 0


def is_impossible(value: Any) -> bool:
    """True if a merged ``const`` can never be satisfied."""
    return isinstance(value, _Impossible)


def _item_schemas(s: dict) -> tuple[list, Any]:
    """``(prefix, rest)``: the schemas of ``s``'s first elements and of every later one.

    2020-12 spelling ``prefixItems`` + ``items``; older spelling list-form ``items`` +
    ``additionalItems``; a schema-form ``items`` alone applies to every element (an
    ``additionalItems`` beside it has no effect)."""
    items = s.get("items", True)
    if isinstance(items, list):
        return list(items), s.get("additionalItems", True)
    return list(s.get("prefixItems", [])), items


def _merge_items(schemas: list[dict]) -> dict:
    """The item keywords of the intersection, in 2020-12 spelling.

    Element ``i`` must satisfy, in every input, that input's ``i``-th prefix schema or, past
    its prefix, its rest schema; so the merged prefix is as long as the longest input prefix,
    position ``i`` the intersection over the inputs, and the merged rest the intersection of
    the rests (``{items: R}`` with ``{prefixItems: [A]}`` is ``prefixItems: [A and R]``,
    ``items: R``, not ``A`` alone for the first element)."""
    splits = [_item_schemas(s) for s in schemas]
    num_prefix = max(len(prefix) for prefix, _ in splits)
    prefix_items = [
        _all(*(prefix[i] if i < len(prefix) else rest for prefix, rest in splits))
        for i in range(num_prefix)
    ]
    out: dict[str, Any] = {"items": _all(*(rest for _, rest in splits))}
    if prefix_items:
        out["prefixItems"] = prefix_items
    return out


def _product(key: str, a: list, b: list, pointer: str) -> list:
    if len(a) * len(b) > 32:
        raise SchemaError(
            f"intersection of two {key} lists is too large to expand", pointer=pointer, keyword=key
        )
    return [_all(x, y) for x in a for y in b]
