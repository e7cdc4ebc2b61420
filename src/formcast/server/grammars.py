"""The grammar of a request: ``response_format``, ``regex``, ``choice`` or ``grammar`` -> spec.

- ``json_schema``: the schema, compiled exactly (recursive schemas through the context-free
  path). ``strict`` true or absent closes objects whose ``additionalProperties`` is absent,
  as OpenAI's strict mode requires; ``strict: false`` reads the schema as the JSON Schema
  specification does (absent = extra properties allowed).
- ``json_object``: any JSON object, compact layout, nesting unbounded (a Lark grammar).
- ``structural_tag``: the request shape of vLLM / XGrammar (free text, tags, triggers,
  constrained segments; :mod:`formcast.grammar.structural_tag`), passed on as it is.
- ``regex`` (Python ``re`` syntax, fullmatch), ``choice`` (one of the strings), ``grammar``
  (Lark text): formcast extensions.

Returns the spec and the request parameter that carried it (for error messages).
"""

from __future__ import annotations

from formcast.grammar.spec import GrammarSpec
from formcast.server.protocol import SamplingFields

# any JSON object: RFC 8259 values, no insignificant whitespace
JSON_OBJECT_LARK = r"""
start: object
?value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
"""


def request_grammar(request: SamplingFields) -> tuple[GrammarSpec | None, str | None]:
    """``(spec, param)`` of the request's output grammar; ``(None, None)`` for free text."""
    fmt = getattr(request, "response_format", None)
    if fmt is not None and fmt.type == "json_schema":
        json_schema = fmt.json_schema
        schema = json_schema.schema_ if json_schema.schema_ is not None else {}
        strict = json_schema.strict is not False
        return GrammarSpec.json_schema(schema, strict=strict), "response_format"
    if fmt is not None and fmt.type == "json_object":
        return GrammarSpec.lark(JSON_OBJECT_LARK), "response_format"
    if fmt is not None and fmt.type == "structural_tag":
        return GrammarSpec.structural_tag(fmt.model_dump(exclude_none=True)), "response_format"
    if request.regex is not None:
        return GrammarSpec.regex(request.regex), "regex"
    if request.choice is not None:
        return GrammarSpec.choice(request.choice), "choice"
    if request.grammar is not None:
        return GrammarSpec.lark(request.grammar), "grammar"
    return None, None
