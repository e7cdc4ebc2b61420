"""The intersection of two string constraints (a ``pattern`` and a ``format``) as branches;
also the difference, for a ``pattern`` that starts with a negative lookahead
(:func:`parse_pattern`, which every JSON Schema ``pattern`` goes through).

Both sides are parsed branches (:mod:`~formcast.grammar.json_schema.ecma_pattern`); each
becomes a character DFA (:mod:`~formcast.grammar.json_schema.char_dfa`, unanchored ends padded
with ``Σ*``), their product accepting where both accept is minimised and written back by state
elimination (:mod:`~formcast.grammar.json_schema.dfa_to_tree`) as a character-level syntax tree,
whose top-level alternatives become fully anchored branches: the string compiler then treats
it like any format (length bounds, JSON encoding). When one language contains the other, the
smaller side's branches are returned unchanged. Exact; bounded by the DFA state budgets of
``char_dfa`` and the tree size and nesting bounds of ``dfa_to_tree``.
"""

from __future__ import annotations

from collections.abc import Callable

from formcast.grammar.json_schema import ecma_pattern
from formcast.grammar.json_schema.char_dfa import (
    Alphabet,
    CharDFA,
    KeyLanguageTooLarge,
    minimize,
    pattern_charsets,
    pattern_dfa,
    product,
)
from formcast.grammar.json_schema.dfa_to_tree import dfa_tree
from formcast.grammar.regex.combinators import chars

# bound on the intersection's character-level tree (``num_chars``): it is JSON-encoded and
# compiled further like a format (uri-reference's own tree is under 5,000); larger products
# are refused rather than compiled
MAX_INTERSECTION_TREE_CHARS = 90_000


def intersect_branches(
    a: list[ecma_pattern.Branch], b: list[ecma_pattern.Branch]
) -> list[ecma_pattern.Branch]:
    """Fully anchored branches of the strings both ``a`` and ``b`` accept.

    Parameters
    ----------
    a, b : list[ecma_pattern.Branch]
        Two patterns' branches (each accepts the strings its padded branches match).

    Returns
    -------
    list[ecma_pattern.Branch]
        ``a`` or ``b`` itself when it lies within the other, else the branches of the
        intersection's tree; ``[]`` when no string satisfies both.

    Raises
    ------
    ecma_pattern.PatternRefused
        The product automaton or its tree is over budget.
    """
    alphabet, dfa_a, dfa_b = _dfas(a, b, "intersection")
    try:
        # one side within the other (e.g. a pattern every date matches): keep that side as is
        if not product([dfa_a, dfa_b], lambda hits: hits[0] and not hits[1]).is_accepting.any():
            return a
        if not product([dfa_a, dfa_b], lambda hits: hits[1] and not hits[0]).is_accepting.any():
            return b
    except KeyLanguageTooLarge as exc:
        raise ecma_pattern.PatternRefused(f"the intersection is too large: {exc}") from exc
    return _combined(alphabet, dfa_a, dfa_b, lambda hits: hits[0] and hits[1], "intersection")


def _dfas(
    a: list[ecma_pattern.Branch], b: list[ecma_pattern.Branch], what: str
) -> tuple[Alphabet, CharDFA, CharDFA]:
    """A common alphabet and the two patterns' character DFAs over it."""
    charsets = [c for branch in a + b for c in pattern_charsets(ecma_pattern.padded(branch))]
    alphabet = Alphabet(charsets)
    try:
        return alphabet, pattern_dfa(a, alphabet), pattern_dfa(b, alphabet)
    except KeyLanguageTooLarge as exc:
        raise ecma_pattern.PatternRefused(f"the {what} is too large: {exc}") from exc


def _combined(
    alphabet: Alphabet,
    dfa_a: CharDFA,
    dfa_b: CharDFA,
    accept: Callable[[tuple[bool, ...]], bool],
    what: str,
) -> list[ecma_pattern.Branch]:
    """Fully anchored branches of the product of ``dfa_a`` and ``dfa_b`` under ``accept``."""
    try:
        body = dfa_tree(
            minimize(product([dfa_a, dfa_b], accept)), alphabet, MAX_INTERSECTION_TREE_CHARS, chars
        )
    except KeyLanguageTooLarge as exc:
        raise ecma_pattern.PatternRefused(f"the {what} is too large: {exc}") from exc
    if body is None:
        return []
    return ecma_pattern.branches_of(body)


def parse_pattern(pattern: str) -> list[ecma_pattern.Branch]:
    """:func:`~formcast.grammar.json_schema.ecma_pattern.parse_ecma`, plus a leading negative
    lookahead: ``^(?!X)R`` (identifier rules such as ``^(?!include$|exclude$)[a-z_]+$``)
    matches the strings ``^R`` matches unless ``^X`` matches at their start, the difference
    of the two languages (:func:`subtract_branches`).

    Raises
    ------
    ecma_pattern.PatternRefused
        As ``parse_ecma`` (any other lookaround included), or a difference over budget.
    """
    lookahead = ecma_pattern.leading_negative_lookahead(pattern)
    if lookahead is None:
        return ecma_pattern.parse_ecma(pattern)
    guard, rest = lookahead
    kept = ecma_pattern.parse_ecma("^" + rest)
    removed = ecma_pattern.parse_ecma("^" + guard)
    return subtract_branches(kept, removed)


def subtract_branches(
    a: list[ecma_pattern.Branch], b: list[ecma_pattern.Branch]
) -> list[ecma_pattern.Branch]:
    """Fully anchored branches of the strings ``a`` accepts and ``b`` does not (``^(?!X)R``
    is ``^R`` minus ``^X``: see :func:`parse_pattern`).

    Raises
    ------
    ecma_pattern.PatternRefused
        The product automaton or its tree is over budget.
    """
    alphabet, dfa_a, dfa_b = _dfas(a, b, "difference")
    return _combined(alphabet, dfa_a, dfa_b, lambda hits: hits[0] and not hits[1], "difference")
