"""has_ref_cycle: does a document's ``$ref`` graph, walked from the root, close a cycle?

A cycle the compiler follows makes the schema recursive: no regular expression describes it,
and the regex route finds that out only when its build reaches the cycle (package_json: 53 ms
into the attempt). This scan finds it first, so ``compile_json_schema`` can take the
structural route at once. It reads what the compiler may visit: every subschema except data
keywords and ``definitions`` / ``$defs`` (reached through references only), following each
local ``$ref`` to its target, except references to an any-value target that the compiler
reads as ``true`` (a recursive ``JsonValue``: no recursion in the regex, see
:func:`~formcast.grammar.json_schema.any_value_schema.is_any_value_target`). It may see a
cycle the compiler never follows (behind an unsatisfiable branch, say); the caller then
falls back to the regex route, so the answer only orders the attempts.
"""

from __future__ import annotations

from typing import Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compiler import reads_as_any_value
from formcast.grammar.json_schema.refs import (
    DATA_KEYWORDS,
    REF_SIBLINGS_IGNORED,
    detect_draft,
    resolve_ref,
    schema_objects,
)

_NOT_WALKED = DATA_KEYWORDS | {"definitions", "$defs"}


def _holds_ref(schema: dict) -> bool:
    return isinstance(schema.get("$ref"), str)


def has_ref_cycle(root: Any, *, strict: bool, max_any_depth: int | None) -> bool:
    """True if following local ``$ref`` s from ``root`` (as described in the module
    docstring) comes back to a reference on the current path."""
    if not isinstance(root, dict):
        return False
    draft = detect_draft(root)
    on_path: set[str] = set()
    done: set[str] = set()

    def refs_below(node: Any) -> list[tuple[str, dict]]:
        """``($ref, the schema holding it)`` of the subschemas the compiler may visit."""
        # drafts whose $ref ignores its siblings: the compiler reads the target alone
        is_leaf = _holds_ref if draft in REF_SIBLINGS_IGNORED else None
        return [
            (item["$ref"], item)
            for item in schema_objects(node, _NOT_WALKED, is_leaf)
            if _holds_ref(item)
        ]

    # depth-first over references, iteratively: (ref, its target's references, next index)
    stack: list[tuple[str, list[tuple[str, dict]], int]] = [("", refs_below(root), 0)]
    while stack:
        ref, below, k = stack.pop()
        if k == len(below):
            on_path.discard(ref)
            done.add(ref)
            continue
        stack.append((ref, below, k + 1))
        nxt, holder = below[k]
        if nxt in on_path:
            return True
        if nxt in done:
            continue
        try:
            target, target_ptr = resolve_ref(root, nxt, "")
        except SchemaError:
            done.add(nxt)  # refused by both routes alike, with its pointer
            continue
        if reads_as_any_value(
            root, holder, target, target_ptr,
            draft=draft, strict=strict, max_any_depth=max_any_depth,
        ):  # fmt: skip
            done.add(nxt)
            continue
        on_path.add(nxt)
        stack.append((nxt, refs_below(target), 0))
    return False
