"""JSON values in formcast's output layout: type names, equality, serialization, literals.

``serialize(value, schema, root)`` writes a value the way a schema-constrained generation
writes it: object keys in the order of the merged schema's ``properties`` (``$ref`` target,
own, ``allOf`` parts; then the ``anyOf``/``oneOf`` branches the value fits by its keys and
``const``/``enum`` members); then names only ``required`` lists; then the names the dependency
keywords mention; then the names a ``not`` subschema lays out, as the complement writes them;
keys no schema names keep their order, last),
compact separators, strings as ``json.dumps(..., ensure_ascii=False)``, integral floats under an
integer-only schema written as integers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from formcast.grammar.json_schema.refs import detect_draft, resolve_ref

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
# "if K is present then ..." keywords, in the order their names are laid out
DEPENDENCY_KEYWORDS = ("dependencies", "dependentSchemas", "dependentRequired")


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


# the canonical text of equality keys: sorted keys, no spaces, strings as formcast writes them
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def equality_key(value: Any) -> str:
    """A key equal for JSON-Schema-equal values (1 == 1.0, True != 1, key order ignored): the
    canonical JSON text (sorted keys, compact) of ``value`` with integral floats as integers
    (``-0.0``, ``1.0``, ``1e2`` as ``0``, ``1``, ``100``). A string's key is its text as
    formcast writes it (``json.dumps(..., ensure_ascii=False)``); no other value's key starts
    with a quote."""
    return _KEY_ENCODER.encode(_integral(value))


def text_equality_key(text: str | bytes) -> str:
    """:func:`equality_key` of the JSON value ``text`` (parsed with integral floats read as
    integers: one C-level parse and encode, no walk over the value)."""
    return _KEY_ENCODER.encode(
        _KEY_DECODER.decode(text if isinstance(text, str) else text.decode())
    )


def _integral(value: Any) -> Any:
    """``value`` with every integral float replaced by its int (the rest as it is)."""
    if type(value) is float:
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value


# a float's text read as _integral reads the float (texts of floats only: ints stay exact)
_KEY_DECODER = json.JSONDecoder(parse_float=lambda text: _integral(float(text)))


def property_order(schema: Any, root: Any, _depth: int = 0, value: Any = None) -> list[str]:
    """Property names in the order formcast writes them for ``schema``: the declared and
    required names (``_declared_order``), then the names its dependency keywords mention
    (:func:`dependency_names`), then those of its negated subschemas (``_negated``: the
    complement writes them before other keys). With the object ``value``: only from the ``anyOf`` /
    ``oneOf`` branches whose shape it fits (`_fits`), where any does (each branch is laid out
    in its own order)."""
    names = _declared_order(schema, root, _depth, value) + dependency_names(schema, root, _depth)
    negated = _negated(schema, root, _depth)
    if negated:  # the complement lays out these, then the negated schema's names (its order)
        neg = negated[0] if len(negated) == 1 else {"anyOf": negated}
        names += property_order(neg, root, _depth + 1)
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]


def _negated(schema: Any, root: Any, depth: int) -> list:
    """The ``not`` subschemas of ``schema``, its ``$ref`` target and its ``allOf`` parts, in
    the order the merge meets them (which unites them as one ``anyOf``), each ``$ref``
    resolved as the complement resolves the negated schema."""
    found: list = []

    def visit(part: Any, level: int) -> None:
        if not isinstance(part, dict) or level > 20:
            return
        if isinstance(part.get("$ref"), str):
            try:
                visit(resolve_ref(root, part["$ref"], "")[0], level + 1)
            except ValueError:
                pass
        neg = part.get("not")
        for _ in range(20):  # a $ref chain under not
            if not (isinstance(neg, dict) and isinstance(neg.get("$ref"), str)):
                break
            try:
                neg = resolve_ref(root, neg["$ref"], "")[0]
            except ValueError:
                break
        if isinstance(neg, dict):
            found.append(neg)
        for sub in part["allOf"] if isinstance(part.get("allOf"), list) else []:
            visit(sub, level + 1)

    visit(schema, depth)
    return found


def _declared_order(schema: Any, root: Any, _depth: int = 0, value: Any = None) -> list[str]:
    declared: list[str] = []
    required: list[str] = []
    unions: list[list] = []
    _collect_names(schema, root, _depth, value, declared, required, unions)
    # the unions' branches merge into the schema after its allOf parts (object_tree lays out
    # the merged properties of the schema and its parts, then a branch's own): one fitting
    # branch is merged so; of several, each adds its own order (which one lays the object
    # out is not known from the keys alone)
    for branches in unions:  # (grows while merged branches add their own unions)
        if len(branches) == 1:
            _collect_names(branches[0], root, _depth + 1, value, declared, required, unions)
            continue
        for sub in branches:
            declared += _declared_order(sub, root, _depth + 1, value)
    # required names that no "properties" declares come after every declared one, in
    # "required" order (the merged schema's properties, then its merged required list)
    return declared + required


def _collect_names(
    schema: Any,
    root: Any,
    depth: int,
    value: Any,
    declared: list[str],
    required: list[str],
    unions: list[list],
) -> None:
    """Append the names ``schema`` declares in ``properties`` (its ``$ref`` target's first,
    then its own, then those of its ``allOf`` parts) and those its ``required`` lists name,
    in the order the merge meets them; its ``anyOf`` / ``oneOf`` branches that fit ``value``
    go to ``unions``, one list per union."""
    if not isinstance(schema, dict) or depth > 20:
        return
    if "$ref" in schema and isinstance(schema["$ref"], str):
        try:
            target = resolve_ref(root, schema["$ref"], "")[0]
            _collect_names(target, root, depth + 1, value, declared, required, unions)
        except ValueError:
            pass
    props = schema.get("properties")
    if isinstance(props, dict):
        declared += list(props)
    names = schema.get("required")
    if isinstance(names, list):
        required += [n for n in names if isinstance(n, str)]
    for sub in _branches(schema, "allOf", root, value):
        _collect_names(sub, root, depth + 1, value, declared, required, unions)
    for key in ("anyOf", "oneOf"):
        branches = _branches(schema, key, root, value)
        if branches:
            unions.append(branches)


def dependency_keywords(draft: str) -> tuple[str, ...]:
    """The dependency keywords ``draft`` (``refs.detect_draft``) defines (the others are
    unknown keywords there): ``dependencies`` in draft 4..7, the split ones from 2019-09."""
    if draft in ("draft3", "draft4", "draft6", "draft7"):
        return ("dependencies",)
    return ("dependentSchemas", "dependentRequired")


def draft_dependency_keywords(root: Any) -> tuple[str, ...]:
    """:func:`dependency_keywords` of document ``root``'s draft."""
    try:
        return dependency_keywords(detect_draft(root))
    except ValueError:  # draft 3 (refused by the compiler) has "dependencies" too
        return dependency_keywords("draft3")


def dependency_names(schema: Any, root: Any, _depth: int = 0) -> list[str]:
    """The names the dependency keywords of ``schema`` (and of its ``$ref`` target and
    ``allOf`` / ``anyOf`` / ``oneOf`` parts) mention, in layout order: keyword by keyword
    (``draft_dependency_keywords``), part by part, trigger by trigger: the trigger name, then
    its name list or the :func:`property_order` of its schema."""
    if not isinstance(schema, dict) or _depth > 20:
        return []
    parts: list[dict] = []
    seen: set[int] = set()

    def visit(part: Any, depth: int) -> None:  # the parts in the order _declared_order visits
        if not isinstance(part, dict) or depth > 20 or id(part) in seen:
            return
        seen.add(id(part))
        if isinstance(part.get("$ref"), str):
            try:
                visit(resolve_ref(root, part["$ref"], "")[0], depth + 1)
            except ValueError:
                pass
        parts.append(part)
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in part[key] if isinstance(part.get(key), list) else []:
                visit(sub, depth + 1)

    visit(schema, _depth)
    names: list[str] = []
    for key in draft_dependency_keywords(root):
        for part in parts:
            entries = part.get(key)
            for trigger, dep in entries.items() if isinstance(entries, dict) else ():
                names.append(trigger)
                if isinstance(dep, list):
                    names += [n for n in dep if isinstance(n, str)]
                else:
                    names += property_order(dep, root, _depth + 1)
    return names


def _branches(schema: dict, key: str, root: Any, value: Any) -> list:
    """The subschemas under ``key`` (``allOf`` / ``anyOf`` / ``oneOf``); of a union, with
    the object ``value``, those whose shape it fits, where any does."""
    subs = schema.get(key)
    if not isinstance(subs, list):
        return []
    if key == "allOf" or not isinstance(value, dict):
        return subs
    fitting = [sub for sub in subs if _fits(sub, value, root)]
    return fitting or subs


def _fits(schema: Any, value: dict, root: Any) -> bool:
    """Could the object ``value`` match ``schema`` by its keys alone: its required names
    present and, where extra keys are closed off, no key it does not declare?"""
    for _ in range(20):  # follow a $ref chain
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        try:
            schema = resolve_ref(root, schema["$ref"], "")[0]
        except ValueError:
            return True
    if not isinstance(schema, dict):
        return schema is not False
    required = schema.get("required")
    if isinstance(required, list) and any(n not in value for n in required if isinstance(n, str)):
        return False
    props = schema.get("properties")
    for name, sub in props.items() if isinstance(props, dict) else ():
        # a discriminator: a member whose const / enum the value's member is not among
        if name in value and isinstance(sub, dict) and ("const" in sub or "enum" in sub):
            allowed = [sub["const"]] if "const" in sub else sub["enum"]
            if isinstance(allowed, list):
                key = equality_key(value[name])
                if all(equality_key(v) != key for v in allowed):
                    return False
    if schema.get("additionalProperties") is False and not schema.get("patternProperties"):
        declared = set(_declared_order(schema, root))
        return all(k in declared for k in value)
    return True


def _subschemas(
    schema: Any, root: Any, key: str, name: str | int, _depth: int = 0, value: Any = None
) -> list:
    """Subschemas that apply to a property (key="properties") or array position (of the
    union branches that ``value``, the object or array, fits)."""
    if not isinstance(schema, dict) or _depth > 20:
        return []
    out = []
    if "$ref" in schema and isinstance(schema["$ref"], str):
        try:
            out += _subschemas(
                resolve_ref(root, schema["$ref"], "")[0], root, key, name, _depth + 1, value
            )
        except ValueError:
            pass
    if key == "properties":
        props = schema.get("properties")
        is_declared = isinstance(props, dict) and name in props
        if is_declared:
            out.append(props[name])
        matched = _matching_pattern_schemas(schema.get("patternProperties"), str(name))
        out += matched
        if not is_declared and not matched and isinstance(schema.get("additionalProperties"), dict):
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
        for sub in _branches(schema, k, root, value):
            out += _subschemas(sub, root, key, name, _depth + 1, value)
    for k in draft_dependency_keywords(root) if key == "properties" else ():  # as allOf
        entries = schema.get(k)
        for dep in entries.values() if isinstance(entries, dict) else ():
            if isinstance(dep, dict):
                out += _subschemas(dep, root, key, name, _depth + 1)
    return out


def _matching_pattern_schemas(pattern_props: Any, name: str) -> list:
    """The ``patternProperties`` schemas whose pattern matches ``name`` (Python's ``re``
    reads the patterns; one it cannot read matches nothing here)."""
    if not isinstance(pattern_props, dict):
        return []
    out = []
    for pattern, sub in pattern_props.items():
        try:
            if re.search(pattern, name):
                out.append(sub)
        except (re.error, TypeError):
            continue
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
        order = property_order(schema, root, value=value)
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        out = {}
        for k in keys:
            subs = _subschemas(schema, root, "properties", k, value=value)
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
