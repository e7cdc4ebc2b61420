"""Structural tag requests -> frozen format trees (data, never text parsed again).

The request shape is XGrammar's and vLLM's ``structural_tag`` (``{"type": "structural_tag",
"format": {...}}``), so requests port unchanged. Format nodes, by ``type``:

- ``const_string`` (``value``): exactly that text.
- ``token`` (``token``: the text of one of the tokenizer's special tokens, e.g.
  ``"[TOOL_CALLS]"``): that control token, or its text written by ordinary tokens. A token
  object ``{"type": "token", "token": ...}`` may also stand for a tag's ``begin`` or ``end``
  and for a trigger. The grammar is compiled over the vocabulary in which the named special
  tokens write their text (``Vocabulary.with_control_tokens``), so such a token is allowed
  wherever its text may come, and nowhere else; decode with special tokens shown to see it.
- ``json_schema`` (``json_schema``: an object or a boolean; ``style`` must be ``"json"``):
  JSON valid against the schema, in formcast's JSON layout.
- ``regex`` (``pattern``, Python ``re`` dialect, fullmatch).
- ``grammar`` (``grammar``): a context-free grammar, Lark syntax, or GBNF / XGrammar EBNF
  when the text defines rules with ``::=`` (start rule ``root``).
- ``any_text`` (``excludes``: strings that never occur in the text).
- ``sequence`` / ``or`` (``elements``: one or more formats).
- ``optional`` / ``star`` / ``plus`` (``content``) and ``repeat`` (``content``, ``min``,
  ``max``; ``max: -1`` unbounded).
- ``tag`` (``begin``, ``content``, ``end``: a string or a non-empty list of strings).
- ``triggered_tags`` (``triggers``, ``tags``, ``at_least_one``, ``stop_after_first``,
  ``excludes``).
- ``tags_with_separator`` (``tags``, ``separator``, ``at_least_one``, ``stop_after_first``).

vLLM's older shape ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
"triggers": [...]}`` is read as one ``triggered_tags`` of JSON-schema tags. A bare format
(``{"type": "tag", ...}``) is accepted as the whole request's format. The semantics of each
node (free text, triggers, end detection) are those of
:mod:`~formcast.grammar.structural_tag.compile`.

Nothing is silently ignored: an unknown ``type`` or field, a wrong value type, an empty list
where one item is needed, a token-level format other than ``token`` (``any_tokens``, ...) or
a token given by id (give its text), a bound in
tokens (``max_tokens``) or characters (``max_chars``), or a non-JSON ``style`` raises
:class:`~formcast.grammar.structural_tag.error.StructuralTagError` naming the node's JSON
pointer.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from formcast.grammar.structural_tag.error import StructuralTagError


@dataclass(frozen=True)
class ConstString:
    """Exactly ``value``."""

    value: str
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Token:
    """A control (special) token, by its text: the token, or that text."""

    text: str
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class JsonSchema:
    """JSON text valid against a schema (kept as its JSON text, so the node is hashable)."""

    schema_text: str
    pointer: str = field(default="", compare=False)
    any_order: bool = False  # members in any order (``compile_json_schema``'s option)

    @property
    def schema(self) -> Any:
        """The schema as Python data."""
        return json.loads(self.schema_text)


@dataclass(frozen=True)
class Regex:
    """Text that fullmatches ``pattern`` (Python ``re`` dialect)."""

    pattern: str
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class GrammarText:
    """Text of a context-free grammar; ``syntax`` is ``"lark"`` or ``"gbnf"``."""

    grammar: str
    syntax: str
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class AnyText:
    """Free text in which no string of ``excludes`` occurs."""

    excludes: tuple[str, ...] = ()
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Sequence:
    """The elements one after another."""

    elements: tuple[Format, ...]
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Or:
    """Any one of the elements."""

    elements: tuple[Format, ...]
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Repeat:
    """``content`` repeated ``min_count`` to ``max_count`` times (``None``: unbounded)."""

    content: Format
    min_count: int
    max_count: int | None
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Tag:
    """``begin``, then ``content``, then one of ``ends``."""

    begin: str
    content: Format
    ends: tuple[str, ...]
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class TriggeredTags:
    """Free text; where a trigger first occurs, a tag whose begin starts with it; repeat."""

    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: tuple[str, ...] = ()
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class TagsWithSeparator:
    """Tags separated by ``separator`` and nothing else."""

    tags: tuple[Tag, ...]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False
    pointer: str = field(default="", compare=False)


Format = (
    ConstString
    | Token
    | JsonSchema
    | Regex
    | GrammarText
    | AnyText
    | Sequence
    | Or
    | Repeat
    | Tag
    | TriggeredTags
    | TagsWithSeparator
)


@dataclass(frozen=True)
class StructuralTag:
    """A whole structural tag request: one format tree.

    Parameters
    ----------
    format : Format
        The root format node (every node carries its JSON pointer in the request).
    control_tokens : tuple of (str, str)
        ``(text, pointer)`` of every control token the request names (``token`` nodes and
        token objects), first mention, sorted by text.
    """

    format: Format
    control_tokens: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_request(cls, request: object) -> StructuralTag:
        """Parse a request (a dict, or its JSON text); see the module docstring.

        Raises
        ------
        StructuralTagError
            For anything malformed or unsupported, naming the node's JSON pointer.
        """
        return parse_structural_tag(request)

    def to_json(self) -> str:
        """A canonical JSON text of the format tree (the compile cache key)."""
        data = _to_data(self.format)
        if self.control_tokens:
            data = {"format": data, "control_tokens": [t for t, _ in self.control_tokens]}
        return json.dumps(data, sort_keys=True, ensure_ascii=False)


# the control tokens named while one request is parsed: text -> pointer of its first mention
_CONTROL_TOKENS: ContextVar[dict[str, str] | None] = ContextVar("control_tokens", default=None)
_TOKEN_LEVEL = {"exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch"}
_OTHER_KNOWN = {"dispatch", "qwen_xml_parameter"}


def parse_structural_tag(request: object) -> StructuralTag:
    """Parse a structural tag request into a :class:`StructuralTag`.

    Parameters
    ----------
    request : dict or str
        ``{"type": "structural_tag", "format": {...}}``, vLLM's ``{"type":
        "structural_tag", "structures": [...], "triggers": [...]}``, a bare format dict, or
        the JSON text of any of these.

    Returns
    -------
    StructuralTag

    Raises
    ------
    StructuralTagError
        Names the JSON pointer of the bad node and what is wrong.
    """
    if isinstance(request, StructuralTag):
        return request
    named: dict[str, str] = {}
    reset = _CONTROL_TOKENS.set(named)
    try:
        root = _root(request)
    finally:
        _CONTROL_TOKENS.reset(reset)
    return StructuralTag(root, tuple(sorted(named.items())))


def _root(request: object) -> Format:
    if isinstance(request, str):
        try:
            request = json.loads(request)
        except json.JSONDecodeError as exc:
            raise StructuralTagError("", f"not valid JSON text: {exc}") from None
    obj = _object(request, "")
    if obj.get("type") == "structural_tag":
        if "structures" in obj or "triggers" in obj:
            return _legacy(obj)
        _fields(obj, "", required={"type", "format"})
        return _format(obj["format"], "/format")
    if "type" not in obj and "structures" in obj:
        return _legacy(obj)
    return _format(obj, "")


def _legacy(obj: dict) -> TriggeredTags:
    """vLLM's ``structures`` + ``triggers`` shape."""
    _fields(obj, "", required={"structures", "triggers"}, optional={"type"})
    structures = _list(obj["structures"], "/structures", allow_empty=False)
    tags = []
    for k, item in enumerate(structures):
        where = f"/structures/{k}"
        item = _fields(_object(item, where), where, required={"begin", "schema", "end"})
        schema = item["schema"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as exc:
                raise StructuralTagError(f"{where}/schema", f"not valid JSON text: {exc}") from None
        content = _json_schema_node(schema, f"{where}/schema")
        begin = _string(item["begin"], f"{where}/begin")
        end = _string(item["end"], f"{where}/end")
        tags.append(Tag(begin, content, (end,), where))
    triggers = _strings(obj["triggers"], "/triggers", allow_empty=False, non_empty_items=True)
    node = TriggeredTags(triggers, tuple(tags), pointer="")
    _check_triggered(node)
    return node


def _format(value: object, where: str) -> Format:
    obj = _object(value, where)
    kind = obj.get("type")
    if kind is None:
        raise StructuralTagError(where, "missing field 'type'")
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        if kind in _TOKEN_LEVEL:
            raise StructuralTagError(
                where, f"token-level format {kind!r} is not supported (text-level formats only)"
            )
        if kind in _OTHER_KNOWN:
            raise StructuralTagError(where, f"format type {kind!r} is not supported")
        raise StructuralTagError(
            f"{where}/type", f"unknown type {kind!r}; expected one of {sorted(_PARSERS)}"
        )
    return parse(obj, where)


def _token(obj: dict, where: str) -> Token:
    return Token(_token_text(obj, where), where)


def _token_text(obj: dict, where: str) -> str:
    """The text of a token object, recorded as a control token of the request."""
    _fields(obj, where, required={"type", "token"})
    value = obj["token"]
    if isinstance(value, int) and not isinstance(value, bool):
        raise StructuralTagError(
            f"{where}/token", "a token given by id is not supported: give the token's text"
        )
    text = _string(value, f"{where}/token")
    if not text:
        raise StructuralTagError(f"{where}/token", "must not be the empty string")
    named = _CONTROL_TOKENS.get()
    assert named is not None, "token objects are parsed inside parse_structural_tag"
    named.setdefault(text, f"{where}/token")
    return text


def _text(value: object, where: str) -> str:
    """A string, or a token object standing for its text (a tag's begin/end, a trigger)."""
    if isinstance(value, dict) and value.get("type") == "token":
        return _token_text(value, where)
    return _string(value, where)


def _const_string(obj: dict, where: str) -> ConstString:
    _fields(obj, where, required={"type", "value"})
    return ConstString(_string(obj["value"], f"{where}/value"), where)


def _json_schema(obj: dict, where: str) -> JsonSchema:
    _fields(obj, where, required={"type", "json_schema"}, optional={"style", "any_order"})
    style = obj.get("style", "json")
    if style != "json":
        raise StructuralTagError(
            f"{where}/style", f"style {style!r} is not supported (only 'json')"
        )
    any_order = obj.get("any_order", False)
    if not isinstance(any_order, bool):
        raise StructuralTagError(
            f"{where}/any_order", f"any_order must be true or false, got {_kind(any_order)}"
        )
    return _json_schema_node(obj["json_schema"], f"{where}/json_schema", any_order)


def _json_schema_node(schema: object, schema_where: str, any_order: bool = False) -> JsonSchema:
    if not isinstance(schema, (dict, bool)):
        raise StructuralTagError(
            schema_where, f"a JSON schema must be an object or a boolean, got {_kind(schema)}"
        )
    try:
        text = json.dumps(schema, ensure_ascii=False)  # key order kept: it is property order
    except (TypeError, ValueError) as exc:
        raise StructuralTagError(schema_where, f"the schema is not JSON data: {exc}") from None
    return JsonSchema(text, schema_where, any_order)


def _regex(obj: dict, where: str) -> Regex:
    _fields(obj, where, required={"type", "pattern"})
    return Regex(_string(obj["pattern"], f"{where}/pattern"), where)


def _grammar(obj: dict, where: str) -> GrammarText:
    _fields(obj, where, required={"type", "grammar"})
    text = _string(obj["grammar"], f"{where}/grammar")
    syntax = "gbnf" if "::=" in text else "lark"
    return GrammarText(text, syntax, where)


def _any_text(obj: dict, where: str) -> AnyText:
    _fields(obj, where, required={"type"}, optional={"excludes", "max_tokens", "max_chars"})
    for bound in ("max_tokens", "max_chars"):
        if obj.get(bound) is not None:
            raise StructuralTagError(
                f"{where}/{bound}",
                f"{bound} is not supported: bounded free text needs a token-level budget "
                "that this grammar kind does not enforce",
            )
    excludes = _strings(obj.get("excludes", []), f"{where}/excludes", non_empty_items=True)
    return AnyText(excludes, where)


def _sequence(obj: dict, where: str) -> Sequence:
    _fields(obj, where, required={"type", "elements"})
    return Sequence(_elements(obj["elements"], f"{where}/elements"), where)


def _or(obj: dict, where: str) -> Or:
    _fields(obj, where, required={"type", "elements"})
    return Or(_elements(obj["elements"], f"{where}/elements"), where)


def _elements(value: object, where: str) -> tuple[Format, ...]:
    items = _list(value, where, allow_empty=False)
    return tuple(_format(item, f"{where}/{k}") for k, item in enumerate(items))


def _optional(obj: dict, where: str) -> Repeat:
    _fields(obj, where, required={"type", "content"})
    return Repeat(_format(obj["content"], f"{where}/content"), 0, 1, where)


def _star(obj: dict, where: str) -> Repeat:
    _fields(obj, where, required={"type", "content"})
    return Repeat(_format(obj["content"], f"{where}/content"), 0, None, where)


def _plus(obj: dict, where: str) -> Repeat:
    _fields(obj, where, required={"type", "content"})
    return Repeat(_format(obj["content"], f"{where}/content"), 1, None, where)


def _repeat(obj: dict, where: str) -> Repeat:
    _fields(obj, where, required={"type", "content", "min", "max"})
    low = _int(obj["min"], f"{where}/min")
    high = _int(obj["max"], f"{where}/max")
    if low < 0:
        raise StructuralTagError(f"{where}/min", f"min must be >= 0, got {low}")
    if high != -1 and high < low:
        raise StructuralTagError(f"{where}/max", f"max must be -1 or >= min ({low}), got {high}")
    content = _format(obj["content"], f"{where}/content")
    return Repeat(content, low, None if high == -1 else high, where)


def _tag(obj: dict, where: str) -> Tag:
    _fields(obj, where, required={"type", "begin", "content", "end"})
    begin = _text(obj["begin"], f"{where}/begin")
    end = obj["end"]
    if isinstance(end, list):
        ends = _strings(end, f"{where}/end", allow_empty=False)
    else:
        ends = (_text(end, f"{where}/end"),)
    return Tag(begin, _format(obj["content"], f"{where}/content"), ends, where)


def _tags(value: object, where: str) -> tuple[Tag, ...]:
    tags = []
    for k, item in enumerate(_list(value, where, allow_empty=False)):
        node = _format(item, f"{where}/{k}")
        if not isinstance(node, Tag):
            raise StructuralTagError(f"{where}/{k}/type", "must be 'tag'")
        tags.append(node)
    return tuple(tags)


def _triggered_tags(obj: dict, where: str) -> TriggeredTags:
    _fields(
        obj,
        where,
        required={"type", "triggers", "tags"},
        optional={"at_least_one", "stop_after_first", "excludes"},
    )
    node = TriggeredTags(
        _strings(obj["triggers"], f"{where}/triggers", allow_empty=False, non_empty_items=True),
        _tags(obj["tags"], f"{where}/tags"),
        _bool(obj.get("at_least_one", False), f"{where}/at_least_one"),
        _bool(obj.get("stop_after_first", False), f"{where}/stop_after_first"),
        _strings(obj.get("excludes", []), f"{where}/excludes", non_empty_items=True),
        where,
    )
    _check_triggered(node)
    return node


def _check_triggered(node: TriggeredTags) -> None:
    """Every tag's begin starts with a trigger."""
    for k, tag in enumerate(node.tags):
        if not any(tag.begin.startswith(t) for t in node.triggers):
            raise StructuralTagError(
                f"{tag.pointer}/begin" if tag.pointer else f"{node.pointer}/tags/{k}/begin",
                f"begin {tag.begin!r} starts with none of the triggers {list(node.triggers)}",
            )


def _tags_with_separator(obj: dict, where: str) -> TagsWithSeparator:
    _fields(
        obj,
        where,
        required={"type", "tags", "separator"},
        optional={"at_least_one", "stop_after_first"},
    )
    return TagsWithSeparator(
        _tags(obj["tags"], f"{where}/tags"),
        _string(obj["separator"], f"{where}/separator"),
        _bool(obj.get("at_least_one", False), f"{where}/at_least_one"),
        _bool(obj.get("stop_after_first", False), f"{where}/stop_after_first"),
        where,
    )


_PARSERS = {
    "const_string": _const_string,
    "token": _token,
    "json_schema": _json_schema,
    "regex": _regex,
    "grammar": _grammar,
    "any_text": _any_text,
    "sequence": _sequence,
    "or": _or,
    "optional": _optional,
    "star": _star,
    "plus": _plus,
    "repeat": _repeat,
    "tag": _tag,
    "triggered_tags": _triggered_tags,
    "tags_with_separator": _tags_with_separator,
}


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise StructuralTagError(where, f"expected an object, got {_kind(value)}")
    return value


def _fields(obj: dict, where: str, required: set[str], optional: frozenset | set = frozenset()):
    for name in sorted(required):
        if name not in obj:
            raise StructuralTagError(where, f"missing field {name!r}")
    for name in obj:
        if name not in required and name not in optional:
            raise StructuralTagError(f"{where}/{name}", f"unknown field {name!r}")
    return obj


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise StructuralTagError(where, f"expected a string, got {_kind(value)}")
    return value


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise StructuralTagError(where, f"expected a boolean, got {_kind(value)}")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StructuralTagError(where, f"expected an integer, got {_kind(value)}")
    return value


def _list(value: object, where: str, *, allow_empty: bool = True) -> list:
    if not isinstance(value, list):
        raise StructuralTagError(where, f"expected an array, got {_kind(value)}")
    if not value and not allow_empty:
        raise StructuralTagError(where, "must not be empty")
    return value


def _strings(
    value: object, where: str, *, allow_empty: bool = True, non_empty_items: bool = False
) -> tuple[str, ...]:
    items = _list(value, where, allow_empty=allow_empty)
    out = []
    for k, item in enumerate(items):
        text = _text(item, f"{where}/{k}")
        if non_empty_items and not text:
            raise StructuralTagError(f"{where}/{k}", "must not be the empty string")
        out.append(text)
    return tuple(out)


def _to_data(node: Format) -> Any:
    """The format tree as plain data (types and fields, no pointers)."""
    if isinstance(node, ConstString):
        return {"type": "const_string", "value": node.value}
    if isinstance(node, Token):
        return {"type": "token", "token": node.text}
    if isinstance(node, JsonSchema):
        return {"type": "json_schema", "json_schema": node.schema_text}
    if isinstance(node, Regex):
        return {"type": "regex", "pattern": node.pattern}
    if isinstance(node, GrammarText):
        return {"type": "grammar", "grammar": node.grammar, "syntax": node.syntax}
    if isinstance(node, AnyText):
        return {"type": "any_text", "excludes": list(node.excludes)}
    if isinstance(node, (Sequence, Or)):
        kind = "sequence" if isinstance(node, Sequence) else "or"
        return {"type": kind, "elements": [_to_data(e) for e in node.elements]}
    if isinstance(node, Repeat):
        return {
            "type": "repeat",
            "min": node.min_count,
            "max": -1 if node.max_count is None else node.max_count,
            "content": _to_data(node.content),
        }
    if isinstance(node, Tag):
        return {
            "type": "tag",
            "begin": node.begin,
            "content": _to_data(node.content),
            "end": list(node.ends),
        }
    if isinstance(node, TriggeredTags):
        return {
            "type": "triggered_tags",
            "triggers": list(node.triggers),
            "tags": [_to_data(t) for t in node.tags],
            "at_least_one": node.at_least_one,
            "stop_after_first": node.stop_after_first,
            "excludes": list(node.excludes),
        }
    return {
        "type": "tags_with_separator",
        "tags": [_to_data(t) for t in node.tags],
        "separator": node.separator,
        "at_least_one": node.at_least_one,
        "stop_after_first": node.stop_after_first,
    }
