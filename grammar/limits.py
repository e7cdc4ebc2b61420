"""GrammarLimits: how big a grammar request may be, checked before any compile work.

A request names its grammar as text or data (a JSON Schema, a regex, a Lark grammar, a list of
choices). ``check_grammar_size`` walks that input once, in time linear in its size, and refuses
what is over a limit with :class:`~formcast.errors.GrammarLimitError` naming the limit, the
value and where it is (a JSON pointer, a regex offset), so a server answers 400 at once
instead of spending minutes and gigabytes on a grammar it would refuse anyway.

The limits bound the *input*; they do not bound what compiling it costs (``maxLength:
1000000`` is one short keyword). That is the job of the compile budgets, ``compile_timeout_s``
and ``compile_memory_bytes``, which the engine's grammar workers enforce by ending the worker
process (see :mod:`formcast.engine.grammar_workers`).

Limits are on what real schemas do not come near (JSONSchemaBench's largest schema is 0.94 MB,
its largest object 587 properties, its longest pattern 1,327 characters) and every one is a
field to raise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from formcast.errors import GrammarError, GrammarLimitError
from formcast.grammar.json_schema.keyword_types import subschemas
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Repeat, subtrees
from formcast.grammar.structural_tag.format import (
    Format,
    JsonSchema,
    Or,
    Regex,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
    parse_structural_tag,
)
from formcast.grammar.structural_tag.format import Repeat as FormatRepeat


@dataclass(frozen=True)
class GrammarLimits:
    """Size limits on grammar requests and budgets on compiling them.

    Parameters
    ----------
    max_source_chars : int
        Longest grammar input: a schema's JSON text, a regex, a Lark grammar, the choices
        together.
    max_pattern_chars : int
        Longest single regex: a request's ``regex`` or a schema's ``pattern`` /
        ``patternProperties`` key.
    max_repeat_count : int
        Largest count in a regex's counted repetition ``{m,n}`` (each count is automaton
        states; JSON Schema's ``minLength`` / ``maxLength`` are not regexes and are bounded by
        the compile budgets instead).
    max_object_properties : int
        Most ``properties`` of one object schema.
    max_subschemas : int
        Most schemas nested in one JSON Schema (every ``properties`` value, ``items``,
        ``anyOf`` branch... counts one).
    max_choices : int
        Most options of a ``choice`` grammar, and most values of one ``enum``.
    compile_timeout_s : float
        Wall-clock seconds one compile may run (enforced where compiles run in worker
        processes: the worker is ended).
    compile_memory_bytes : int
        Resident memory one compile worker may reach (enforced like ``compile_timeout_s``).
    """

    max_source_chars: int = 4_000_000
    max_pattern_chars: int = 20_000
    max_repeat_count: int = 100_000
    max_object_properties: int = 5_000
    max_subschemas: int = 200_000
    max_choices: int = 100_000
    compile_timeout_s: float = 60.0
    compile_memory_bytes: int = 8 << 30

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise GrammarLimitError(
                    f"GrammarLimits.{spec.name}={value!r} must be a positive number",
                    limit_name=spec.name,
                )


def check_grammar_size(kind: str, source: Any, limits: GrammarLimits) -> None:
    """Raise `GrammarLimitError` if the grammar input ``source`` of ``kind`` is over a limit.

    Parameters
    ----------
    kind : str
        ``"json_schema"`` (``source`` is the schema), ``"regex"`` (the pattern), ``"lark"``
        (the grammar text), ``"choice"`` (the list of options), ``"structural_tag"`` (the
        request; each schema and regex inside is checked as above) or ``"reasoning"`` (its
        answer's recipe is checked).
    source : Any
        The input as the request gave it.
    limits : GrammarLimits
        The limits to hold it to.

    Raises
    ------
    GrammarLimitError
        Names the limit, the value found and where (JSON pointer or regex offset).
    """
    if kind == "json_schema":
        text = json.dumps(source, ensure_ascii=False)
        _check_count("max_source_chars", len(text), limits, "the schema's JSON text")
        _check_schema(source, limits)
    elif kind == "regex":
        _check_count("max_source_chars", len(source), limits, "the regex")
        _check_pattern(source, "python", limits, "the regex")
    elif kind == "lark":
        _check_count("max_source_chars", len(source), limits, "the Lark grammar")
    elif kind == "choice":
        _check_count("max_choices", len(source), limits, "the choice list")
        total = sum(len(option) for option in source if isinstance(option, str))
        _check_count("max_source_chars", total, limits, "the choices together")
    elif kind == "structural_tag":
        _check_structural_tag(source, limits)
    elif kind == "reasoning":
        source["answer"].check_size(limits)
    else:
        raise GrammarError(f"unknown grammar kind {kind!r} (no size limits defined for it)")


def _check_structural_tag(source: Any, limits: GrammarLimits) -> None:
    """The request's text as a whole, then every schema, regex and grammar inside it."""
    tag = parse_structural_tag(source)
    _check_count("max_source_chars", len(tag.to_json()), limits, "the structural tag")
    stack: list[Format] = [tag.format]
    while stack:
        node = stack.pop()
        if isinstance(node, JsonSchema):
            _check_schema(node.schema, limits)
        elif isinstance(node, Regex):
            _check_pattern(node.pattern, "python", limits, f"the regex at {node.pointer}")
        elif isinstance(node, (Sequence, Or)):
            stack.extend(node.elements)
        elif isinstance(node, (FormatRepeat, Tag)):
            stack.append(node.content)
        elif isinstance(node, (TriggeredTags, TagsWithSeparator)):
            stack.extend(node.tags)


def _check_count(limit_name: str, value: int, limits: GrammarLimits, where: str) -> None:
    limit = getattr(limits, limit_name)
    if value > limit:
        raise GrammarLimitError(
            f"{where} is too large: {value:,} is over the limit {limit_name}={limit:,}",
            limit_name=limit_name,
        )


def _check_pattern(pattern: str, dialect: str, limits: GrammarLimits, where: str) -> None:
    _check_count("max_pattern_chars", len(pattern), limits, where)
    try:
        tree = parse_regex(pattern, dialect)
    except (GrammarError, RecursionError):
        return  # not ours to report: the compiler gives the syntax error with its position
    for node in subtrees(tree):
        if isinstance(node, Repeat):
            count = max(node.min_count, node.max_count or 0)
            if count > limits.max_repeat_count:
                raise GrammarLimitError(
                    f"{where} has a counted repetition of {count:,}, over the limit "
                    f"max_repeat_count={limits.max_repeat_count:,}",
                    limit_name="max_repeat_count",
                    position=node.pos,
                )


def _check_schema(root: Any, limits: GrammarLimits) -> None:
    num_subschemas = 0
    for schema, pointer in _walk(root):
        num_subschemas += 1
        if num_subschemas > limits.max_subschemas:
            _check_count("max_subschemas", num_subschemas, limits, f"the schema (at {pointer})")
        properties = schema.get("properties")
        if isinstance(properties, dict):
            where = f"'properties' at {pointer or '/'}"
            _check_count("max_object_properties", len(properties), limits, where)
        enum = schema.get("enum")
        if isinstance(enum, list):
            _check_count("max_choices", len(enum), limits, f"'enum' at {pointer or '/'}")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            _check_pattern(pattern, "ecma", limits, f"'pattern' at {pointer or '/'}")
        pattern_properties = schema.get("patternProperties")
        if isinstance(pattern_properties, dict):
            for key in pattern_properties:
                where = f"a 'patternProperties' key at {pointer or '/'}"
                _check_pattern(key, "ecma", limits, where)


def _walk(root: Any) -> Iterator[tuple[dict, str]]:
    """Every object schema under ``root`` with its pointer (iterative: any depth)."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        schema, pointer = stack.pop()
        if not isinstance(schema, dict):
            continue
        yield schema, pointer
        try:
            below = subschemas(schema, pointer)
        except GrammarError:
            continue  # a malformed keyword: the compiler reports it with its pointer
        stack.extend(reversed(below))
