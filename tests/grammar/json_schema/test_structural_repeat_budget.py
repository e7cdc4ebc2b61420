"""Counted repetitions on the context-free route are refused above `MAX_UNROLLED_COPIES`.

Found by fuzzing (tests/fuzz): ``{"type": "string", "maxLength": 10**12}`` takes the
structural route, whose string chunks (``STRING_CHUNK`` characters each) were written out as
one rule per chunk: 3.9 billion rules, with no deadline check, until the process had used all
memory (18 GB in a minute on the dev machine), then a bare ``MemoryError``.
``{"type": "array", "minItems": 10**12}`` was an immediate bare ``MemoryError`` (one tuple of
10**12 symbols). Both are now a `CompileBudgetError` (a `ValueError`: a 400 in the server)
before anything is built.
"""

from __future__ import annotations

import pytest

from formcast.errors import CompileBudgetError
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.structural import MAX_UNROLLED_COPIES, STRING_CHUNK


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "minItems": 10**12},
        {"type": "array", "maxItems": 10**400},  # items: any value, a nonterminal
        {"type": "string", "maxLength": 10**12},
        {"type": "string", "maxLength": STRING_CHUNK * (MAX_UNROLLED_COPIES + 2)},
    ],
)
def test_huge_repetition_is_a_budget_error(smollm2_vocab, schema):
    with pytest.raises(CompileBudgetError, match="counted repetition of .* items"):
        compile_json_schema(schema, smollm2_vocab, cache=False, route="cfg")


def test_auto_route_counts_a_huge_max_length(smollm2_vocab):
    """The auto route keeps ``maxLength: 10**12`` off the structural path: the automaton's
    string is unbounded and the matcher counts (test_plain_string_guard)."""
    grammar = compile_json_schema(
        {"type": "string", "maxLength": 10**12}, smollm2_vocab, cache=False
    )
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'"' + b"x" * 1000 + b'"') and matcher.is_accepting()


def test_long_strings_below_the_limit_still_compile(smollm2_vocab):
    grammar = compile_json_schema(
        {"type": "string", "maxLength": 10**6}, smollm2_vocab, cache=False
    )
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b'"' + b"x" * 1000 + b'"') and matcher.is_accepting()
