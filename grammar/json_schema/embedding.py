"""Embedding a schema inside another document: its local ``$ref`` s re-rooted.

A ``$ref`` such as ``#/$defs/Address`` or ``#`` is resolved against the *document root*. A
schema placed at pointer ``P`` of a larger document (a tool's ``parameters`` inside the
tool-call envelope) keeps its meaning only if every local reference is rewritten to
``#P/...``; :func:`embed_schema` does that on a copy, walking only the keywords that hold
schemas (data under ``const`` / ``enum`` / ``default`` is never touched). A reference that
names the schema's own ``$id`` (``https://x/s.json#/a``) is local too; any other base URI
stays as it is and is refused later by the resolver, as it would be unembedded.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from formcast.grammar.json_schema.keyword_types import subschemas


def embed_schema(schema: Any, at_pointer: str) -> Any:
    """A copy of ``schema`` whose local references resolve as before once it sits at
    ``at_pointer`` (a JSON pointer such as ``/properties/arguments``) of another document.

    Parameters
    ----------
    schema:
        A JSON Schema (dict or bool); ``$defs`` / ``definitions`` travel with it.
    at_pointer:
        Where the copy will sit in the new document (``""`` = the root: unchanged).

    Raises
    ------
    SchemaError
        A keyword that holds schemas has a value of the wrong shape.
    """
    if not isinstance(schema, dict):
        return schema
    own_id = schema.get("$id", schema.get("id"))
    base = own_id.split("#")[0] if isinstance(own_id, str) else None
    copy = deepcopy(schema)  # JSON data: the caller's object is never changed
    stack = [copy]
    while stack:
        node = stack.pop()
        ref = node.get("$ref")
        if isinstance(ref, str):
            node["$ref"] = _rebased(ref, base, at_pointer)
        stack.extend(sub for sub, _ in subschemas(node, "") if isinstance(sub, dict))
    if base is not None:  # the embedded copy is no longer a document of its own
        copy.pop("$id", None)
        copy.pop("id", None)
    return copy


def _rebased(ref: str, base: str | None, at_pointer: str) -> str:
    ref_base, _, fragment = ref.partition("#")
    if ref_base and ref_base != base:
        return ref  # another document: refused by the resolver, embedded or not
    if fragment and not fragment.startswith("/"):
        return ref  # an anchor name: refused by the resolver, embedded or not
    return f"#{at_pointer}{fragment}"
