"""``unevaluatedProperties`` / ``unevaluatedItems`` (2019-09 and later) as plain keywords.

A property is *evaluated* at a schema ``S`` when ``properties``, ``patternProperties`` or
``additionalProperties`` of ``S`` or of a subschema applied in place to the same instance
(``allOf`` members, a ``$ref`` target, recursively) looked at it; ``unevaluatedProperties: U``
applies ``U`` to the others. When no in-place applicator depends on a branch (``anyOf``,
``oneOf``, ``if``/``then``/``else``, ``dependentSchemas``: which of them validates decides
what is evaluated), the evaluated set is fixed: the union of the names and patterns of
those subschemas, or every property if one of them has ``additionalProperties``. Then
``unevaluatedProperties: U`` equals ``additionalProperties: U`` at ``S`` with those names and
patterns added to ``S``'s own as ``true`` (they constrain nothing; the subschemas still do).
Items likewise: the longest ``prefixItems`` (2019-09: array ``items``) of the subschemas is
evaluated, or every item if one has ``items`` (2019-09: schema ``items`` or
``additionalItems``); ``unevaluatedItems: U`` is ``items: U`` (2019-09: ``additionalItems``)
after ``prefixItems`` padded with ``true`` to that length. ``contains`` evaluates the items
it matches, which depends on the instance: refused, as are the branch cases and an
``unevaluated*`` inside a subschema applied in place (its own evaluated set differs).

In draft-04/06/07 the keywords do not exist (unknown keywords are ignored there).
"""

from __future__ import annotations

from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.refs import resolve_ref

KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")
_OLD_DRAFTS = ("draft4", "draft6", "draft7")
_BRANCHES = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "$dynamicRef")


def express_unevaluated(schema: dict, root: Any, draft: str, pointer: str) -> dict:
    """``schema`` with its ``unevaluated*`` keywords expressed by plain ones (module docstring).

    Raises
    ------
    SchemaError
        The evaluated set depends on the instance (a branch applicator, ``contains``) or an
        in-place subschema has ``unevaluated*`` of its own; names the keyword and pointer.
    """
    out = {k: v for k, v in schema.items() if k not in KEYWORDS}
    if draft in _OLD_DRAFTS:
        return out  # unknown keywords there
    reached = _in_place(schema, root, draft, pointer)
    if "unevaluatedProperties" in schema:
        _check(reached, schema, "unevaluatedProperties", pointer, ())
        if not any("additionalProperties" in s for s in reached):
            properties = dict(schema.get("properties") or {})
            patterns = dict(schema.get("patternProperties") or {})
            for s in reached:
                for name in s.get("properties") or {}:
                    properties.setdefault(name, True)
                for pattern in s.get("patternProperties") or {}:
                    patterns.setdefault(pattern, True)
            if properties:
                out["properties"] = properties
            if patterns:
                out["patternProperties"] = patterns
            out["additionalProperties"] = schema["unevaluatedProperties"]
    if "unevaluatedItems" in schema:
        _check(reached, schema, "unevaluatedItems", pointer, ("contains",))
        if draft == "draft2019-09":
            _items_2019(schema, reached, out)
        else:
            _items_2020(schema, reached, out)
    return out


def _in_place(schema: dict, root: Any, draft: str, pointer: str) -> list[dict]:
    """``schema`` and every subschema applied in place to its instance (allOf, $ref)."""
    found: list[dict] = []
    seen: set[int] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        stack.extend(node.get("allOf") or [])
        ref = node.get("$ref")
        if isinstance(ref, str):
            stack.append(resolve_ref(root, ref, pointer)[0])
    return found


def _check(reached: list[dict], schema: dict, keyword: str, pointer: str, extra: tuple) -> None:
    for node in reached:
        for key in _BRANCHES + extra:
            if key in node:
                raise SchemaError(
                    f"{keyword} beside {key!r} (here or in an allOf / $ref applied in place): "
                    "what is evaluated depends on the instance; not supported",
                    pointer=pointer,
                    keyword=keyword,
                )
        if node is not schema and any(k in node for k in KEYWORDS):
            raise SchemaError(
                f"{keyword} over a subschema that has unevaluated* of its own (in an allOf / "
                "$ref applied in place) is not supported",
                pointer=pointer,
                keyword=keyword,
            )


def _items_2020(schema: dict, reached: list[dict], out: dict) -> None:
    if any("items" in s for s in reached):
        return  # every item is evaluated
    length = max(len(s.get("prefixItems") or []) for s in reached)
    prefix = list(schema.get("prefixItems") or [])
    prefix += [True] * (length - len(prefix))
    if prefix:
        out["prefixItems"] = prefix
    out["items"] = schema["unevaluatedItems"]


def _items_2019(schema: dict, reached: list[dict], out: dict) -> None:
    if any("additionalItems" in s or isinstance(s.get("items"), (dict, bool)) for s in reached):
        return  # every item is evaluated
    length = max(len(s["items"]) if isinstance(s.get("items"), list) else 0 for s in reached)
    prefix = list(schema["items"]) if isinstance(schema.get("items"), list) else []
    prefix += [True] * (length - len(prefix))
    if prefix:
        out["items"] = prefix
        out["additionalItems"] = schema["unevaluatedItems"]
    else:
        out["items"] = schema["unevaluatedItems"]
