"""Dependency keywords, exactly: ``dependentRequired`` / ``dependentSchemas`` and ``dependencies``.

Meaning (object instances only; other values are unconstrained by them): for a trigger name
``K``, "``K`` present => every name of its list present" (``dependentRequired``, and
``dependencies`` with an array) and "``K`` present => the whole object valid against ``S_K``"
(``dependentSchemas``, and ``dependencies`` with a schema). ``S_K`` may constrain any
property, add ``required``, ``properties``, ``additionalProperties``, ``not``, nested
dependencies, ...

Drafts, as the specification and jsonschema's validator of the declared draft say: draft 4..7
know ``dependencies`` only, 2019-09 and 2020-12 the split keywords only; the other spelling is
an unknown keyword there, and unknown keywords are ignored (:func:`without_foreign_keywords`).
A schema without ``$schema`` is 2020-12 (``refs.detect_draft``), so its ``dependencies`` is
ignored, as jsonschema ignores it (JSONSchemaBench's instances were labelled that way).

Construction (:func:`dependent_object_tree`): a case split on the triggers' presence. A
trigger is *decided* when the object schema ``s`` fixes it: present when ``required`` (its
names become required and its schemas are merged in), absent when its property is ``false``
or no key may carry its name (its constraints drop), also absent when it would require an
impossible name. For every set ``P`` of present undecided triggers the branch is ::

    allOf[ s without dependency keywords,
           {type: object, required: (decided present + P) and their names,
            properties: {A: false for the undecided triggers A not in P}},
           S_K for every present K ]

merged by the ordinary ``allOf`` merge (``merge``), so a trigger or dependent name that no
``properties`` declares works as ``required`` does with ``additionalProperties`` and
``patternProperties``. The branches differ in the presence of some trigger, so they are
disjoint, and their union is the object language exactly. A set ``P`` whose required names
include an absent trigger is empty and skipped. There are up to ``2^u`` branches for ``u``
undecided triggers (``u + 1`` for a chain ``K1 => K2 => ...``): with more than
``MAX_DEPENDENCY_BRANCHES`` sets left the keyword is refused (``SchemaError`` with the
object's pointer; ``lenient`` drops it with a warning). Errors inside a merged ``S_K`` name
the object's pointer too.

Layout: the names the dependency keywords mention are written after the declared and required
names, in ``values.dependency_names`` order (what ``values.property_order`` and ``serialize``
say). :func:`normalize` puts that order under the private ``ORDER_KEY`` of every schema that
dependencies reach, before ``anyOf`` / ``allOf`` split it; the merge carries it to
``objects.object_tree``, which orders its members so.

``S_K`` merged into an object is recorded under the private ``APPLIED_KEY``: when it reaches
its own trigger again for the same object (through ``$ref`` or its own dependencies, an
endless recursion for a validator) it is dropped, since applying it twice changes nothing.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from formcast.errors import SchemaError
from formcast.grammar.json_schema.keyword_types import subschemas
from formcast.grammar.json_schema.merge import APPLIED_KEY, ORDER_KEY
from formcast.grammar.json_schema.values import (
    DEPENDENCY_KEYWORDS,
    dependency_keywords,
    dependency_names,
    property_order,
)
from formcast.grammar.regex.combinators import alt
from formcast.grammar.regex.syntax_tree import Node

if TYPE_CHECKING:
    from formcast.grammar.json_schema.compiler import SchemaCompiler

# most presence cases of one object's undecided triggers (6 independent triggers), after the
# empty ones are skipped
MAX_DEPENDENCY_BRANCHES = 64
# most undecided triggers whose 2^u presence sets are enumerated (to skip the empty ones)
MAX_UNDECIDED_TRIGGERS = 16
# most dependency schemas merged into one object (a guard against runaway merges)
MAX_APPLIED_SCHEMAS = 256


def without_foreign_keywords(schema: dict, draft: str) -> dict:
    """``schema`` without the dependency keywords its draft does not define (ignored there).

    Draft 4..7: ``dependentRequired`` and ``dependentSchemas`` go; 2019-09 and later:
    ``dependencies`` goes.
    """
    foreign = _foreign_keywords(draft)
    if not any(key in schema for key in foreign):
        return schema
    return {k: v for k, v in schema.items() if k not in foreign}


def _foreign_keywords(draft: str) -> tuple[str, ...]:
    return tuple(key for key in DEPENDENCY_KEYWORDS if key not in dependency_keywords(draft))


def document_has_dependencies(root: Any, draft: str) -> bool:
    """True if a schema of document ``root`` (keyword types checked) has a dependency
    keyword its draft defines."""
    own = dependency_keywords(draft)
    stack: list[Any] = [root]
    while stack:
        schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        if any(schema.get(key) for key in own):
            return True
        stack += [sub for sub, _ in subschemas(schema, "")]
    return False


def normalize(schema: dict, draft: str, root: Any, has_dependencies: bool) -> dict:
    """``schema`` with the dependency keywords of its draft only and, when some reach its
    instance (through ``$ref``, ``allOf``, ``anyOf``, ``oneOf``), its layout order
    (``values.property_order``) under ``ORDER_KEY``, for ``objects.object_tree``.

    ``has_dependencies``: :func:`document_has_dependencies` of ``root`` (else nothing to
    order). Order keys of ``allOf`` parts (merged schemas) come first: they were computed
    from the schema before it was split.
    """
    schema = without_foreign_keywords(schema, draft)
    if not has_dependencies or ORDER_KEY in schema or not dependency_names(schema, root):
        return schema
    parts = schema["allOf"] if isinstance(schema.get("allOf"), list) else []
    known = [n for part in parts if isinstance(part, dict) for n in part.get(ORDER_KEY, [])]
    return {**schema, ORDER_KEY: list(dict.fromkeys([*known, *property_order(schema, root)]))}


def has_dependencies(s: dict) -> bool:
    """True if object schema ``s`` has a non-empty dependency keyword."""
    return any(isinstance(s.get(key), dict) and s[key] for key in DEPENDENCY_KEYWORDS)


def _applied_key(trigger: str, dep: Any) -> str:
    return trigger + "\x00" + json.dumps(dep, sort_keys=True, default=repr)


def dependent_object_tree(c: SchemaCompiler, s: dict, ptr: str) -> Node | None:
    """The object instances of ``s`` (merged, refs resolved) with its dependency keywords.

    Parameters
    ----------
    c:
        The compiler (its ``compile`` builds every branch).
    s:
        An object schema with a non-empty dependency keyword (:func:`has_dependencies`).
    ptr:
        Its JSON pointer, for errors.

    Returns
    -------
    Node | None
        The union of the branches (module docstring), ``None`` when all are empty.

    Raises
    ------
    SchemaError
        More than ``MAX_DEPENDENCY_BRANCHES`` presence cases (not when ``lenient``: then the
        dependency keywords are dropped with a warning, a superset), or more than
        ``MAX_APPLIED_SCHEMAS`` dependency schemas merged into one object.
    """
    names_of: dict[str, list[str]] = {}  # trigger -> names required with it
    schemas_of: dict[str, list[Any]] = {}  # trigger -> schemas the object must then satisfy
    keyword = next(key for key in DEPENDENCY_KEYWORDS if s.get(key))
    for key in DEPENDENCY_KEYWORDS:
        for trigger, dep in (s.get(key) or {}).items():
            names_of.setdefault(trigger, [])
            schemas_of.setdefault(trigger, [])
            if isinstance(dep, list):
                names_of[trigger] += [n for n in dep if n not in names_of[trigger]]
            else:
                schemas_of[trigger].append(dep)
    base = {k: v for k, v in s.items() if k not in DEPENDENCY_KEYWORDS}
    applied = list(s.get(APPLIED_KEY, []))
    if len(applied) > MAX_APPLIED_SCHEMAS:
        raise SchemaError(
            f"more than {MAX_APPLIED_SCHEMAS} dependency schemas merged into one object",
            pointer=ptr,
            keyword=keyword,
        )
    props: dict[str, Any] = base.get("properties") or {}
    required = [r for r in base.get("required", []) if isinstance(r, str)]
    # layout: what the object already orders, its declared and required names, then the
    # names the dependencies mention (values.property_order writes them in this order)
    order = list(
        dict.fromkeys([*s.get(ORDER_KEY, []), *props, *required, *dependency_names(s, c.root)])
    )
    triggers = list(names_of)

    def is_forbidden(name: str) -> bool:
        """No key ``name`` can occur, whatever the dependency schemas add (cheap test)."""
        if name in props:
            return props[name] is False
        patterns = base.get("patternProperties") or {}
        if any(c.pattern_matches(p, name) for p in patterns):
            return False
        return base.get("additionalProperties", True) is False

    # decided triggers: present (required, and what present triggers require, closed) or
    # absent (impossible, or requiring an impossible name); the rest is split on
    present = _closure([t for t in triggers if t in required], names_of)
    absent = {t for t in triggers if t not in present and is_forbidden(t)}
    absent |= {
        t for t in triggers
        if t not in present and any(is_forbidden(n) for n in names_of[t])
    }  # fmt: skip
    if any(is_forbidden(n) for t in present for n in [t, *names_of[t]]):
        return None  # a required trigger requires an impossible name
    undecided = [t for t in triggers if t not in present and t not in absent]
    cases = _presence_cases(undecided, present, absent, names_of, c, ptr, keyword)
    if cases is None:  # refused leniently: the dependency keywords are dropped
        return c.compile({**base, "type": "object"}, ptr)
    branches = []
    for chosen in cases:
        on = [t for t in triggers if t in present or t in chosen]
        off = [t for t in triggers if t not in on and not is_forbidden(t)]
        names = list(dict.fromkeys([*on, *(n for t in on for n in names_of[t])]))
        merged = []
        for trigger in on:
            for dep in schemas_of[trigger]:
                key = _applied_key(trigger, dep)
                if key not in applied:
                    merged.append((key, dep))
        extra: dict[str, Any] = {
            "type": "object",
            "required": names,
            ORDER_KEY: order,
            APPLIED_KEY: applied + [key for key, _ in merged],
        }
        if off:
            extra["properties"] = {t: False for t in off}
        branches.append(c.compile({"allOf": [base, extra, *(dep for _, dep in merged)]}, ptr))
    return alt(branches)


def _closure(names: list[str], names_of: dict[str, list[str]]) -> list[str]:
    """``names`` and every trigger their dependency name lists require, transitively."""
    found = list(names)
    for name in found:  # grows while iterating: a worklist
        found += [n for n in names_of.get(name, []) if n in names_of and n not in found]
    return found


def _presence_cases(
    undecided: list[str],
    present: list[str],
    absent: set[str],
    names_of: dict[str, list[str]],
    c: SchemaCompiler,
    ptr: str,
    keyword: str,
) -> list[frozenset[str]] | None:
    """The sets of present undecided triggers whose required names include no absent
    trigger (the other sets are empty branches); ``None`` if refused leniently."""
    if len(undecided) <= MAX_UNDECIDED_TRIGGERS:
        cases = []
        for bits in itertools.product((False, True), repeat=len(undecided)):
            chosen = frozenset(t for t, is_on in zip(undecided, bits, strict=True) if is_on)
            required = set(_closure([*present, *chosen], names_of))
            if not (required & absent) and all(t in chosen for t in undecided if t in required):
                cases.append(chosen)
            if len(cases) > MAX_DEPENDENCY_BRANCHES:
                break
        if len(cases) <= MAX_DEPENDENCY_BRANCHES:
            return cases
    c.refuse(
        f"{len(undecided)} dependency triggers whose presence is open ({undecided[:8]}...) "
        f"need more than {MAX_DEPENDENCY_BRANCHES} presence cases (the exact construction "
        "splits on each trigger's presence)",
        ptr,
        keyword,
    )
    return None
