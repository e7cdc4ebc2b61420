"""JSON Schema, pydantic models and Python types -> one exact regular expression -> grammar.

``json_schema_to_regex(schema)`` returns a Python-dialect regex whose language is exactly the
set of JSON texts, *written in formcast's output layout*, that validate against the schema.

Output layout (what a constrained generation writes):

- Objects: properties in the schema's ``properties`` order; required ones always present,
  optional ones may be omitted; extra properties (where allowed) after the declared ones, with
  keys different from every declared name. ``strict=True`` (default) treats an absent
  ``additionalProperties`` as ``false`` on schemas that describe objects (like OpenAI's strict
  mode); ``strict=False`` follows the specification (absent = any extra property).
  Inside ``allOf`` branches, absent ``additionalProperties`` stays open (strict applies to the
  merged result). Duplicate keys among extra properties are not excluded.
- Separators: compact (``,`` and ``:``, no spaces) with ``whitespace=None``; an int ``N``
  allows up to ``N`` JSON whitespace characters at each structural position (after ``{ [``,
  before ``} ]``, around ``,`` and ``:``), so whitespace can never run away.
- Strings: exactly ``json.dumps(s, ensure_ascii=False)``: characters raw except ``\\"``,
  ``\\\\``, ``\\b \\f \\n \\r \\t`` and ``\\u00xx`` (lowercase) for other C0 controls; no
  surrogates. One spelling per string, so ``minLength``/``maxLength`` count characters.
- Integers: JSON integer literals (``-0`` allowed; no ``1.0`` or ``1e2`` although jsonschema
  calls those integers). Numbers: the full JSON number grammar when unbounded; with bounds or
  ``multipleOf``, decimals without exponent (value comparison over exponents is not regular).
- ``true`` / ``{}`` schemas (any JSON value) are limited to ``max_any_depth`` nested containers
  (default 2): arbitrary nesting is not regular (the CFG path, issue 5, lifts this).

Keywords: see ``schema_compiler`` / ``schema_objects`` / ``schema_arrays`` / ``formats`` for
what is exact and what is refused. A refusal raises ``SchemaError`` naming the keyword and its
JSON pointer; ``lenient=True`` turns each refusal into a ``UserWarning`` and drops that keyword
(the language then is a superset: ``relaxed`` lists what was dropped). Recursive ``$ref``
always raises ``SchemaError`` (it needs the context-free path, issue 5). ECMA-262 ``pattern``
semantics are used (ASCII ``\\d``/``\\w``, ``.`` excludes all line terminators, unanchored =
contains a match), translated to Python-dialect regex text.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.errors import CompileBudgetError, SchemaError
from formcast.grammar.schema_compiler import SchemaCompiler

DEFAULT_MAX_REGEX_CHARS = 4_000_000


def schema_of(obj: Any) -> dict | bool:
    """JSON Schema of ``obj``: a dict/bool (returned as is), a JSON string, or a Python type.

    Pydantic models, dataclasses, TypedDicts, ``Literal``, ``Enum``, ``list[...]``,
    ``Optional[...]`` and anything else ``pydantic.TypeAdapter`` understands are converted with
    pydantic (mode ``validation``).
    """
    if isinstance(obj, (dict, bool)):
        return obj
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema string is not valid JSON: {exc}") from exc
    try:
        from pydantic import BaseModel, TypeAdapter
    except ImportError as exc:  # pragma: no cover - pydantic is a dependency
        raise SchemaError("pydantic is needed to derive a schema from a Python type") from exc
    try:
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return obj.model_json_schema()
        return TypeAdapter(obj).json_schema()
    except Exception as exc:  # pydantic raises several error types for unsupported types
        raise SchemaError(f"cannot derive a JSON Schema from {obj!r}: {exc}") from exc


def json_schema_to_regex(
    schema: Any,
    *,
    whitespace: int | None = None,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int = 2,
    max_regex_chars: int = DEFAULT_MAX_REGEX_CHARS,
) -> str:
    """Python-dialect regex for the JSON texts (formcast layout) valid against ``schema``.

    Parameters
    ----------
    schema:
        A JSON Schema (dict, bool or JSON string) or a Python type (see ``schema_of``).
    whitespace:
        ``None`` for compact separators, or ``N`` for up to ``N`` whitespace characters at
        each structural position.
    strict:
        Absent ``additionalProperties`` means ``false`` (True) or ``true`` (False).
    lenient:
        Downgrade refusals to warnings (the keyword is dropped, the language grows).
    max_any_depth:
        Nesting bound for unconstrained values (``true``/``{}`` schemas).
    max_regex_chars:
        Budget on the regex size; beyond it ``CompileBudgetError`` is raised.

    Returns
    -------
    str
        The regex (use with ``re.fullmatch`` or ``compile_regex``). A schema no value satisfies
        raises ``SchemaError``.
    """
    compiler = SchemaCompiler(
        schema_of(schema),
        whitespace=whitespace,
        strict=strict,
        lenient=lenient,
        max_any_depth=max_any_depth,
        max_regex_chars=max_regex_chars,
    )
    try:
        rx = compiler.compile(compiler.root, "")
    except RecursionError as exc:
        raise CompileBudgetError("schema nesting too deep for the regex path") from exc
    if rx is None:
        raise SchemaError("the schema is unsatisfiable: no JSON value validates", pointer="")
    if len(rx) > max_regex_chars:
        raise CompileBudgetError(
            f"regex for this schema has {len(rx)} characters (budget {max_regex_chars}); "
            "use the structural/CFG path for very large schemas"
        )
    return rx


def compile_json_schema(
    schema: Any,
    vocab: Any,
    *,
    whitespace: int | None = None,
    strict: bool = True,
    lenient: bool = False,
    **options: Any,
) -> Any:
    """``CompiledGrammar`` for ``schema`` over ``vocab`` (regex path; see ``json_schema_to_regex``).

    Extra ``options`` (``max_any_depth``, ``max_regex_chars``) go to ``json_schema_to_regex``.
    """
    from formcast.grammar.compile import compile_regex  # lazy: keeps this module light

    try:
        rx = json_schema_to_regex(
            schema, whitespace=whitespace, strict=strict, lenient=lenient, **options
        )
    except SchemaError as exc:
        # issue 5 hook: a recursive $ref is not regular; compile through the context-free
        # path instead (same layout and options, recursion unrolled without a depth cap).
        from formcast.grammar.cfg_json_schema import compile_json_schema_cfg, is_recursion_error

        if not is_recursion_error(exc):
            raise
        depth = {k: v for k, v in options.items() if k == "max_any_depth"}
        return compile_json_schema_cfg(
            schema, vocab, whitespace=whitespace, strict=strict, lenient=lenient, **depth
        )
    return compile_regex(rx, vocab, dialect="python")


def compile_type(tp: Any, vocab: Any, **kwargs: Any) -> Any:
    """``compile_json_schema(schema_of(tp), vocab, **kwargs)`` for a Python type."""
    return compile_json_schema(schema_of(tp), vocab, **kwargs)


def parse_as(text: str, tp: Any) -> Any:
    """Parse generated JSON ``text`` back into ``tp`` (a pydantic model or any type)."""
    from pydantic import BaseModel, TypeAdapter

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_validate_json(text)
    return TypeAdapter(tp).validate_json(text)
