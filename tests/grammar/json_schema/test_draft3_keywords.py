"""Draft-03 keywords (``extends``, ``disallow``, ``divisibleBy``) in a later draft's schema.

They are unknown keywords there, which validators ignore: formcast ignores them too, on both
routes, and warns with each one's JSON pointer (a draft-03 document itself is refused).
Checked against jsonschema, whose validators of those drafts ignore them, with values that
the draft-03 meaning would reject.
"""

from __future__ import annotations

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import compile_json_schema
from tests.grammar.schema_oracle import assert_walks_agree

SCHEMA = {
    "type": "object",
    "properties": {
        "active": {"type": "boolean", "extends": "types.json#/boolean"},
        "count": {"type": "integer", "divisibleBy": 3, "disallow": "integer"},
        "tag": {"extends": {"type": "string", "maxLength": 1}, "enum": ["a", "bb", 3]},
    },
    "required": ["active"],
    "additionalProperties": False,
}

VALUES = [
    {"active": True},
    {"active": False, "count": 4},  # not divisible by 3, an integer although disallowed
    {"active": True, "tag": "bb"},  # longer than the `extends` schema's maxLength
    {"active": True, "tag": 3, "count": -2},
    # invalid by the schema's own keywords
    {"count": 3},
    {"active": 1},
    {"active": True, "count": 1.5},
    {"active": True, "tag": "c"},
]


@pytest.mark.parametrize("route", ["auto", "cfg"])
def test_draft3_keywords_are_ignored_with_a_warning(route, smollm2_vocab, smollm2_tokenizer):
    with pytest.warns(UserWarning) as caught:
        grammar = compile_json_schema(SCHEMA, smollm2_vocab, strict=False, cache=False, route=route)
    messages = [str(w.message) for w in caught if "draft-03" in str(w.message)]
    for keyword, pointer in [
        ("extends", "/properties/active"),
        ("divisibleBy", "/properties/count"),
        ("disallow", "/properties/count"),
        ("extends", "/properties/tag"),
    ]:
        assert any(f"'{keyword}' at JSON pointer '{pointer}'" in m for m in messages), keyword
    assert_walks_agree(grammar, SCHEMA, VALUES, smollm2_tokenizer)


def test_a_draft3_document_is_still_refused(smollm2_vocab):
    schema = {"$schema": "http://json-schema.org/draft-03/schema#", **SCHEMA}
    with pytest.raises(SchemaError, match="draft-03"):
        compile_json_schema(schema, smollm2_vocab, strict=False, cache=False)
