"""A ``format`` met again is copied in as its minimal DFA (``compiler._format_text``).

The first use of a format's string text is its syntax tree; from the second on (in the same
schema or a later one) it is an ``Automaton`` node of that text's minimal DFA, which the NFA
builder copies in as an edge block. Oracle: jsonschema with its format checker, instances
walked token by token on both routes (every token taken is in the mask iff the matcher takes
it); the path is checked to have been taken.
"""

from __future__ import annotations

import pytest

from formcast.grammar import caches
from formcast.grammar.json_schema import compiler
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.regex.syntax_tree import Automaton
from tests.grammar.schema_oracle import assert_walks_agree

SCHEMA = {
    "type": "object",
    "properties": {
        "home": {"type": "string", "format": "uri"},
        "docs": {"type": "string", "format": "uri"},
        "created": {"type": "string", "format": "date-time"},
        "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
        "updated": {"type": "string", "format": "date-time"},
        "mail": {"type": "string", "format": "email"},
    },
    "required": ["home"],
    "additionalProperties": False,
}
VALUES = [
    {"home": "https://a.io"},
    {"home": "https://a.io", "docs": "http://b.org/x?y=1", "links": ["ftp://c.net", "urn:x"]},
    {"home": "https://a.io", "created": "2024-05-17T10:00:00Z", "updated": "2024-05-17T10:00:00+02:00"},
    {"home": "https://a.io", "mail": "ada@example.com"},
    {"home": "not a uri"},
    {"home": "https://a.io", "docs": "no scheme"},
    {"home": "https://a.io", "links": ["https://ok.io", "bad uri"]},
    {"home": "https://a.io", "created": "2024-13-17T10:00:00Z"},
    {"home": "https://a.io", "updated": "yesterday"},
    {"home": "https://a.io", "mail": "ada.example.com"},
    {"docs": "https://a.io"},
]  # fmt: skip


@pytest.mark.parametrize("route", ["auto", "cfg"])
def test_repeated_formats_walk_as_jsonschema_says(route, smollm2_vocab, smollm2_tokenizer):
    caches.clear("json_schema.format_automata")
    grammar = compile_json_schema(SCHEMA, smollm2_vocab, strict=False, route=route, cache=False)
    labels = {n.label for n in compiler._FORMAT_TEXTS.values() if isinstance(n, Automaton)}
    assert {"format 'uri'", "format 'date-time'"} <= labels  # (email is met once)
    assert "format 'email'" not in labels
    assert_walks_agree(grammar, SCHEMA, VALUES, smollm2_tokenizer)
