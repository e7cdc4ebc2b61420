"""JSON values in formcast's output layout: type names, equality, serialization, literals.

``serialize(value, schema, root)`` writes a value the way a schema-constrained generation
writes it: object keys in the schema's ``properties`` order (then ``$ref`` targets, ``allOf``
parts and ``anyOf``/``oneOf`` branches in order; keys no schema names keep their order, last),
compact separators, strings as ``json.dumps(..., ensure_ascii=False)``, integral floats under an
integer-only schema written as integers.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.grammar.json_schema.refs import resolve_ref

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


def type_of(value: Any) -> set[str]:
    """JSON Schema types a Python JSON value belongs to (an integral float is an integer)."""
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"integer", "number"} if value.is_integer() else {"number"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"}


def equality_key(value: Any) -> str:
    """A key equal for JSON-Schema-equal values (1 == 1.0, True != 1, key order ignored)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "n:" + (str(int(value)) if float(value).is_integer() else repr(float(value)))
    if isinstance(value, list):
        return "[" + ",".join(equality_key(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ",".join(f"{json.dumps(k)}:{equality_key(value[k])}" for k in sorted(value)) + "}"
        )
    return json.dumps(value, ensure_ascii=False)


def property_order(schema: Any, root: Any, _depth: int = 0) -> list[str]:
    """Property names in the order formcast writes them for ``schema``."""
    if not isinstance(schema, dict) or _depth > 20:
        return []
    names: list[str] = []
    if "$ref" in schema and isinstance(schema["$ref"], str):
        try:
            names += property_order(resolve_ref(root, schema["$ref"], "")[0], root, _depth + 1)
        except ValueError:
            pass
    props = schema.get("properties")
    if isinstance(props, dict):
        names += list(props)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []) if isinstance(schema.get(key), list) else []:
            names += property_order(sub, root, _depth + 1)
    # required names that no "properties" declares come after the declared ones, in
    # "required" order (schema_objects lays them out so)
    required = schema.get("required")
    if isinstance(required, list):
        names += [n for n in required if isinstance(n, str)]
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]


def _subschemas(schema: Any, root: Any, key: str, name: str | int, _depth: int = 0) -> list:
    """Subschemas that apply to a property (key="properties") or array position."""
    if not isinstance(schema, dict) or _depth > 20:
        return []
    out = []
    if "$ref" in schema and isinstance(schema["$ref"], str):
        try:
            out += _subschemas(
                resolve_ref(root, schema["$ref"], "")[0], root, key, name, _depth + 1
            )
        except ValueError:
            pass
    if key == "properties":
        props = schema.get("properties")
        if isinstance(props, dict) and name in props:
            out.append(props[name])
        elif isinstance(schema.get("additionalProperties"), dict):
            out.append(schema["additionalProperties"])
    else:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):
            prefix, items = items, schema.get("additionalItems")
        if isinstance(prefix, list) and isinstance(name, int) and name < len(prefix):
            out.append(prefix[name])
        elif isinstance(items, dict):
            out.append(items)
    for k in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(k, []) if isinstance(schema.get(k), list) else []:
            out += _subschemas(sub, root, key, name, _depth + 1)
    return out


def _integer_only(schemas: list, root: Any) -> bool:
    for s in schemas:
        if isinstance(s, dict) and "$ref" in s:
            try:
                s = resolve_ref(root, s["$ref"], "")[0]
            except ValueError:
                continue
        if isinstance(s, dict) and s.get("type") == "integer":
            return True
    return False


def ordered(value: Any, schema: Any, root: Any) -> Any:
    """``value`` with dict keys reordered (recursively) into formcast's layout order."""
    if isinstance(value, dict):
        order = property_order(schema, root)
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        out = {}
        for k in keys:
            subs = _subschemas(schema, root, "properties", k)
            out[k] = ordered(value[k], {"allOf": subs} if subs else {}, root)
            if isinstance(out[k], float) and out[k].is_integer() and _integer_only(subs, root):
                out[k] = int(out[k])
        return out
    if isinstance(value, list):
        out_list = []
        for i, v in enumerate(value):
            subs = _subschemas(schema, root, "items", i)
            item = ordered(v, {"allOf": subs} if subs else {}, root)
            if isinstance(item, float) and item.is_integer() and _integer_only(subs, root):
                item = int(item)
            out_list.append(item)
        return out_list
    return value


def serialize(value: Any, schema: Any = None, root: Any = None) -> str:
    """Compact JSON text of ``value`` in formcast's layout for ``schema``."""
    root = schema if root is None else root
    v = ordered(value, schema, root)
    if isinstance(v, float) and v.is_integer() and _integer_only([schema], root):
        v = int(v)
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
