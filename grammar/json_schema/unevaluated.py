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
it matches, which depends on the instance: refused, as is an ``unevaluated*`` inside a
subschema applied in place (its own evaluated set differs).

Branches (``unevaluatedProperties`` only). A ``oneOf`` / ``anyOf`` / ``if`` among the in-place
subschemas adds what its validating branches evaluate, so the closure is written per choice
of validating branches and the schema gets ``anyOf`` over the choices, each ``allOf`` of the
chosen branches and their closure (the applicators themselves stay and still decide
validity): ``oneOf`` -- exactly one branch validates, so one choice per branch; ``anyOf`` --
the validating branches are some nonempty subset, and a subset's closure only grows with it,
so one choice per subset (at most ``MAX_BRANCH_CHOICES``); ``if`` -- ``if`` and ``then``
when ``if`` validates (``if`` evaluates too), else ``else``. Several applicators multiply
their choices. A branch with branches or ``unevaluated*`` of its own is refused, as are
``dependentSchemas`` and ``$dynamicRef`` beside the keyword.

In draft-04/06/07 the keywords do not exist (unknown keywords are ignored there).
"""

from __future__ import annotations

import itertools
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.refs import resolve_ref

KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")
_OLD_DRAFTS = ("draft4", "draft6", "draft7")
_BRANCHES = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "$dynamicRef")
# branch applicators whose validating branches are expanded (unevaluatedProperties)
_EXPANDED = ("anyOf", "oneOf", "if", "then", "else")
# the most choices of validating branches written out (anyOf: one per nonempty subset)
MAX_BRANCH_CHOICES = 64


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
    if "unevaluatedProperties" in schema and any(k in s for s in reached for k in _EXPANDED):
        _check(reached, schema, "unevaluatedProperties", pointer, (), _EXPANDED)
        part = _branch_choices(schema, reached, root, draft, pointer)
        if part is not None:
            out["allOf"] = [*out.get("allOf", []), part]
    elif "unevaluatedProperties" in schema:
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


def _branch_choices(
    schema: dict, reached: list[dict], root: Any, draft: str, pointer: str
) -> dict | None:
    """``anyOf`` over the choices of validating branches, each with its closure under
    ``unevaluatedProperties`` (module docstring); None if every property is evaluated."""
    choices: list[tuple[list[Any], list[dict]]] = [([], [])]  # (branches, their in-place nodes)
    for node in reached:
        for options in _applicator_options(node, root, draft, pointer):
            choices = [
                (schemas + more, nodes + more_nodes)
                for schemas, nodes in choices
                for more, more_nodes in options
            ]
            if len(choices) > MAX_BRANCH_CHOICES:
                raise SchemaError(
                    f"unevaluatedProperties over more than {MAX_BRANCH_CHOICES} choices of "
                    "validating branches is not supported",
                    pointer=pointer,
                    keyword="unevaluatedProperties",
                )
    parts = []
    for schemas, nodes in choices:
        closure = _closure([*reached, *nodes], schema["unevaluatedProperties"])
        if closure is None and not schemas:
            return None  # every property is evaluated whatever validates
        parts.append({"allOf": [*schemas, closure if closure is not None else True]})
    return {"anyOf": parts}


def _applicator_options(
    node: dict, root: Any, draft: str, pointer: str
) -> list[list[tuple[list[Any], list[dict]]]]:
    """Per branch applicator of ``node``: its choices ``(schemas that validate, their
    in-place nodes)``."""
    found = []
    if isinstance(node.get("oneOf"), list):
        found.append([([b], _branch_nodes(b, root, draft, pointer)) for b in node["oneOf"]])
    if isinstance(node.get("anyOf"), list):
        branches = node["anyOf"]
        if 2 ** len(branches) - 1 > MAX_BRANCH_CHOICES:
            raise SchemaError(
                f"unevaluatedProperties beside an anyOf of {len(branches)} branches (one choice "
                f"per subset that validates: over {MAX_BRANCH_CHOICES})",
                pointer=pointer,
                keyword="unevaluatedProperties",
            )
        options = []
        for size in range(1, len(branches) + 1):
            for subset in itertools.combinations(branches, size):
                nodes = [n for b in subset for n in _branch_nodes(b, root, draft, pointer)]
                options.append((list(subset), nodes))
        found.append(options)
    if "if" in node:
        condition = node["if"]
        then, otherwise = node.get("then", True), node.get("else", True)
        found.append([
            ([condition, then], _branch_nodes(condition, root, draft, pointer)
             + _branch_nodes(then, root, draft, pointer)),
            ([{"not": condition}, otherwise], _branch_nodes(otherwise, root, draft, pointer)),
        ])  # fmt: skip
    return found


def _branch_nodes(branch: Any, root: Any, draft: str, pointer: str) -> list[dict]:
    """The in-place nodes of one branch (refused if it has branches or unevaluated*)."""
    if not isinstance(branch, dict):
        return []
    nodes = _in_place(branch, root, draft, pointer)
    for node in nodes:
        for key in _BRANCHES + KEYWORDS:
            if key in node:
                raise SchemaError(
                    f"unevaluatedProperties over a branch with {key!r} of its own is not supported",
                    pointer=pointer,
                    keyword="unevaluatedProperties",
                )
    return nodes


def _closure(nodes: list[dict], unevaluated: Any) -> dict | None:
    """``additionalProperties: unevaluated`` beside every name and pattern ``nodes``
    evaluate (as ``true``), or None if one of them evaluates every property."""
    if any("additionalProperties" in node for node in nodes):
        return None
    properties: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    for node in nodes:
        for name in node.get("properties") or {}:
            properties.setdefault(name, True)
        for pattern in node.get("patternProperties") or {}:
            patterns.setdefault(pattern, True)
    closure: dict[str, Any] = {"additionalProperties": unevaluated}
    if properties:
        closure["properties"] = properties
    if patterns:
        closure["patternProperties"] = patterns
    return closure


def _check(
    reached: list[dict], schema: dict, keyword: str, pointer: str, extra: tuple,
    allowed: tuple = (),
) -> None:  # fmt: skip
    for node in reached:
        for key in _BRANCHES + extra:
            if key in allowed:
                continue
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
