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
