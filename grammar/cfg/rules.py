"""CfgGrammar: a context-free grammar over regular terminals, checked and ready to parse.

Loaders (Lark text, GBNF text, recursive JSON Schema) produce a :class:`CfgGrammar`:
terminals are Python-dialect regexes (their language is what they *fullmatch*), rules are
``lhs -> rhs`` over terminals and nonterminals, and ``ignore`` terminals may appear, any
number of times, before and after every terminal (Lark's ``%ignore``).

:func:`prepare_grammar` turns it into a :class:`PreparedGrammar`: one trimmed byte DFA per
terminal, terminals that match the empty string split into "empty or non-empty" (a nullable
helper nonterminal, so no lexeme is ever empty), and compile-time checks: every nonterminal is
reachable from the start symbol and can derive a finite sentence (else ``GrammarError``
naming the rules). Given the bytes a vocabulary's tokens hold (``is_writable``), terminals are
cut down to what those bytes can write and rules that need an unwritable terminal are dropped,
so a constrained generation never reaches a point where no token fits.

Symbol encoding in rules: terminal ``t`` is ``t >= 0``; nonterminal ``n`` is ``~n`` (< 0).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget, check_deadline
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.index.compile import regex_to_dfa, writable_dfa
from formcast.grammar.regex.syntax_tree import Node, shown_text


@dataclass
class CfgGrammar:
    """A context-free grammar whose terminals are regexes (see module docstring).

    Attributes
    ----------
    terminal_names, terminal_regexes:
        Parallel lists; terminal ``t`` matches the strings that fullmatch its regex (Python
        regex text, or a syntax tree from a grammar that builds trees, as JSON Schema does).
    nonterminal_names:
        Nonterminal ``n`` is written ``~n`` in rules.
    rules:
        ``(lhs, rhs)`` pairs, ``lhs`` a nonterminal id, ``rhs`` a tuple of symbols.
    start:
        The start nonterminal id.
    ignore:
        Terminal ids that may occur between any two terminals and at both ends.
    """

    terminal_names: list[str]
    terminal_regexes: list[str | Node]
    nonterminal_names: list[str]
    rules: list[tuple[int, tuple[int, ...]]]
    start: int
    ignore: list[int] = field(default_factory=list)

    def symbol_name(self, symbol: int) -> str:
        if symbol >= 0:
            return self.terminal_names[symbol]
        return self.nonterminal_names[~symbol]


@dataclass
class PreparedGrammar:
    """A checked grammar with one trimmed byte DFA per terminal (no terminal matches "").

    Attributes
    ----------
    terminal_dfas:
        ``terminal_dfas[t]`` recognises terminal ``t`` (non-empty strings only).
    rules:
        As in :class:`CfgGrammar`, plus rule 0: the augmented ``S' -> start``.
    rules_by_lhs:
        ``rules_by_lhs[n]`` lists the rule ids of nonterminal ``n``.
    is_nullable:
        ``(num_nonterminals,)`` bool: the nonterminal derives the empty string.
    ignore_dfas:
        DFAs of the ignored terminals (non-empty strings only).
    """

    grammar: CfgGrammar
    terminal_names: list[str]
    terminal_dfas: list[ByteDFA]
    nonterminal_names: list[str]
    rules: list[tuple[int, tuple[int, ...]]]
    rules_by_lhs: list[list[int]]
    is_nullable: list[bool]
    ignore_dfas: list[ByteDFA]
    start: int

    @property
    def num_terminals(self) -> int:
        return len(self.terminal_dfas)


# nullable terminal DFA -> its non-empty version, one object per DFA (so grammars sharing a
# memoised terminal DFA share this one too, and with it the lexer walks of cfg_dfa_walk)
_NON_EMPTY: weakref.WeakKeyDictionary[ByteDFA, ByteDFA] = weakref.WeakKeyDictionary()


def _without_empty(dfa: ByteDFA) -> ByteDFA | None:
    """The DFA of ``L(dfa) - {""}`` (``None`` if that is empty)."""
    if not dfa.is_accepting[dfa.start_state]:
        return dfa
    found = _NON_EMPTY.get(dfa)
    if found is None:
        found = _strip_empty(dfa)
        if found is not None:
            _NON_EMPTY[dfa] = found
    return found


def _strip_empty(dfa: ByteDFA) -> ByteDFA | None:
    table = dfa.transitions
    # new state 0: a non-accepting copy of the old start; old state s becomes s + 1
    shifted = np.where(table >= 0, table + 1, -1).astype(np.int32)
    transitions = np.vstack([shifted[:1], shifted])
    if not (transitions[0] >= 0).any():
        return None
    is_accepting = np.concatenate([[False], dfa.is_accepting])
    keys = dfa.walk_keys
    return ByteDFA(
        transitions=transitions,
        byte_to_class=dfa.byte_to_class,
        is_accepting=is_accepting,
        walk_keys=None if keys is None else keys.without_empty(),
    )


def _terminal_dfa(name: str, regex: str | Node) -> ByteDFA:
    try:
        return regex_to_dfa(regex, dialect="python")
    except GrammarError as exc:
        shown = regex if isinstance(regex, str) else shown_text(regex)
        raise GrammarError(f"terminal {name} (regex {shown[:200]!r}): {exc}") from exc


def prepare_grammar(
    grammar: CfgGrammar, *, lenient: bool = False, is_writable: np.ndarray | None = None
) -> PreparedGrammar:
    """Check ``grammar`` and build its terminal automata (see module docstring).

    ``is_writable`` (``(256,)`` bool, the bytes a vocabulary's tokens hold: `writable_bytes`)
    cuts every terminal down to the strings those bytes can write, and drops the rules that
    need a terminal none of whose strings can be written (then the rules that need a
    nonterminal left with no rule), so generation never reaches a point where no token fits.

    Raises
    ------
    GrammarError
        A terminal regex is malformed/unsupported or matches nothing; a nonterminal has no
        rules, cannot derive any finite sentence, or is unreachable from the start symbol
        (unreachable rules only warn with ``lenient=True``); with ``is_writable``, no
        sentence can be written.
    """
    names = list(grammar.nonterminal_names)
    rules = [(lhs, tuple(rhs)) for lhs, rhs in grammar.rules]
    dfas: list[ByteDFA] = []
    replacement: dict[int, int] = {}  # terminal matching "" -> symbol that replaces it
    dropped: set[int] = set()  # terminals matching only ""
    unwritable: set[int] = set()  # terminals whose every string needs an unwritable byte
    extra_rules: list[tuple[int, tuple[int, ...]]] = []
    for t, (name, regex) in enumerate(
        zip(grammar.terminal_names, grammar.terminal_regexes, strict=True)
    ):
        check_deadline(f"building the automaton of terminal {name}")
        dfa = _terminal_dfa(name, regex)
        if is_writable is not None:
            try:
                dfa = writable_dfa(dfa, is_writable, CompileBudget())
            except GrammarError:
                unwritable.add(t)  # "" is always writable: such a terminal is not nullable
        nonempty = _without_empty(dfa)
        dfas.append(nonempty if nonempty is not None else dfa)
        if nonempty is None:
            dropped.add(t)
        elif nonempty is not dfa:
            # T matches "": T -> T_opt with T_opt: "" | T(non-empty)
            names.append(f"{name}?")
            opt = len(names) - 1
            replacement[t] = ~opt
            extra_rules += [(opt, ()), (opt, (t,))]
    if replacement or dropped:
        rules = [
            (lhs, tuple(replacement.get(s, s) for s in rhs if s not in dropped))
            for lhs, rhs in rules
        ]
    rules = rules + extra_rules
    if unwritable:
        rules = _writable_rules(grammar, rules, unwritable, len(names))
    rules = [(-1, (~grammar.start,))] + rules  # rule 0: S' -> start
    num_nt = len(names)
    rules_by_lhs: list[list[int]] = [[] for _ in range(num_nt)]
    for r, (lhs, _) in enumerate(rules[1:], start=1):
        rules_by_lhs[lhs].append(r)
    _check_defined(grammar, rules, rules_by_lhs, names)
    _check_productive(rules, rules_by_lhs, names)
    _check_reachable(grammar.start, rules, rules_by_lhs, names, lenient)
    ignore_dfas = []
    for t in grammar.ignore:
        if t in dropped or t in unwritable:
            continue
        ignore_dfas.append(dfas[t])
    return PreparedGrammar(
        grammar=grammar,
        terminal_names=list(grammar.terminal_names),
        terminal_dfas=dfas,
        nonterminal_names=names,
        rules=rules,
        rules_by_lhs=rules_by_lhs,
        is_nullable=_nullable(rules, num_nt),
        ignore_dfas=ignore_dfas,
        start=grammar.start,
    )


def _writable_rules(
    grammar: CfgGrammar,
    rules: list[tuple[int, tuple[int, ...]]],
    unwritable: set[int],
    num_nonterminals: int,
) -> list[tuple[int, tuple[int, ...]]]:
    """``rules`` without those that need an ``unwritable`` terminal or a nonterminal left
    with no finite sentence, nor the rules only those made reachable."""
    kept = [(lhs, rhs) for lhs, rhs in rules if not unwritable.intersection(rhs)]
    is_productive = [False] * num_nonterminals
    changed = True
    while changed:
        changed = False
        for lhs, rhs in kept:
            if not is_productive[lhs] and all(s >= 0 or is_productive[~s] for s in rhs):
                is_productive[lhs] = changed = True
    if not is_productive[grammar.start]:
        needed = []
        for t in sorted(unwritable)[:5]:
            regex = grammar.terminal_regexes[t]
            shown = regex if isinstance(regex, str) else shown_text(regex)
            needed.append(f"{grammar.terminal_names[t]} {shown[:40]!r}")
        raise GrammarError(
            "no output of this grammar can be written with this model's vocabulary: it "
            "needs terminals whose every string has a byte that no token holds: "
            + ", ".join(needed)
        )
    kept = [(lhs, rhs) for lhs, rhs in kept if all(s >= 0 or is_productive[~s] for s in rhs)]
    was_reachable = _reachable(grammar.start, rules)
    is_reachable = _reachable(grammar.start, kept)
    return [(lhs, rhs) for lhs, rhs in kept if lhs in is_reachable or lhs not in was_reachable]


def _reachable(start: int, rules: list[tuple[int, tuple[int, ...]]]) -> set[int]:
    """The nonterminals ``rules`` reach from ``start``."""
    by_lhs: dict[int, list[tuple[int, ...]]] = {}
    for lhs, rhs in rules:
        by_lhs.setdefault(lhs, []).append(rhs)
    seen = {start}
    stack = [start]
    while stack:
        for rhs in by_lhs.get(stack.pop(), ()):
            for s in rhs:
                if s < 0 and ~s not in seen:
                    seen.add(~s)
                    stack.append(~s)
    return seen


def _check_defined(grammar, rules, rules_by_lhs, names) -> None:
    for r, (_, rhs) in enumerate(rules):
        for s in rhs:
            if s < 0 and not rules_by_lhs[~s]:
                raise GrammarError(f"rule {names[~s]!r} is used but never defined")
            if s >= len(grammar.terminal_names):
                raise GrammarError(f"rule #{r} refers to unknown terminal #{s}")


def _nullable(rules, num_nt: int) -> list[bool]:
    is_nullable = [False] * num_nt
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules[1:]:
            if not is_nullable[lhs] and all(s < 0 and is_nullable[~s] for s in rhs):
                is_nullable[lhs] = changed = True
    return is_nullable


def _check_productive(rules, rules_by_lhs, names) -> None:
    """Every nonterminal must derive some finite string of terminals."""
    is_productive = [False] * len(names)
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules[1:]:
            if not is_productive[lhs] and all(s >= 0 or is_productive[~s] for s in rhs):
                is_productive[lhs] = changed = True
    stuck = [names[n] for n in range(len(names)) if rules_by_lhs[n] and not is_productive[n]]
    if stuck:
        raise GrammarError(
            "these rules can never finish (every expansion recurses forever): " + ", ".join(stuck)
        )


def _check_reachable(start, rules, rules_by_lhs, names, lenient: bool) -> None:
    seen = {start}
    stack = [start]
    while stack:
        n = stack.pop()
        for r in rules_by_lhs[n]:
            for s in rules[r][1]:
                if s < 0 and ~s not in seen:
                    seen.add(~s)
                    stack.append(~s)
    unreachable = [names[n] for n in range(len(names)) if rules_by_lhs[n] and n not in seen]
    if unreachable:
        message = "rules unreachable from the start symbol: " + ", ".join(unreachable)
        if not lenient:
            raise GrammarError(message)
        warnings.warn(f"formcast: {message}", stacklevel=3)


caches.register("cfg.non_empty_terminal_dfas", "weak by terminal DFA", _NON_EMPTY.clear)
