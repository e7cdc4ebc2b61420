"""RuleBuilder: one CfgGrammar assembled from terminals, rules and embedded sub-grammars.

Structural tags combine pieces that each have a grammar of their own (a JSON Schema's CFG, a
Lark or GBNF grammar) with constants, regexes and free-text terminals. The builder hands out
terminal and nonterminal ids; equal terminal regexes (the same tree or text) share one
terminal, so a string lexeme common to many tool schemas is one automaton. :meth:`embed`
copies a sub-grammar under fresh ids, its names prefixed, so no two sub-grammars' symbols ever
collide. A sub-grammar's ``%ignore`` terminals stay inside it: they are written into its rules
(any number of ignored lexemes before each of its terminals and after its last), since a
``CfgGrammar``'s ``ignore`` list would apply to the whole output.
"""

from __future__ import annotations

from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.regex.syntax_tree import Node


class RuleBuilder:
    """Accumulates the terminals, nonterminals and rules of one :class:`CfgGrammar`."""

    def __init__(self) -> None:
        self.terminal_names: list[str] = []
        self.terminal_regexes: list[str | Node] = []
        self._terminal_ids: dict[str | Node, int] = {}
        self.nonterminal_names: list[str] = []
        self.rules: list[tuple[int, tuple[int, ...]]] = []

    def terminal(self, regex: str | Node, name: str) -> int:
        """The terminal symbol of ``regex`` (Python regex text or a syntax tree), shared."""
        found = self._terminal_ids.get(regex)
        if found is None:
            found = self._terminal_ids[regex] = len(self.terminal_names)
            self.terminal_names.append(name)
            self.terminal_regexes.append(regex)
        return found

    def nonterminal(self, name: str) -> int:
        """A fresh nonterminal's symbol (``~id``)."""
        self.nonterminal_names.append(name)
        return ~(len(self.nonterminal_names) - 1)

    def rule(self, lhs: int, rhs: tuple[int, ...]) -> None:
        """Add ``lhs -> rhs`` (``lhs`` a nonterminal symbol as :meth:`nonterminal` gives)."""
        self.rules.append((~lhs, rhs))

    def embed(self, grammar: CfgGrammar, prefix: str) -> int:
        """Copy ``grammar`` in under fresh ids; return the symbol of its start nonterminal."""
        terminal_map = [
            self.terminal(regex, f"{prefix}:{name}")
            for name, regex in zip(grammar.terminal_names, grammar.terminal_regexes, strict=True)
        ]
        nonterminal_map = [
            self.nonterminal(f"{prefix}:{name}") for name in grammar.nonterminal_names
        ]
        ignored = sorted(set(grammar.ignore))
        wrapped: dict[int, int] = {}
        ignores = 0
        if ignored:
            ignores = self.nonterminal(f"{prefix}:%ignore*")
            self.rule(ignores, ())
            for t in ignored:
                self.rule(ignores, (ignores, terminal_map[t]))

        def symbol(s: int) -> int:
            if s < 0:
                return nonterminal_map[~s]
            if not ignored:
                return terminal_map[s]
            found = wrapped.get(s)
            if found is None:  # %ignore* T
                found = wrapped[s] = self.nonterminal(
                    f"{prefix}:%ignore* {grammar.terminal_names[s]}"
                )
                self.rule(found, (ignores, terminal_map[s]))
            return found

        for lhs, rhs in grammar.rules:
            self.rule(nonterminal_map[lhs], tuple(symbol(s) for s in rhs))
        start = nonterminal_map[grammar.start]
        if not ignored:
            return start
        top = self.nonterminal(f"{prefix}:start %ignore*")
        self.rule(top, (start, ignores))
        return top

    def grammar(self, start: int) -> CfgGrammar:
        """The assembled grammar with start symbol ``start``."""
        return CfgGrammar(
            terminal_names=list(self.terminal_names),
            terminal_regexes=list(self.terminal_regexes),
            nonterminal_names=list(self.nonterminal_names),
            rules=list(self.rules),
            start=~start,
        )
