"""``format: uri-template``: formcast's language is a subset of jsonschema's checker (package
``uri_template``) and agrees with it on RFC 6570 templates; checked by Hypothesis, by the
oracle on hand-picked values, and token by token with the real tokenizer."""

from __future__ import annotations

import json
import re

import pytest
import uri_template
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.engine.models.loader import load_tokenizer
from formcast.grammar import Vocabulary
from formcast.grammar.json_schema import formats
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from formcast.grammar.json_schema.formats import URI_TEMPLATE
from tests.grammar.schema_oracle import validator

SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string",
          "format": "uri-template"}  # fmt: skip
TEMPLATE = re.compile(URI_TEMPLATE)

# RFC 6570 section 1.2 / 3.2 examples and the shapes OpenAPI and HAL documents use
RFC_TEMPLATES = [
    "", "http://example.com/~{username}/", "http://example.com/dictionary/{term:1}/{term}",
    "http://example.com/search{?q,lang}", "{var}", "{+path}/here", "here?ref={+path}",
    "X{#var}", "X{.x,y}", "{/list*,path:4}", "{;x,y,empty}", "{?x,y,undef}", "?fixed=yes{&x}",
    "{x,hello,y}", "{+x,hello,y}", "{#path:6}/here", "map?{x,y}", "{/var:1,var}",
    "/users/{user_id}/repos{?page,per_page}", "{a.b}", "{a%41b}", "{x:999}", "{x:010}", "{var}é",
    "weird but fine: <>|^` and spaces",
]  # fmt: skip
# rejected by the checker: unbalanced braces, empty or malformed expressions, bad prefixes,
# reserved operators, names starting with % or containing characters outside varchar
INVALID = [
    "x{", "}", "{", "a}b", "{}", "{a:0}", "{a:1000}", "{a:}", "{a:x}", "{=x}", "{!x}", "{@x}",
    "{|x}", "{%41}", "{a b}", "{a-b}", "{{a}}", "{a{b}", "{+}", "{a,,b}", "{ab*c}",
]  # fmt: skip
# accepted by the checker but outside formcast's language (its extensions; see formats.py)
CHECKER_EXTENSIONS = ["{x=1}", "{name/key}", "{,x}", "{a,}"]


def test_rfc_templates_accepted_and_invalid_refused():
    rx = re.compile(json_schema_to_regex(SCHEMA))
    oracle = validator(SCHEMA)
    for value in RFC_TEMPLATES:
        assert oracle.is_valid(value), value
        assert rx.fullmatch(json.dumps(value, ensure_ascii=False)), value
    for value in INVALID:
        assert not oracle.is_valid(value), value
        assert not rx.fullmatch(json.dumps(value, ensure_ascii=False)), value
    for value in CHECKER_EXTENSIONS:  # the documented subset: refused, never a superset
        assert oracle.is_valid(value) and not TEMPLATE.fullmatch(value), value


# the language with its literal characters drawn from a few ASCII ones (drawing from the
# full Unicode class is slow; literals are never checked by uri_template beyond "no braces")
ASCII_TEMPLATE = URI_TEMPLATE.replace(formats._TEMPLATE_LITERAL, "[a-z/:?=&<> ]")


@settings(max_examples=100, deadline=None)
@given(st.from_regex(ASCII_TEMPLATE, fullmatch=True))
def test_every_template_of_the_language_passes_the_checker(text):
    assert TEMPLATE.fullmatch(text), text
    assert uri_template.validate(text), text


TEMPLATE_ALPHABET = "ab_9.%4F{}:*,+#/;?&=![] "


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=TEMPLATE_ALPHABET, max_size=12))
def test_random_texts_never_accepted_when_the_checker_refuses(text):
    if TEMPLATE.fullmatch(text):
        assert uri_template.validate(text), text


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(load_tokenizer("smollm2-135m"))


def test_token_by_token(vocab):
    tokenizer = load_tokenizer("smollm2-135m")
    grammar = compile_json_schema(SCHEMA, vocab, cache=False)
    for value in RFC_TEMPLATES[:8] + INVALID[:6]:
        text = json.dumps(value, ensure_ascii=False)
        matcher = grammar.matcher()
        accepted = all(
            matcher.accept_token(t) for t in tokenizer.encode(text, add_special_tokens=False)
        )
        assert (accepted and matcher.is_accepting()) == (value in RFC_TEMPLATES), value
