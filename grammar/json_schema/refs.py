"""Draft detection and local ``$ref`` resolution (JSON pointers with ``~0``/``~1``/%-escapes)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from formcast.errors import SchemaError

_DRAFTS = (
    ("draft-03", "draft3"),
    ("draft-04", "draft4"),
    ("draft-06", "draft6"),
    ("draft-07", "draft7"),
    ("2019-09", "draft2019-09"),
    ("2020-12", "draft2020-12"),
)


def detect_draft(root: Any) -> str:
    """The draft named by the root ``$schema`` (default 2020-12)."""
    uri = root.get("$schema", "") if isinstance(root, dict) else ""
    for marker, name in _DRAFTS:
        if isinstance(uri, str) and marker in uri:
            if name == "draft3":
                raise SchemaError("draft-03 schemas are not supported", keyword="$schema")
            return name
    return "draft2020-12"


def escape_pointer_token(token: str) -> str:
    """JSON-pointer-escape one reference token."""
    return token.replace("~", "~0").replace("/", "~1")


def resolve_ref(root: Any, ref: str, pointer: str) -> tuple[Any, str]:
    """The subschema a local ``$ref`` names, and its JSON pointer.

    Supports ``#``, ``#/json/pointer`` and a base URI equal to the root ``$id``/``id``;
    anything else (remote documents, ``$anchor`` names) raises ``SchemaError``.
    """
    base, _, fragment = ref.partition("#")
    root_id = root.get("$id", root.get("id")) if isinstance(root, dict) else None
    if base and not (isinstance(root_id, str) and root_id.split("#")[0] == base):
        raise SchemaError(
            f"non-local $ref {ref!r} is not supported", pointer=pointer, keyword="$ref"
        )
    fragment = unquote(fragment)
    if fragment and not fragment.startswith("/"):
        raise SchemaError(
            f"$ref to an anchor {ref!r} is not supported", pointer=pointer, keyword="$ref"
        )
    node = root
    for raw in fragment.split("/")[1:] if fragment else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise SchemaError(f"$ref {ref!r} does not resolve", pointer=pointer, keyword="$ref")
    return node, "/" + fragment.lstrip("/") if fragment else ""
