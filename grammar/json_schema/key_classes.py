"""Key classes of an object with ``patternProperties``: which keys get which value schema.

For patterns ``P_1..P_k`` (ECMA, unanchored = "contains a match") a key's class is the set
``S`` of patterns it matches; its value must be valid against every ``patternProperties``
schema in ``S`` (against ``additionalProperties`` when ``S`` is empty). The keys of class
``S`` other than the declared names are the language

    ``(&_{i in S} L_i) - (|_{j not in S} L_j) - names  [& L_propertyNames]``,

the strings whose tuple of pattern acceptances is exactly ``S``. :class:`KeySpace` builds
the pattern DFAs once (``char_dfa``), lists the classes some string reaches (a product of the
pattern DFAs), and writes one class as a syntax tree over JSON text (the key with its quotes):
the product with the trie of the declared names that fall in that class, minimised, then state
elimination (``dfa_to_tree``; an automaton node, ``dfa_automaton``, where that tree is over
its bounds), or the pattern's own tree (``ecma_pattern.pattern_tree``) when the class is
exactly one pattern's language. Raises ``ecma_pattern.PatternRefused`` for
unsupported pattern syntax and ``char_dfa.KeyLanguageTooLarge`` past the state / tree budgets.
"""

from __future__ import annotations

from formcast.grammar.json_schema import ecma_pattern
from formcast.grammar.json_schema.char_dfa import (
    Alphabet,
    CharDFA,
    minimize,
    names_dfa,
    pattern_charsets,
    pattern_dfa,
    product,
)
from formcast.grammar.json_schema.charset import normalize
from formcast.grammar.json_schema.dfa_to_tree import tree_or_automaton
from formcast.grammar.json_schema.pattern_intersection import parse_pattern
from formcast.grammar.regex.combinators import literal, seq
from formcast.grammar.regex.syntax_tree import Node

Members = tuple[bool, ...]  # per pattern (in patternProperties order): does the key match it


class KeySpace:
    """The keys of one object split by ``patterns``, minus ``names``, within ``name_pattern``.

    Parameters
    ----------
    patterns
        The ``patternProperties`` patterns, in schema order.
    names
        The declared property names (keys of these are not in any class).
    name_pattern
        A ``propertyNames`` pattern every key must contain a match of, or ``None``.
    """

    def __init__(self, patterns: list[str], names: list[str], name_pattern: str | None) -> None:
        self.parsed = parsed = [parse_pattern(p) for p in patterns]
        filter_parsed = None if name_pattern is None else parse_pattern(name_pattern)
        charsets = [normalize([(ord(ch), ord(ch))]) for name in names for ch in name]
        for branches in parsed + ([filter_parsed] if filter_parsed is not None else []):
            for b in branches:
                charsets += pattern_charsets(ecma_pattern.padded(b))
        self.alphabet = Alphabet(charsets)
        self.pattern_dfas = [pattern_dfa(b, self.alphabet) for b in parsed]
        self.filter_dfa = (
            None if filter_parsed is None else pattern_dfa(filter_parsed, self.alphabet)
        )
        self.names = list(dict.fromkeys(names))

    def _dfas(self) -> list[CharDFA]:
        return self.pattern_dfas + ([self.filter_dfa] if self.filter_dfa is not None else [])

    def members_of(self, key: str) -> Members:
        """The class of ``key`` (whether it matches each pattern)."""
        return tuple(d.accepts(self.alphabet, key) for d in self.pattern_dfas)

    def is_in_class(self, key: str, members: Members) -> bool:
        """Is ``key`` an undeclared key of class ``members`` (within ``name_pattern``)?"""
        if key in self.names or self.members_of(key) != members:
            return False
        return self.filter_dfa is None or self.filter_dfa.accepts(self.alphabet, key)

    def classes(self) -> list[Members]:
        """Every class that some string within ``name_pattern`` belongs to, sorted."""
        num_patterns = len(self.pattern_dfas)
        found: set[Members] = set()

        def record(accepts: tuple[bool, ...]) -> bool:
            if self.filter_dfa is None or accepts[num_patterns]:
                found.add(accepts[:num_patterns])
            return False

        if num_patterns == 0:
            return [()]
        product(self._dfas(), record)
        return sorted(found, key=lambda m: (sum(m), [not x for x in m]))

    def class_tree(self, members: Members, allow_automaton: bool = True) -> Node | None:
        """The JSON string texts (quotes included) of the undeclared keys of class ``members``.

        Parameters
        ----------
        members : Members
            One class, as :meth:`classes` lists them.
        allow_automaton : bool
            Write a class whose tree is over its bounds as an automaton node (no regex
            text: off for ``json_schema_to_regex``).

        Returns
        -------
        Node | None
            A tree over JSON text, ``None`` if the class has no undeclared key.

        Raises
        ------
        KeyLanguageTooLarge
            The class automaton or its tree is over budget.
        """
        num_patterns = len(self.pattern_dfas)
        has_filter = self.filter_dfa is not None
        inside = [n for n in self.names if self.members_of(n) == members]
        dfas = self._dfas() + [names_dfa(inside, self.alphabet)]

        def accept(accepts: tuple[bool, ...]) -> bool:
            return (
                accepts[:num_patterns] == members
                and (not has_filter or accepts[num_patterns])
                and not accepts[-1]
            )

        keys = minimize(product(dfas, accept))
        for i, is_member in enumerate(members):
            # the class is exactly one pattern's language: that pattern's own tree (no state
            # elimination: a counted run like [a-z]{1,255} stays a repetition)
            if is_member and not product([keys, self.pattern_dfas[i]], _differ).is_accepting.any():
                body = ecma_pattern.pattern_tree(self.parsed[i])
                break
        else:
            body = tree_or_automaton(  # (an automaton: a long counted run under a complement)
                keys,
                self.alphabet,
                "keys of a patternProperties class",
                allow_automaton=allow_automaton,
            )
        return seq(literal('"'), body, literal('"'))  # None if the class is empty


def _differ(accepts: tuple[bool, ...]) -> bool:
    return accepts[0] != accepts[1]
