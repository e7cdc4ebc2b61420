"""The intersection of two string constraints (a ``pattern`` and a ``format``) as one pattern.

Both sides are parsed branches (``schema_pattern``); each becomes a character DFA
(``char_dfa``, unanchored ends padded with ``Σ*``), their product accepting where both accept
is minimised and written back by state elimination (``dfa_regex``) as a character-level,
fully anchored Python regex, parsed again into branches: the string compiler then treats it
like any format regex (length bounds, JSON encoding). When one language contains the other,
the smaller side's branches are returned unchanged. Exact; bounded by the DFA state and
regex text budgets of ``char_dfa`` / ``dfa_regex``.
"""

from __future__ import annotations

from formcast.grammar.json_schema import ecma_pattern
from formcast.grammar.json_schema.char_dfa import (
    Alphabet,
    KeyLanguageTooLarge,
    minimize,
    pattern_charsets,
    pattern_dfa,
    product,
)
from formcast.grammar.json_schema.charset import class_regex
from formcast.grammar.json_schema.dfa_to_regex import dfa_regex

# the intersection's regex is parsed by Python's recursive regex parser: keep it moderate
MAX_INTERSECTION_CHARS = 60_000


def intersect_branches(
    a: list[ecma_pattern.Branch], b: list[ecma_pattern.Branch]
) -> list[ecma_pattern.Branch]:
    """Branches (fully anchored) of the strings both ``a`` and ``b`` accept; ``[]`` if none.

    Raises ``schema_pattern.PatternRefused`` when the product automaton or its regex text is
    over budget.
    """
    charsets = [c for branch in a + b for c in pattern_charsets(ecma_pattern.padded(branch))]
    alphabet = Alphabet(charsets)
    try:
        dfa_a, dfa_b = pattern_dfa(a, alphabet), pattern_dfa(b, alphabet)
        # one side within the other (e.g. a pattern every date matches): keep that side as is
        if not product([dfa_a, dfa_b], lambda hits: hits[0] and not hits[1]).is_accepting.any():
            return a
        if not product([dfa_a, dfa_b], lambda hits: hits[1] and not hits[0]).is_accepting.any():
            return b
        both = product([dfa_a, dfa_b], lambda hits: hits[0] and hits[1])
        body = dfa_regex(minimize(both), alphabet, MAX_INTERSECTION_CHARS, class_regex)
    except KeyLanguageTooLarge as exc:
        raise ecma_pattern.PatternRefused(f"the intersection is too large: {exc}") from exc
    if body is None:
        return []
    try:
        return ecma_pattern.parse_python(f"(?:{body})" if body else "")
    except RecursionError as exc:
        raise ecma_pattern.PatternRefused("the intersection's regex is nested too deeply") from exc
