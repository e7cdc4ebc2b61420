"""The string part of a complement whose negated schema is a union: branches that reject every
string drop out, and a union of overlapping length ranges is one range
(``complement._only_string_branch``), so the length bounds split the difference instead of
being written as a counted text automaton (``oneOf: [number, {maxLength: 64}]`` under a
``maxLength: 2048`` string was over the product budget).

Checked against jsonschema through the regex's fullmatch (``test_not_oneof_if.check``).
"""

from __future__ import annotations

import pytest

from tests.grammar.json_schema.test_not_oneof_if import check

NESTED = {  # strings of 256..2048 characters (the shape of a real configuration schema)
    "type": "string",
    "maxLength": 2048,
    "not": {
        "anyOf": [
            {
                "anyOf": [
                    {"type": "string", "maxLength": 255},
                    {"oneOf": [{"type": "number"}, {"type": "string", "maxLength": 64}]},
                ]
            },
            {"type": "boolean"},
        ]
    },
}
GAP = {  # two length ranges with a gap: no single range (lengths 3-4 and 7+ stay)
    "type": "string",
    "not": {"anyOf": [{"maxLength": 2, "type": "string"}, {"minLength": 5, "maxLength": 6}]},
}
PATTERN_BESIDE = {  # a branch with a pattern is no length range: the text difference
    "type": "string",
    "maxLength": 8,
    "not": {"anyOf": [{"type": "string", "maxLength": 2}, {"pattern": "^x"}, {"type": "null"}]},
}
ONE_STRING_BRANCH = {  # oneOf with one branch that admits strings: that branch, for strings
    "type": "string",
    "not": {"oneOf": [{"type": "integer"}, {"type": "string", "minLength": 3}]},
}
TOUCHING = {  # touching ranges 0-2 and 3-6: one range, lengths 7+ stay
    "type": "string",
    "not": {"anyOf": [{"type": "string", "maxLength": 2}, {"minLength": 3, "maxLength": 6}]},
}
ABOVE = {  # overlapping ranges 3-5 and 4-9: lengths 0-2 and 10+ stay
    "type": "string",
    "not": {"anyOf": [{"minLength": 3, "maxLength": 5}, {"minLength": 4, "maxLength": 9}]},
}
ONE_OF_RANGES = {  # oneOf, not anyOf: lengths 2-3 are valid against both (fail it), so stay
    "type": "string",
    "not": {"oneOf": [{"maxLength": 3}, {"minLength": 2, "maxLength": 6}]},
}
ONE_OF_TRUE = {  # a true branch beside a string branch: every string fails the oneOf
    "type": "string",
    "not": {"oneOf": [True, {"type": "string", "maxLength": 4}]},
}
LENGTHS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 64, 65, 255, 256, 2048, 2049]
VALUES = ["a" * n for n in LENGTHS] + ["x" * n for n in (1, 3, 8)] + [1, True, None]


@pytest.mark.parametrize(
    "schema",
    [NESTED, GAP, TOUCHING, ABOVE, ONE_OF_RANGES, ONE_OF_TRUE, PATTERN_BESIDE, ONE_STRING_BRANCH],
    ids=[
        "nested",
        "gap",
        "touching",
        "above",
        "one_of_ranges",
        "one_of_true",
        "pattern_beside",
        "one_string_branch",
    ],
)
def test_string_complements_of_unions_match_jsonschema(schema):
    check(schema, VALUES)
