"""formcast.grammar.json_schema — stage 5: JSON Schema -> regex syntax tree or CFG rules;
layouts, formats."""

from formcast.grammar.json_schema.compile import (
    compile_json_schema,
    compile_type,
    json_schema_to_regex,
    parse_as,
    schema_of,
)
from formcast.grammar.json_schema.layout import Layout

__all__ = [
    "Layout",
    "compile_json_schema",
    "compile_type",
    "json_schema_to_regex",
    "parse_as",
    "schema_of",
]
