"""Test oracle for JSON Schema: jsonschema with the format checker, plus two documented fixes.

- ``multipleOf`` is checked with exact decimals (jsonschema's float division says 0.07 is not
  a multiple of 0.01).
- OpenAPI ``nullable: true`` admits ``null`` (formcast implements it; jsonschema ignores it).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import jsonschema
from jsonschema import validators
from jsonschema._keywords import multipleOf as _multiple_of
from jsonschema._keywords import type as _type


def _exact(v):
    return Fraction(Decimal(repr(v))) if isinstance(v, float) else Fraction(v)


def _multiple_of_exact(validator, dB, instance, schema):
    if not validator.is_type(instance, "number") or isinstance(instance, bool):
        return
    if isinstance(dB, float) or isinstance(instance, float):
        if (_exact(instance) / _exact(dB)).denominator != 1:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {dB}")
        return
    yield from _multiple_of(validator, dB, instance, schema)


def _type_nullable(validator, types, instance, schema):
    if instance is None and schema.get("nullable") is True:
        return
    yield from _type(validator, types, instance, schema)


def validator(schema):
    """A format-checking validator of the schema's declared draft (default 2020-12)."""
    cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    ext = validators.extend(cls, {"multipleOf": _multiple_of_exact, "type": _type_nullable})
    return ext(schema, format_checker=cls.FORMAT_CHECKER)


def assert_masks_equal(expected_grammar, found_grammar, token_ids, label: object = "") -> int:
    """Walk ``token_ids`` with a matcher of each grammar, asserting equal allowed ids (over
    the whole vocabulary) before every token and after the last, and that the walk ends
    accepted; returns the number of masks compared."""
    import numpy as np

    expected, found = expected_grammar.matcher(), found_grammar.matcher()
    for token_id in token_ids:
        assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids()), (
            label,
            found.num_accepted,
        )
        assert expected.accept_token(token_id) and found.accept_token(token_id), label
    assert np.array_equal(expected.allowed_token_ids(), found.allowed_token_ids()), label
    assert found.is_accepting(), label
    return len(token_ids) + 1


def valid_masks_equal(expected_grammar, found_grammar, schema, values, tokenizer) -> int:
    """:func:`assert_masks_equal` along the tokens of every value of ``values`` that
    ``schema`` validates (written as formcast writes it); returns how many were walked."""
    from formcast.grammar.json_schema.values import serialize

    oracle = validator(schema)
    num_walked = 0
    for value in values:
        if oracle.is_valid(value):
            text = serialize(value, schema, schema)
            ids = tokenizer.encode(text, add_special_tokens=False)
            assert_masks_equal(expected_grammar, found_grammar, ids, text[:60])
            num_walked += 1
    return num_walked


def walk_checked(grammar, token_ids) -> bool:
    """Walk ``token_ids`` with a matcher of ``grammar``, asserting at every step that the
    token is in the mask iff the matcher takes it; True if all are taken and the walk ends
    accepted."""
    matcher = grammar.matcher()
    for token_id in token_ids:
        allowed = token_id in set(matcher.allowed_token_ids().tolist())
        assert allowed == matcher.accept_token(token_id), (token_id, matcher.num_accepted)
        if not allowed:
            return False
    return matcher.is_accepting()


def assert_member_walks_agree(schema, values, vocab, tokenizer, route: str = "auto") -> None:
    """:func:`assert_walks_agree` for ``schema`` at a member's place, where the layout writes
    a string or scalar: a closed object whose one required member ``v`` is valid against
    ``schema``, compiled on ``route``, walked with each value as that member."""
    from formcast.grammar.json_schema.compile import compile_json_schema

    wrapped = {
        "type": "object",
        "properties": {"v": schema},
        "required": ["v"],
        "additionalProperties": False,
    }
    grammar = compile_json_schema(wrapped, vocab, strict=False, cache=False, route=route)
    assert_walks_agree(grammar, wrapped, [{"v": v} for v in values], tokenizer)


def assert_walks_agree(grammar, schema, values, tokenizer) -> None:
    """Every value, as ``values.serialize`` writes it: :func:`walk_checked` of its tokens
    takes it iff jsonschema validates that text; both verdicts must occur (a check that can
    fail)."""
    import json

    from formcast.grammar.json_schema.values import serialize

    oracle = validator(schema)
    seen = {True: 0, False: 0}
    for value in values:
        text = serialize(value, schema, schema)
        ids = tokenizer.encode(text, add_special_tokens=False)
        is_valid = oracle.is_valid(json.loads(text))
        assert walk_checked(grammar, ids) == is_valid, text
        seen[is_valid] += 1
    assert seen[True] and seen[False], seen


def heads_agreeing_with_earley(grammar, schema, values, vocab, tokenizer):
    """Walk every value's tokens (as ``values.serialize`` writes it) on ``grammar``'s LR
    runtime and on an Earley runtime of the same grammar, asserting equal masks at every step,
    equal rejections and equal acceptance at the end; yields the LR heads before each token."""
    import numpy as np

    from formcast.grammar.cfg.runtime import CfgRuntime
    from formcast.grammar.json_schema.values import serialize

    lr = grammar.runtime
    assert lr.is_lr
    earley = CfgRuntime(grammar.parser, grammar.lexer, lr.eos_row, parser_kind="earley")
    for value in values:
        text = serialize(value, schema, schema)
        l_heads, e_heads = lr.initial_heads(), earley.initial_heads()
        prefix = b""
        for token in tokenizer.encode(text, add_special_tokens=False):
            assert np.array_equal(lr.mask(l_heads), earley.mask(e_heads)), prefix
            yield l_heads
            l_heads = lr.advance(l_heads, vocab.token_bytes[token])
            e_heads = earley.advance(e_heads, vocab.token_bytes[token])
            prefix += vocab.token_bytes[token]
            assert bool(l_heads) == bool(e_heads), prefix
            if not l_heads:
                break
        else:
            assert lr.is_accepting(l_heads) == earley.is_accepting(e_heads), prefix


def assert_regex_agrees(pattern: str, schema, values) -> None:
    """Every value (written compactly): ``pattern`` fullmatches its text iff ``schema``
    validates it; both verdicts must occur (a check that can fail)."""
    import json
    import re

    rx = re.compile(pattern)
    oracle = validator(schema)
    verdicts = [oracle.is_valid(v) for v in values]
    for value, is_valid in zip(values, verdicts, strict=True):
        assert bool(rx.fullmatch(json.dumps(value, separators=(",", ":")))) == is_valid, value
    assert any(verdicts) and not all(verdicts)
