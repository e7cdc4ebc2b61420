"""ECMA-262 vs Python regex dialect: hand-written ECMA expectations (jsonschema uses ``re``)."""

from __future__ import annotations

import json
import re

import pytest

from formcast.errors import SchemaError
from formcast.grammar.json_schema.compile import json_schema_to_regex


def accepts(pattern: str, value: str) -> bool:
    rx = json_schema_to_regex({"type": "string", "pattern": pattern})
    return re.fullmatch(rx, json.dumps(value, ensure_ascii=False)) is not None


@pytest.mark.parametrize(
    "pattern,value,ecma",
    [
        ("^\\d+$", "123", True),
        ("^\\d+$", "١٢٣", False),  # Arabic-Indic digits: Python \d matches, ECMA does not
        ("^\\w+$", "héllo", False),  # ECMA \w is ASCII
        ("^\\w+$", "hello_1", True),
        ("^\\s$", "\u00a0", True),
        ("^\\s$", "\ufeff", True),  # ECMA \s includes BOM; Python's does not
        ("^\\s$", "\u001c", False),  # Python \s includes U+001C..U+001F; ECMA does not
        ("^.$", "\r", False),  # ECMA . excludes \r, \u2028, \u2029 (Python only \n)
        ("^.$", "\u2028", False),
        ("^.$", "é", True),
        ("^a$", "a\n", False),  # ECMA $ is end of input only
        ("^\\D$", "٣", True),
        ("^[^\\d]$", "٣", True),
        ("^(?<year>\\d{4})$", "2024", True),  # ECMA named group syntax
    ],
)
def test_ecma_semantics(pattern, value, ecma):
    assert accepts(pattern, value) is ecma


def test_python_and_ecma_differ_where_expected():
    assert re.search("^\\d+$", "١٢٣")  # the Python dialect would accept: we must not
    assert not accepts("^\\d+$", "١٢٣")


@pytest.mark.parametrize("pattern", ["(?=x)", "(?!x)y", "(?<=a)b", "(a)\\1", "\\bword", "(?i)a"])
def test_refused_constructs(pattern):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex({"type": "string", "pattern": pattern})
    assert info.value.keyword == "pattern"


def test_escaped_characters_in_patterns():
    assert accepts('^a"b\\\\c$', 'a"b\\c')
    assert accepts("^\\n$", "\n")
    assert not accepts("^\\n$", "n")
