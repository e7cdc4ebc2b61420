"""Complements of schema languages: ``not``, overlapping ``oneOf``, ``if``/``then``/``else``.

An instance is valid against ``{...rest, "not": N}`` iff it is valid against ``rest`` and
invalid against ``N``. :func:`compile_not` builds that language type by type:

- Strings, ``null``, booleans: formcast writes each such value as exactly one text (strings as
  ``json.dumps(..., ensure_ascii=False)``, see ``charset``), so the values valid against
  ``rest`` and not ``N`` are the text difference ``R - L`` of the two (regular) trees. Both
  become byte DFAs (``index.compile.regex_to_dfa``), are decoded from UTF-8 to DFAs over code
  point classes (:func:`text_automaton`, ``char_dfa.Alphabet``), their product keeps the
  pairs where ``R`` accepts and ``L`` does not, and state elimination writes the minimal
  result back as a syntax tree (``dfa_to_tree``; :func:`text_difference`). Length bounds stay
  out of the automata (a bound ``n`` is a chain of ``n`` states whose tree nests ``n`` deep):
  ``not (Len and P)`` is ``not Len or not P`` with ``not Len`` a plain length range, and
  ``rest``'s bounds become a length lookahead around the difference (as
  ``compiler._guarded_string`` writes a pattern with bounds).
- Numbers: one value has many texts (``5``, ``5.0``, ``-0`` = ``0``), and a number tree
  accepts a subset of them (integers without fraction, ranges without exponent), so the
  difference is taken over *values* (:func:`number_difference`): each side's exponent-free
  texts are normalised (trailing fraction zeros, a fraction of zeros and the sign of zero
  dropped; a finite set of exponent texts is converted exactly), the normalised languages are
  subtracted, and the result is expanded back to every exponent-free spelling of its values.
  Exponent spellings are not written in a nontrivial complement (value comparisons over
  exponents are not regular). Invariant relied on: a number tree of the compiler that accepts
  infinitely many exponent texts accepts the exponent-free spellings of their values too
  (``NUMBER`` does; ranges and multiples write no exponent at all).
- Objects and arrays: nesting makes a text difference depend on key order and on
  unconstrained values (the unbounded-value marker is not a regular language), so the
  negation is pushed into the structure instead (:class:`StructuredNegation`, De Morgan over
  ``N``'s keywords): a required name absent, a declared property present with a value valid
  against its negation, a property count out of bounds, an item not valid against ``items``
  (``contains: {not: S}``), a member under none of ``N``'s names where ``N`` closes its
  object (``rest`` allowing other keys: the private ``merge.SOME_EXTRA_KEY``, one extra
  member valid against the negation of ``N``'s ``additionalProperties``, the others
  anything ``rest`` allows), ... Each disjunct is a schema compiled merged with ``rest`` (its
  own ``not`` parts recursively by this module), so every part is exact, unconstrained values
  included. ``N``'s absent ``additionalProperties`` means what the specification says
  (``true``) whatever ``strict`` is: the complement of a strict reading would accept
  instances the specification rejects.

Layout: every disjunct lays out ``rest``'s members in ``rest``'s order
(``values.property_order``), then, where ``rest`` allows other keys, the names ``N``
declares, then the other keys. A name only ``N`` (or a ``then``/``else`` branch) mentions is
thus written after the declared ones and before any other key, as ``values.property_order``
(and so ``values.serialize``) orders the names of a schema's negated subschemas.

``oneOf`` with branches that may overlap is ``B_i and not (B_j or ...)`` per branch (only the
branches not provably disjoint from ``B_i``: :func:`exclusive_branch`); ``if``/``then``/
``else`` is ``(if and then) or (not if and else)`` (:func:`conditional`). What cannot be
complemented exactly (``uniqueItems``, ``patternProperties``, an ``enum`` of objects,
``additionalProperties`` beside ``patternProperties`` where ``rest`` allows keys of its own, ...) or goes over the budgets
(``MAX_TEXT_STATES`` byte DFA states per side, ``char_dfa.MAX_DFA_STATES`` product states,
``MAX_TREE_CHARS`` of tree, ``MAX_DISJUNCTS``, ``MAX_NESTED_NOTS``) is refused with its
pointer through the compiler's ``refuse``; under ``lenient`` the whole ``not`` is dropped.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from formcast.errors import CompileBudgetError, GrammarError, SchemaError
from formcast.grammar import caches
from formcast.grammar.automata.budget import check_deadline
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.char_dfa import (
    MAX_DFA_STATES,
    Alphabet,
    CharDFA,
    KeyLanguageTooLarge,
    minimize,
    names_dfa,
)
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.json_schema.dfa_to_tree import tree_or_automaton
from formcast.grammar.json_schema.merge import SOME_EXTRA_KEY, VALIDATION_KEYWORDS
from formcast.grammar.json_schema.values import JSON_TYPES, property_order, type_of
from formcast.grammar.regex.combinators import alt, chars, group, literal, opt, repeat, seq
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import CharSet, Lookahead, Node, Reference, Repeat, subtrees

if TYPE_CHECKING:
    from formcast.grammar.json_schema.compiler import SchemaCompiler

MAX_TEXT_STATES = 20_000  # byte DFA states of one side of a text difference
TEXT_TIMEOUT_S = 10.0  # seconds to build one side's byte DFA
MAX_TREE_CHARS = 200_000  # regex size (num_chars) of one complement's tree
MAX_DISJUNCTS = 64  # schemas a structured negation may split into
MAX_NESTED_NOTS = 16  # complements inside complements (a recursive $ref under not)
MAX_EXPONENT_TEXTS = 256  # exponent spellings of one number tree converted one by one
MAX_PLAIN_DIGITS = 400  # digits of one exponent spelling written out without exponent

_STRUCTURED = ("array", "object")
_NESTED_NOTS: ContextVar[int] = ContextVar("formcast_nested_nots", default=0)


class Refused(Exception):
    """A complement that cannot be built exactly (reported through ``SchemaCompiler.refuse``)."""

    def __init__(self, message: str, pointer: str, keyword: str) -> None:
        super().__init__(message)
        self.message, self.pointer, self.keyword = message, pointer, keyword


class TooManyDisjuncts(Refused):
    """A structured negation over ``MAX_DISJUNCTS`` (another way of splitting may fit)."""


# ---- text automata ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TextAutomaton:
    """A DFA over code points whose every state can reach acceptance (start state 0).

    ``edges[s]`` are disjoint ``(lo, hi, target)`` code point intervals; a code point on no
    edge leads nowhere.
    """

    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    is_accepting: tuple[bool, ...]

    def charsets(self) -> list[tuple[tuple[int, int], ...]]:
        """Every interval of every edge (to build an ``Alphabet`` fine enough for them)."""
        return [((lo, hi),) for edges in self.edges for lo, hi, _ in edges]

    def on(self, alphabet: Alphabet) -> CharDFA:
        """The complete DFA over ``alphabet``'s classes (one dead state added last)."""
        dead = len(self.edges)
        table = np.full((dead + 1, alphabet.num_classes), dead, dtype=np.int32)
        for state, edges in enumerate(self.edges):
            for lo, hi, target in edges:
                table[state, alphabet.class_of(lo) : alphabet.class_of(hi) + 1] = target
        return CharDFA(table, np.array([*self.is_accepting, False], dtype=bool))


def text_automaton(node: Node) -> TextAutomaton | None:
    """The code point DFA of the texts that fullmatch ``node`` (``None``: empty language).

    Parameters
    ----------
    node : Node
        A syntax tree without rule references.

    Returns
    -------
    TextAutomaton | None
        The minimal byte DFA of ``node`` decoded from UTF-8 (same states, edges on code points).

    Raises
    ------
    CompileBudgetError
        The byte DFA needs more than ``MAX_TEXT_STATES`` states or ``TEXT_TIMEOUT_S`` seconds.
    GrammarError
        The automaton builder refuses the tree (a lookahead it cannot build exactly).
    """
    dfa = byte_dfa(node)
    if dfa is None:
        return None
    return TextAutomaton(_decoded_edges(dfa), tuple(bool(a) for a in dfa.is_accepting))


def byte_dfa(node: Node) -> ByteDFA | None:
    """The minimal byte DFA of ``node`` within the complement budgets (``None``: empty)."""
    try:
        return regex_to_dfa(node, max_states=MAX_TEXT_STATES, timeout_s=TEXT_TIMEOUT_S)
    except CompileBudgetError:
        raise
    except GrammarError as exc:
        if "language is empty" in str(exc):  # determinize/trim: no string is accepted
            return None
        raise


# lead byte ranges of multi-byte UTF-8 sequences: (first, last, continuation bytes, payload mask)
_LEADS = ((0xC0, 0xDF, 1, 0x1F), (0xE0, 0xEF, 2, 0x0F), (0xF0, 0xF7, 3, 0x07))


def _decoded_edges(dfa: ByteDFA) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """Per state, the code point intervals of the UTF-8 sequences leaving it, by target.

    A sequence is a lead byte and ``k`` continuation bytes; the code points reachable from a
    state after a lead byte are its payload bits followed by the ``6k`` bits of
    :func:`suffix` (memoised per state and ``k``: continuation states are shared).
    """
    rows = dfa.transitions[:, dfa.byte_to_class].tolist()  # (num_states, 256)
    memo: dict[tuple[int, int], list[tuple[int, int, int]]] = {}

    def runs(state: int, first: int, last: int) -> list[tuple[int, int, int]]:
        """Maximal byte runs ``first..last`` with one (live) target."""
        row = rows[state]
        out = []
        byte = first
        while byte <= last:
            target, end = row[byte], byte
            while end < last and row[end + 1] == target:
                end += 1
            if target >= 0:
                out.append((byte, end, target))
            byte = end + 1
        return out

    def suffix(state: int, k: int) -> list[tuple[int, int, int]]:
        """``(lo, hi, target)`` over the ``6k`` payload bits of ``k`` continuation bytes."""
        found = memo.get((state, k))
        if found is not None:
            return found
        width = 1 << (6 * (k - 1))
        out: list[tuple[int, int, int]] = []
        for first, last, target in runs(state, 0x80, 0xBF):
            if k == 1:
                out.append((first & 0x3F, last & 0x3F, target))
                continue
            inner = suffix(target, k - 1)
            if len(inner) == 1 and inner[0][0] == 0 and inner[0][1] == width - 1:
                lo, hi = (first & 0x3F) * width, (last & 0x3F) * width + width - 1
                out.append((lo, hi, inner[0][2]))
                continue
            for byte in range(first, last + 1):
                base = (byte & 0x3F) * width
                out.extend((base + lo, base + hi, t) for lo, hi, t in inner)
        found = memo[(state, k)] = _merged(out)
        return found

    edges = []
    for state in range(len(rows)):
        out = runs(state, 0x00, 0x7F)
        for first, last, k, mask in _LEADS:
            for lead_first, lead_last, target in runs(state, first, last):
                for lead in range(lead_first, lead_last + 1):
                    base = (lead & mask) << (6 * k)
                    out.extend((base + lo, base + hi, t) for lo, hi, t in suffix(target, k))
        edges.append(tuple(_merged(out)))
    return tuple(edges)


def _merged(intervals: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Sorted intervals with adjacent ones of the same target joined."""
    out: list[tuple[int, int, int]] = []
    for lo, hi, target in sorted(intervals):
        if out and out[-1][2] == target and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, target)
        else:
            out.append((lo, hi, target))
    return out


def _explore(
    start: Hashable,
    step: Callable[[Any, int], Hashable],
    num_classes: int,
    accept: Callable[[Any], bool],
) -> CharDFA:
    """The complete DFA of the states reachable from ``start`` (``step(state, class)``)."""
    ids = {start: 0}
    states = [start]
    rows: list[list[int]] = []
    k = 0
    while k < len(states):
        current = states[k]
        k += 1
        if k % 256 == 0:
            check_deadline("complementing a schema")
        row = []
        for c in range(num_classes):
            nxt = step(current, c)
            found = ids.get(nxt)
            if found is None:
                if len(states) >= MAX_DFA_STATES:
                    raise KeyLanguageTooLarge(f"complement automaton over {MAX_DFA_STATES} states")
                found = ids[nxt] = len(states)
                states.append(nxt)
            row.append(found)
        rows.append(row)
    accepting = np.array([accept(s) for s in states], dtype=bool)
    return CharDFA(np.array(rows, dtype=np.int32).reshape(len(rows), num_classes), accepting)


def _pair(
    first: CharDFA, second: CharDFA, accept: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> CharDFA:
    """The product of two complete DFAs over one alphabet, reachable pairs only.

    A pair ``(a, b)`` is the code ``a * n_b + b``; breadth-first layers of codes are expanded
    for every class at once (numpy), then renumbered by rank (the start, code 0, is state 0).
    ``accept(acc_a, acc_b)`` gives the accepting pairs from the two sides' acceptances.

    Raises
    ------
    KeyLanguageTooLarge
        Over ``char_dfa.MAX_DFA_STATES`` reachable pairs.
    """
    table_a, table_b = first.table.astype(np.int64), second.table.astype(np.int64)
    num_b = len(table_b)
    codes = frontier = np.zeros(1, dtype=np.int64)  # sorted codes seen so far; new ones
    while frontier.size:
        reached = table_a[frontier // num_b] * num_b + table_b[frontier % num_b]
        frontier = np.setdiff1d(reached, codes)
        codes = np.union1d(codes, frontier)
        if len(codes) > MAX_DFA_STATES:
            raise KeyLanguageTooLarge(f"complement automaton over {MAX_DFA_STATES} states")
    left, right = codes // num_b, codes % num_b
    table = np.searchsorted(codes, table_a[left] * num_b + table_b[right]).astype(np.int32)
    accepting = accept(first.is_accepting[left], second.is_accepting[right])
    return CharDFA(table, np.asarray(accepting, dtype=bool))


def _both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a & b


def _first_only(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a & ~b


def _either(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a | b


def _meet(first: CharDFA, second: CharDFA) -> bool:
    """True if the two DFAs accept a common string (every product state is reachable)."""
    return bool(_pair(first, second, _both).is_accepting.any())


def _tree(dfa: CharDFA, alphabet: Alphabet, allow_automaton: bool = True) -> Node | None:
    """The minimal ``dfa`` as a character-level syntax tree (``None``: empty language), or,
    with ``allow_automaton``, as an automaton node where state elimination is over its
    bounds (``KeyLanguageTooLarge`` otherwise)."""
    return tree_or_automaton(
        minimize(dfa),
        alphabet,
        "a text difference (not / oneOf)",
        allow_automaton=allow_automaton,
        max_chars=MAX_TREE_CHARS,
        encode=chars,
    )


@functools.lru_cache(maxsize=256)  # pure; oneOf branches repeat one pair many times
def texts_meet(first: Node, second: Node) -> bool:
    """True if some text fullmatches both trees (without references or markers).

    Raises
    ------
    CompileBudgetError
        A side's byte DFA is over ``MAX_TEXT_STATES`` states or ``TEXT_TIMEOUT_S``.
    """
    kept, removed = text_automaton(first), text_automaton(second)
    if kept is None or removed is None:
        return False
    alphabet = Alphabet(kept.charsets() + removed.charsets())
    return _meet(kept.on(alphabet), removed.on(alphabet))


@functools.lru_cache(maxsize=256)
def text_difference(
    first: Node, second: Node, *, prefix: str = "", allow_automaton: bool = True
) -> Node | None:
    """A tree of the texts ``x`` such that ``prefix + x`` is a text of ``first`` and not of
    ``second``.

    Parameters
    ----------
    first, second : Node
        Syntax trees without rule references or unbounded-value markers.
    prefix : str
        Text every result starts with, left out of the tree (a string's opening quote,
        when the caller guards the rest with a length lookahead).
    allow_automaton : bool
        Write a difference whose tree is over its bounds as an automaton node (no regex
        text: off for ``json_schema_to_regex``).

    Returns
    -------
    Node | None
        The minimal difference DFA (started after ``prefix``) written back by state
        elimination; ``None`` when it is empty.

    Raises
    ------
    CompileBudgetError, KeyLanguageTooLarge
        A side, the product or the tree is over its budget.
    """
    kept, removed = text_automaton(first), text_automaton(second)
    if kept is None:
        return None
    alphabet = Alphabet(kept.charsets() + (removed.charsets() if removed else []))
    kept_dfa = kept.on(alphabet)
    left = kept_dfa if removed is None else _pair(kept_dfa, removed.on(alphabet), _first_only)
    return _tree(_after(left, alphabet, prefix), alphabet, allow_automaton)


def _after(dfa: CharDFA, alphabet: Alphabet, prefix: str) -> CharDFA:
    """``dfa`` started in the state ``prefix`` leads to (its left quotient by ``prefix``)."""
    state = 0
    for ch in prefix:
        state = int(dfa.table[state, alphabet.class_of(ord(ch))])
    if state == 0:
        return dfa
    order = np.arange(len(dfa.table))
    order[0], order[state] = state, 0  # a swap: its own inverse
    return CharDFA(order[dfa.table[order]].astype(np.int32), dfa.is_accepting[order])


# ---- numbers: differences of value sets ------------------------------------------------------

# Phases of an exponent-free JSON number -?(0|[1-9][0-9]*)(\.[0-9]+)?, read left to right:
# after "-", "0", "-0", a nonzero integer part, ".", a fraction ending in a nonzero digit or in
# a zero; NO: not such a number (prefix).
_START, _MINUS, _ZERO, _MINUS_ZERO, _INT, _DOT, _FRAC, _FRAC_ZERO, _NO = range(9)
_INT_ENDS = (_ZERO, _MINUS_ZERO, _INT)  # a complete integer part, no fraction
_FRAC_ENDS = (_FRAC, _FRAC_ZERO)
_NUMBER_CHARS = "+-.0123456789Ee"
_EXPONENT_TEXTS = parse_regex(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+")
_ZERO_SPELLINGS = seq(
    opt(literal("-")), literal("0"), opt(seq(literal("."), repeat(literal("0"), 1, None)))
)


def _phase_step(phase: int, ch: str | None) -> int:
    """The phase after character ``ch`` (``None``: a character no number uses)."""
    if ch is None or phase == _NO:
        return _NO
    is_digit = ch.isdigit()
    if phase == _START:
        return _MINUS if ch == "-" else _ZERO if ch == "0" else _INT if is_digit else _NO
    if phase == _MINUS:
        return _MINUS_ZERO if ch == "0" else _INT if is_digit else _NO
    if phase in (_ZERO, _MINUS_ZERO):
        return _DOT if ch == "." else _NO
    if phase == _INT:
        return _INT if is_digit else _DOT if ch == "." else _NO
    # _DOT, _FRAC, _FRAC_ZERO
    return _FRAC_ZERO if ch == "0" else _FRAC if is_digit else _NO


class _NumberAlphabet:
    """An alphabet with every number character a class of its own, and their class ids."""

    def __init__(self, charsets: list[tuple[tuple[int, int], ...]]) -> None:
        singles = [((ord(ch), ord(ch)),) for ch in _NUMBER_CHARS]
        self.alphabet = Alphabet(charsets + singles)
        self.char_of: list[str | None] = [
            chr(lo) if lo == hi and chr(lo) in _NUMBER_CHARS else None
            for lo, hi in zip(self.alphabet.starts, self.alphabet.ends, strict=True)
        ]

    def class_of(self, ch: str) -> int:
        return self.alphabet.class_of(ord(ch))


def _reach_by(table_column: np.ndarray, is_accepting: np.ndarray) -> np.ndarray:
    """(n,) bool: some ``k >= 0`` steps along ``table_column`` (one class) reach acceptance."""
    reach = is_accepting.copy()
    while True:
        grown = reach | reach[table_column]
        if (grown == reach).all():
            return reach
        reach = grown


def _canonical_values(dfa: CharDFA, numbers: _NumberAlphabet) -> tuple[CharDFA, bool]:
    """The canonical texts of the nonzero values ``dfa`` spells without exponent, and
    whether it spells zero.

    A canonical text has no trailing fraction zero, no all-zero fraction and no ``-0``. Value
    ``c`` has a spelling in the language iff ``c 0^k`` (``c`` with a fraction) or ``c`` /
    ``c.0^k`` (``c`` an integer) is accepted for some ``k``: the product of ``dfa`` with the
    phases accepts on those conditions, precomputed per state of ``dfa``.
    """
    table, accepting = dfa.table, dfa.is_accepting
    zero, dot = numbers.class_of("0"), numbers.class_of(".")
    zeros_reach = _reach_by(table[:, zero], accepting)  # x 0^k accepted, k >= 0
    as_integer = accepting | zeros_reach[table[table[:, dot], zero]]  # x or x.0 0^k accepted
    char_of = numbers.char_of

    def step(state: tuple[int, int], c: int) -> tuple[int, int]:
        x, phase = state
        nxt = _phase_step(phase, char_of[c])
        return (0, _NO) if nxt == _NO else (int(table[x, c]), nxt)

    def accept(state: tuple[int, int]) -> bool:
        x, phase = state
        return bool(as_integer[x]) if phase == _INT else phase == _FRAC and bool(zeros_reach[x])

    values = _explore((0, _START), step, numbers.alphabet.num_classes, accept)
    minus = table[0, numbers.class_of("-")]
    has_zero = bool(as_integer[table[0, zero]] or as_integer[table[minus, zero]])
    return values, has_zero


def _exponent_values(
    dfa: CharDFA, exponent_texts: CharDFA, numbers: _NumberAlphabet
) -> tuple[list[str], bool] | None:
    """The canonical texts of the values ``dfa`` spells with an exponent (and whether zero is
    one), or ``None`` when there are infinitely many such spellings."""
    spelled = minimize(_pair(dfa, exponent_texts, _both))
    table = spelled.table.tolist()
    live = _live(spelled)
    texts: list[str] = []
    path: list[str] = []
    on_path: set[int] = set()

    def visit(state: int) -> bool:  # False: a cycle among live states (infinitely many)
        if spelled.is_accepting[state]:
            if len(texts) >= MAX_EXPONENT_TEXTS:
                raise KeyLanguageTooLarge(f"over {MAX_EXPONENT_TEXTS} exponent spellings")
            texts.append("".join(path))
        on_path.add(state)
        for c, target in enumerate(table[state]):
            ch = numbers.char_of[c]
            if not live[target] or ch is None:
                continue
            if target in on_path:
                return False
            path.append(ch)
            if not visit(target):
                return False
            path.pop()
        on_path.discard(state)
        return True

    if not live[0]:
        return [], False
    if not visit(0):
        return None
    out: list[str] = []
    has_zero = False
    for text in texts:
        value = Decimal(text)
        if value == 0:
            has_zero = True
            continue
        if abs(value.adjusted()) > MAX_PLAIN_DIGITS:
            raise KeyLanguageTooLarge(f"{text} has over {MAX_PLAIN_DIGITS} digits")
        plain = format(value, "f")
        out.append(plain.rstrip("0").rstrip(".") if "." in plain else plain)
    return out, has_zero


def _live(dfa: CharDFA) -> np.ndarray:
    """(n,) bool: states from which acceptance can be reached."""
    live = dfa.is_accepting.copy()
    while True:
        grown = live | live[dfa.table].any(axis=1)
        if (grown == live).all():
            return live
        live = grown


def _value_set(
    automaton: TextAutomaton, numbers: _NumberAlphabet, exponent_texts: CharDFA
) -> tuple[CharDFA, bool]:
    """Canonical nonzero value texts and the zero flag of a number tree's automaton.

    Exponent spellings count when finitely many (converted exactly); infinitely many are
    assumed to be spelled without exponent too (module docstring: the number-tree invariant).
    """
    dfa = automaton.on(numbers.alphabet)
    values, has_zero = _canonical_values(dfa, numbers)
    found = _exponent_values(dfa, exponent_texts, numbers)
    if found is not None and (found[0] or found[1]):
        texts, exp_zero = found
        values = _pair(values, names_dfa(texts, numbers.alphabet), _either)
        has_zero = has_zero or exp_zero
    return values, has_zero


def _spellings(values: CharDFA, numbers: _NumberAlphabet) -> CharDFA:
    """Every exponent-free text whose value has its canonical text in ``values`` (no zero).

    States ``(phase, q, p)``: ``q`` is ``values``' state after the whole text, ``p`` after the
    text with its trailing fraction zeros (and an all-zero fraction with its dot) removed,
    i.e. after the canonical text of the value read so far.
    """
    table, accepting = values.table, values.is_accepting
    char_of = numbers.char_of

    def step(state: tuple[int, int, int], c: int) -> tuple[int, int, int]:
        phase, q, p = state
        nxt = _phase_step(phase, char_of[c])
        if nxt == _NO:
            return (_NO, 0, 0)
        q2 = int(table[q, c])
        return (nxt, q2, p if nxt in (_DOT, _FRAC_ZERO) else q2)

    def accept(state: tuple[int, int, int]) -> bool:
        phase, _, p = state
        return (phase in _INT_ENDS or phase in _FRAC_ENDS) and bool(accepting[p])

    return _explore((_START, 0, 0), step, numbers.alphabet.num_classes, accept)


@functools.lru_cache(maxsize=256)
def number_difference(first: Node, second: Node) -> Node | None:
    """A tree of number texts whose values ``first`` spells and ``second`` does not.

    Parameters
    ----------
    first, second : Node
        Trees of JSON number texts (the number part of two schemas).

    Returns
    -------
    Node | None
        ``first`` itself when no value is spelled by both; ``None`` when every value of
        ``first`` is one of ``second``; else every exponent-free spelling of the values of
        ``first`` that ``second`` lacks.

    Raises
    ------
    CompileBudgetError, KeyLanguageTooLarge
        A side, a product or the tree is over its budget.
    """
    kept, removed = text_automaton(first), text_automaton(second)
    if kept is None:
        return None
    if removed is None:
        return first
    exponent = text_automaton(_EXPONENT_TEXTS)
    assert exponent is not None
    numbers = _NumberAlphabet(kept.charsets() + removed.charsets() + exponent.charsets())
    exponent_texts = exponent.on(numbers.alphabet)
    kept_values, kept_zero = _value_set(kept, numbers, exponent_texts)
    removed_values, removed_zero = _value_set(removed, numbers, exponent_texts)
    has_zero = kept_zero and not removed_zero
    if not (kept_zero and removed_zero) and not _meet(kept_values, removed_values):
        return first
    left = _pair(kept_values, removed_values, _first_only)
    if not left.is_accepting.any():  # (every state of a _pair product is reachable)
        return _ZERO_SPELLINGS if has_zero else None
    spelled = _tree(_spellings(minimize(left), numbers), numbers.alphabet)
    return alt([spelled, _ZERO_SPELLINGS if has_zero else None])


# ---- structured values: the negation pushed into the keywords ---------------------------------


def is_trivial(schema: Any) -> bool:
    """True if ``schema`` accepts every instance on its face (``true``, or no assertion)."""
    if schema is True:
        return True
    return isinstance(schema, dict) and not any(k in VALIDATION_KEYWORDS for k in schema)


def _types_of(schema: dict) -> set[str]:
    """The JSON types ``schema`` may accept (``type``, narrowed by ``enum``/``const``)."""
    declared = schema.get("type", list(JSON_TYPES))
    types = {declared} if isinstance(declared, str) else set(declared)
    if "number" in types:
        types.add("integer")
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        found: set[str] = set()
        for value in values:
            found |= type_of(value)
        types &= found
    return types


class StructuredNegation:
    """The objects and arrays *not* valid against a schema, as a union of schemas.

    Each disjunct (:meth:`disjuncts`) is meant to be merged with ``rest``, the schema the
    instance is also valid against: what ``rest`` says about the keys an object may have
    (its declared names; whether other keys are allowed) decides the disjuncts of
    ``additionalProperties`` and ``propertyNames``, and its array layout (prefix items) those
    of array keywords. ``laid_out``: every name the disjuncts are merged with as declared
    (:meth:`lay_out`); ``rest``'s names until then.
    """

    def __init__(self, c: SchemaCompiler, rest: dict) -> None:
        self.c = c
        self.rest_types = _types_of(rest) & set(_STRUCTURED)
        props = rest.get("properties") or {}
        required = [r for r in rest.get("required", []) if isinstance(r, str)]
        self.rest_names = list(dict.fromkeys([*props, *required]))
        self.laid_out = self.rest_names
        self.rest_required = set(required)
        # the values rest lists for a member, by their JSON text (``SchemaCompiler.listed_values``)
        self.rest_listed = {
            name: values
            for name, sub in props.items()
            if (values := self.c.listed_values(sub, "/properties")) is not None
        }
        if rest.get("patternProperties"):
            self.rest_has_extras = True
        elif "additionalProperties" in rest:
            self.rest_has_extras = rest["additionalProperties"] is not False
        else:
            self.rest_has_extras = not c.strict
        items = rest.get("items", True)
        self.rest_is_list_form = isinstance(items, list)
        if self.rest_is_list_form:
            self.rest_prefix, self.rest_tail = items, rest.get("additionalItems", True)
        else:
            self.rest_prefix, self.rest_tail = rest.get("prefixItems", []), items

    def lay_out(self, names: list[str]) -> None:
        """The disjuncts will be merged with ``names`` declared (``rest``'s and, where it
        allows other keys, the negated schema's: :func:`_complement`). Such a name is no
        extra key of the merged object, so a closed object fails on it through its own
        disjunct (:func:`_present`), not through ``SOME_EXTRA_KEY``."""
        self.laid_out = list(dict.fromkeys(names))

    def disjuncts(self, schema: Any, pointer: str) -> list[Any]:
        """Schemas whose union is the objects and arrays not valid against ``schema``.

        Raises
        ------
        Refused
            A keyword whose negation formcast cannot write exactly, or over ``MAX_DISJUNCTS``.
        """
        c = self.c
        everything = {"type": sorted(self.rest_types)}
        schema = c._resolve(schema, pointer)
        if schema is False:
            return [everything]
        if not isinstance(schema, dict) or is_trivial(schema):  # (keyword_types: a bool)
            return []
        schema = c._normalize(schema, pointer)
        out: list[Any] = []
        types = _types_of(schema) & self.rest_types
        missing = sorted(self.rest_types - types)
        if missing:
            out.append({"type": missing})
        if types and ("enum" in schema or "const" in schema):
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            values = [v for v in values if type_of(v) & types]
            if len(values) == 1:  # different from the one value
                out += self._not_equal(values[0])
            else:  # different from every value
                key = "enum" if "enum" in schema else "const"
                out += self._none_of([{"const": v} for v in values], f"{pointer}/{key}")
        if "object" in types:
            out += self._object(schema, pointer)
        if "array" in types:
            out += self._array(schema, pointer)
        for i, part in enumerate(schema.get("allOf", [])):
            out += self.disjuncts(part, f"{pointer}/allOf/{i}")
        if "anyOf" in schema:
            branches = schema["anyOf"]
            out += self._none_of(branches, f"{pointer}/anyOf", types)
        if "oneOf" in schema:
            branches = schema["oneOf"]
            out += self._none_of(branches, f"{pointer}/oneOf", types)
            # two or more valid branches: an instance valid against a pair
            for i in range(len(branches)):
                for j in range(i + 1, len(branches)):
                    out.append({"allOf": [branches[i], branches[j], everything]})
        if "not" in schema:
            out.append({"allOf": [schema["not"], everything]})
        unique = list({_key(d): d for d in out}.values())
        if len(unique) > MAX_DISJUNCTS:
            raise TooManyDisjuncts(
                f"the negation splits into more than {MAX_DISJUNCTS} object/array cases",
                pointer,
                "not",
            )
        return unique

    def _none_of(self, branches: list, pointer: str, types: set[str] | None = None) -> list[Any]:
        """Disjuncts of "valid against no branch": the product of the branches' disjuncts
        (:meth:`_product`) or the split by the value of a member whose values branches list
        (:meth:`_split_by_listed_member`), whichever has fewer (each disjunct is compiled);
        where both go over ``MAX_DISJUNCTS`` (or the product does and no member is listed),
        the split by the presence of a member branches require
        (:meth:`_split_by_required_member`), refused where that goes over too. ``types``: the
        structured types the union must be exact for (the caller's other disjuncts cover the
        rest of ``rest``'s; ``None``: all of them). A branch that is an ``anyOf`` alone counts
        as its branches, and a repeated branch once (:meth:`_flat_branches`)."""
        branches = self._flat_branches(branches, pointer)
        try:
            product = self._product(branches, pointer)
        except TooManyDisjuncts as exc:
            product, refusal = None, exc
        try:
            split = self._split_by_listed_member(branches, pointer, types)
        except TooManyDisjuncts as exc:
            split, refusal = None, exc
        if product is None and split is None:
            split = self._split_by_required_member(branches, pointer, types)
            if split is None:
                raise refusal
            return split
        if product is None or (split is not None and len(split) < len(product)):
            return split
        return product

    def _flat_branches(self, branches: list, pointer: str, depth: int = 0) -> list:
        """``branches`` with each branch whose only assertion is ``anyOf`` replaced by its
        branches (``(A or B) or C = A or B or C``, through ``$ref``), recursively, and with
        branches whose resolved schemas are equal kept once; ``branches`` itself where
        neither applies (so refusals keep pointing at the schema's own branches)."""
        c = self.c
        out: dict[str, Any] = {}
        is_changed = False
        for i, branch in enumerate(branches):
            found = c._resolve(branch, f"{pointer}/{i}")
            if (
                isinstance(found, dict)
                and isinstance(found.get("anyOf"), list)
                and is_trivial({k: v for k, v in found.items() if k != "anyOf"})
                and depth < MAX_NESTED_NOTS
            ):
                inner = self._flat_branches(found["anyOf"], f"{pointer}/{i}/anyOf", depth + 1)
                for part in inner:
                    out.setdefault(_key(c._resolve(part, f"{pointer}/{i}/anyOf")), part)
                is_changed = True
                continue
            key = _key(found)
            is_changed |= key in out
            out.setdefault(key, branch)
        return list(out.values()) if is_changed else branches

    def _product(self, branches: list, pointer: str, types: set[str] | None = None) -> list[Any]:
        """Disjuncts of "valid against no branch": one per choice of a disjunct of each
        (with ``types``: of those instances of these types only).

        A choice is a conjunction, kept as a set of disjuncts: a disjunct chosen twice
        counts once, a choice whose types exclude each other is empty, and a choice that
        holds another choice's set is contained in it (dropped).
        """
        keyed: dict[str, Any] = {}
        combos: list[frozenset[str]] = [frozenset()]
        if types is not None:  # every choice starts with the type
            keyed["types"] = {"type": sorted(types)}
            combos = [frozenset(["types"])]
        for i, branch in enumerate(branches):
            options = []
            for option in self.disjuncts(branch, f"{pointer}/{i}"):
                key = _key(option)
                keyed[key] = option
                options.append(key)
            grown = {combo | {key} for combo in combos for key in options}
            combos = []
            for combo in sorted(grown, key=lambda c: (len(c), sorted(c))):
                if not _types_meet(keyed[k] for k in combo):
                    continue
                if any(kept <= combo for kept in combos):
                    continue
                combos.append(combo)
                if len(combos) > MAX_DISJUNCTS:
                    raise TooManyDisjuncts(
                        f"the negation of {len(branches)} branches splits into more than "
                        f"{MAX_DISJUNCTS} object/array cases",
                        pointer.rsplit("/", 1)[0],
                        pointer.rsplit("/", 1)[1],
                    )
        out = []
        for combo in sorted(combos, key=sorted):
            parts = [keyed[k] for k in sorted(combo)]
            out.append(parts[0] if len(parts) == 1 else {"allOf": parts})
        return out

    def _resolved_branches(self, branches: list, pointer: str) -> list[tuple[int, dict]] | None:
        """``(index, resolved schema)`` of the branches that some instance is valid against
        (``false`` left out: never a branch to avoid); ``None`` if one accepts every instance
        on its face (no instance is valid against none)."""
        resolved: list[tuple[int, dict]] = []
        for i, branch in enumerate(branches):
            found = self.c._resolve(branch, f"{pointer}/{i}")
            if found is False:
                continue
            if not isinstance(found, dict) or is_trivial(found):
                return None
            resolved.append((i, found))
        return resolved

    def _split_by_listed_member(
        self, branches: list, pointer: str, types: set[str] | None = None
    ) -> list[Any] | None:
        """ "Valid against no branch" of objects, split by the value of one member ``k`` whose
        values some branches list (``properties: {k: {enum: [...]}}``, strings, booleans and
        ``null`` only): a discriminated union whose discriminator may be absent.

        The cases partition the objects: ``k`` absent; ``k`` present with a value of one
        group (the listed values listed by the same branches); ``k`` present with a value no
        branch lists. In each case a listing branch either fails (its ``properties`` or
        ``required`` on ``k`` does) and drops out, or holds on ``k`` and keeps only its other
        keywords; a branch that lists no values of ``k`` stays whole. Each case is then
        ``case and (valid against none of what stays)``, recursively (:meth:`_none_of`), so
        a case costs the disjuncts of the branches it leaves. Every step removes the listed
        member from a listing branch or drops that branch, so the recursion ends. Arrays
        (where ``types``, as in :meth:`_none_of`, holds them) are the product's over arrays
        alone. ``None``: no member is listed, or objects are not among ``types``.
        """
        types = self.rest_types if types is None else types & self.rest_types
        if "object" not in types:
            return None
        resolved = self._resolved_branches(branches, pointer)
        if resolved is None:
            return []  # an instance valid against no branch does not exist
        listed: dict[str, dict[int, dict[str, Any]]] = {}  # name -> branch -> values by text
        for i, found in resolved:
            for name, sub in (found.get("properties") or {}).items():
                values = self.c.listed_values(sub, f"{pointer}/{i}/properties")
                if values is not None:
                    listed.setdefault(name, {})[i] = values
        if not listed:
            return None
        name = max(listed, key=lambda n: len(listed[n]))  # (the first of the most listed)
        by_branch = listed[name]

        def holds(found: dict) -> dict:  # the branch with its keywords on ``name`` held
            out = dict(found)  # (``name`` stays declared: else additionalProperties applies)
            out["properties"] = {**found["properties"], name: True}
            if "required" in found:
                out["required"] = [r for r in found["required"] if r != name]
            return out

        def requires(found: dict) -> bool:
            return name in (found.get("required") or [])

        # values grouped by the set of listing branches that list them, in listed order
        groups: dict[frozenset[int], list[Any]] = {}
        all_values: dict[str, Any] = {}
        for values in by_branch.values():
            all_values.update(values)
        rest_values = self.rest_listed.get(name)
        for text, value in all_values.items():
            if rest_values is not None and text not in rest_values:
                continue  # rest allows no such value: an empty case
            members = frozenset(i for i, values in by_branch.items() if text in values)
            groups.setdefault(members, []).append(value)
        cases: list[tuple[dict, list[Any]]] = []
        if self._may_have(name):
            for members, values in groups.items():
                case = {
                    "type": "object",
                    "required": [name],
                    "properties": {name: {"enum": values}},
                }
                stays = [
                    holds(found) if i in members else found
                    for i, found in resolved
                    if i in members or i not in by_branch
                ]
                cases.append((case, stays))
            unlisted = [found for i, found in resolved if i not in by_branch]
            if rest_values is None:
                other = {"not": {"enum": list(all_values.values())}}
                cases.append(
                    ({"type": "object", "required": [name], "properties": {name: other}}, unlisted)
                )
            elif set(rest_values) - set(all_values):
                others = [v for t, v in rest_values.items() if t not in all_values]
                cases.append(
                    (
                        {
                            "type": "object",
                            "required": [name],
                            "properties": {name: {"enum": others}},
                        },
                        unlisted,
                    )
                )
        if name not in self.rest_required:
            stays = [
                holds(found) if i in by_branch else found
                for i, found in resolved
                if i not in by_branch or not requires(found)
            ]
            cases.append(({"type": "object", "properties": {name: False}}, stays))
        return self._case_disjuncts(branches, pointer, types, cases, f"by member {name!r}")

    def _case_disjuncts(
        self,
        branches: list,
        pointer: str,
        types: set[str],
        cases: list[tuple[dict, list[Any]]],
        split: str,
    ) -> list[Any]:
        """The disjuncts of a split of "valid against no branch" of objects into ``cases``
        (``(case, the branches that stay in it)``, partitioning the objects): ``case and
        (valid against none of what stays)`` each, and where ``types`` holds arrays the
        product's over arrays alone; refused over ``MAX_DISJUNCTS`` (``split`` says how)."""
        out: dict[str, Any] = {}
        if "array" in types:
            for part in self._product(branches, pointer, {"array"}):
                out.setdefault(_key(part), part)
        everything = {"type": "object"}
        for case, stays in cases:
            parts = self._none_of(stays, pointer, {"object"}) if stays else [everything]
            for part in parts:
                if _types_meet([case, part]):
                    joined = {"allOf": [case, part]}
                    out.setdefault(_key(joined), joined)
        if len(out) > MAX_DISJUNCTS:
            raise TooManyDisjuncts(
                f"the negation of {len(branches)} branches splits into more than "
                f"{MAX_DISJUNCTS} object/array cases (also split {split})",
                pointer.rsplit("/", 1)[0],
                pointer.rsplit("/", 1)[1],
            )
        return list(out.values())

    def _split_by_required_member(
        self, branches: list, pointer: str, types: set[str] | None = None
    ) -> list[Any] | None:
        """ "Valid against no branch" of objects, split by the presence of a member ``k`` that
        some branches require: a union whose variants are told apart by their keys
        (``{"$date": ...}`` or ``{"$oid": ...}``, each closed).

        The two cases partition the objects. ``k`` absent: the branches requiring ``k`` fail
        and drop out, the others stay whole. ``k`` present: a branch that closes its object
        without declaring ``k`` (``additionalProperties: false``, no ``properties`` or
        ``patternProperties`` entry that could hold it) fails and drops out, a branch requiring
        ``k`` stays with ``k`` no longer required (its other keywords on ``k`` kept), the others
        stay whole. Each case is then ``case and (valid against none of what stays)``,
        recursively (:meth:`_none_of`): for closed variants the sum of their disjuncts instead
        of their product. Every step drops a branch or a requirement, so the recursion ends.
        Arrays (where ``types``, as in :meth:`_none_of`, holds them) are the product's over
        arrays alone. ``None``: no branch requires a member, or objects are not among
        ``types``.
        """
        types = self.rest_types if types is None else types & self.rest_types
        if "object" not in types:
            return None
        found_branches = self._resolved_branches(branches, pointer)
        if found_branches is None:
            return []  # an instance valid against no branch does not exist
        resolved = [found for _, found in found_branches]

        def required(found: dict) -> list[str]:
            return [r for r in found.get("required", []) if isinstance(r, str)]

        counts: dict[str, int] = {}
        for found in resolved:
            for name in dict.fromkeys(required(found)):
                counts[name] = counts.get(name, 0) + 1
        if not counts:
            return None
        name = max(counts, key=lambda n: counts[n])  # (the first of the most required)

        def is_closed_against(found: dict) -> bool:
            return (
                found.get("additionalProperties", True) is False
                and name not in (found.get("properties") or {})
                and not found.get("patternProperties")
            )

        def without(found: dict) -> dict:  # the branch with ``name`` no longer required
            return {**found, "required": [r for r in found["required"] if r != name]}

        cases: list[tuple[dict, list[Any]]] = []
        if name not in self.rest_required:
            stays = [found for found in resolved if name not in required(found)]
            cases.append(({"type": "object", "properties": {name: False}}, stays))
        if self._may_have(name):
            stays = [
                without(found) if name in required(found) else found
                for found in resolved
                if not is_closed_against(found)
            ]
            cases.append(({"type": "object", "required": [name]}, stays))
        return self._case_disjuncts(
            branches, pointer, types, cases, f"by the presence of member {name!r}"
        )

    def _may_have(self, name: str) -> bool:
        """False if ``rest`` allows no member ``name`` (not declared, no other keys allowed):
        a disjunct that needs the member is empty (and would declare it if written)."""
        return self.rest_has_extras or name in self.rest_names

    def _object(self, s: dict, pointer: str) -> list[Any]:
        """Objects invalid against the object keywords of ``s`` (one disjunct per way)."""
        c = self.c
        out: list[Any] = []
        props: dict[str, Any] = s.get("properties") or {}
        for name in s.get("required", []):
            out.append({"type": "object", "properties": {name: False}})
        for name, sub in props.items():
            if is_trivial(sub) or not self._may_have(name):
                continue
            if sub is False:
                out.append({"type": "object", "required": [name]})
            else:
                out.append(
                    {"type": "object", "required": [name], "properties": {name: {"not": sub}}}
                )
        patterns: dict[str, Any] = s.get("patternProperties") or {}
        for pattern, sub in patterns.items():
            if is_trivial(sub):
                continue
            if self.rest_has_extras:  # a key of the pattern with a value against it
                raise Refused(
                    "'not' of patternProperties where keys other than the declared ones are "
                    "allowed",
                    pointer,
                    "patternProperties",
                )
            for name in self.rest_names:
                if c.pattern_matches(pattern, name):
                    out.append(_present(name, sub))
        additional = s.get("additionalProperties", True)
        if not is_trivial(additional):
            if self.rest_has_extras and patterns:
                raise Refused(
                    "'not' of additionalProperties beside patternProperties where keys other "
                    "than the declared ones are allowed",
                    pointer,
                    "additionalProperties",
                )
            if self.rest_has_extras and not props and additional is False:
                out.append({"type": "object", "minProperties": 1})  # no key allowed at all
            elif self.rest_has_extras:  # a member under no name of s, against additional
                out.append(
                    {
                        "type": "object",
                        "properties": dict.fromkeys(props, True),
                        SOME_EXTRA_KEY: True if additional is False else {"not": additional},
                    }
                )
            for name in self.laid_out:
                if name in props or any(c.pattern_matches(p, name) for p in patterns):
                    continue
                out.append(_present(name, additional))
        names = s.get("propertyNames", True)
        if not is_trivial(names):
            if self.rest_has_extras:
                raise Refused(
                    "'not' of propertyNames where keys other than the declared ones are allowed",
                    pointer,
                    "propertyNames",
                )
            with spec_semantics(c):
                names_tree = c.compile_exact(names, pointer + "/propertyNames")
            for name in self.rest_names:
                if not c.fullmatch(names_tree, json.dumps(name, ensure_ascii=False)):
                    out.append({"type": "object", "required": [name]})
        if int(s.get("minProperties", 0)) > 0:
            out.append({"type": "object", "maxProperties": int(s["minProperties"]) - 1})
        if s.get("maxProperties") is not None:
            out.append({"type": "object", "minProperties": int(s["maxProperties"]) + 1})
        for key in ("dependentRequired", "dependentSchemas", "dependencies"):
            for trigger, dependent in (s.get(key) or {}).items():
                if not self._may_have(trigger):
                    continue
                if isinstance(dependent, list):  # trigger present, some listed name absent
                    out += [
                        {"type": "object", "required": [trigger], "properties": {name: False}}
                        for name in dependent
                        if name != trigger
                    ]
                elif not is_trivial(dependent):  # trigger present, the object not valid
                    out.append({"type": "object", "required": [trigger], "not": dependent})
        return out

    def _array(self, s: dict, pointer: str) -> list[Any]:
        """Arrays invalid against the array keywords of ``s`` (one disjunct per way)."""
        out: list[Any] = []
        items = s.get("items", True)
        if isinstance(items, list):
            prefix, tail, tail_key = items, s.get("additionalItems", True), "additionalItems"
        else:
            prefix, tail, tail_key = s.get("prefixItems", []), items, "items"
        for i, sub in enumerate(prefix):
            if is_trivial(sub):
                continue
            out.append(self._bad_item(i, sub))
        if not is_trivial(tail):
            if prefix:
                raise Refused(
                    f"'not' of {tail_key} after prefix items (an item past the prefix against it)",
                    pointer,
                    tail_key,
                )
            if tail is False:
                out.append({"type": "array", "minItems": 1})
            else:
                out.append({"type": "array", "contains": {"not": tail}})
        if int(s.get("minItems", 0)) > 0:
            out.append({"type": "array", "maxItems": int(s["minItems"]) - 1})
        if s.get("maxItems") is not None:
            out.append({"type": "array", "minItems": int(s["maxItems"]) + 1})
        if s.get("uniqueItems") is True:
            raise Refused(
                "'not' of uniqueItems (an array with a repeated item)", pointer, "uniqueItems"
            )
        if "contains" in s:
            least = int(s.get("minContains", 1))
            if "maxContains" in s or least > 1:
                raise Refused(
                    "'not' of minContains/maxContains",
                    pointer,
                    "maxContains" if "maxContains" in s else "minContains",
                )
            if least == 1:
                if self.rest_prefix:
                    raise Refused(
                        "'not' of contains where prefix items are declared", pointer, "contains"
                    )
                out.append({"type": "array", "items": {"not": s["contains"]}})
        return out

    def _not_equal(self, value: Any) -> list[Any]:
        """Objects or arrays (of ``value``'s type) that differ from ``value``.

        An object differs iff a key of ``value`` is absent, or present with another value,
        or it has another key: with keys ``K`` all present that is ``|keys| > |K|``, or,
        where ``rest`` allows only its declared names, one of those outside ``K`` present.
        An array differs iff its length or one of its items differs.
        """
        out: list[Any] = []
        if isinstance(value, dict):
            for name, member in value.items():
                out.append({"type": "object", "properties": {name: False}})
                if self._may_have(name):
                    out.append(_present(name, {"const": member}))
            if self.rest_has_extras:
                out.append({"type": "object", "minProperties": len(value) + 1})
            else:
                out += [
                    {"type": "object", "required": [name]}
                    for name in self.rest_names
                    if name not in value
                ]
            return out
        if value:
            out.append({"type": "array", "maxItems": len(value) - 1})
        out.append({"type": "array", "minItems": len(value) + 1})
        out += [self._bad_item(i, {"const": item}) for i, item in enumerate(value)]
        return out

    def _bad_item(self, index: int, item: Any) -> dict:
        """Arrays whose item ``index`` exists and is not valid against ``item``, written in
        ``rest``'s array spelling; a position past ``rest``'s own prefix keeps ``rest``'s
        rest-items schema (merging the two prefix lists would otherwise drop it)."""
        entries: list[Any] = [True] * index + [{"not": item} if item is not False else True]
        for j in range(len(self.rest_prefix), len(entries)):
            entries[j] = {"allOf": [self.rest_tail, entries[j]]}
        key = "items" if self.rest_is_list_form else "prefixItems"
        return {"type": "array", "minItems": index + 1, key: entries}


def _key(schema: Any) -> str:
    """A text equal for equal disjuncts (to drop repeats)."""
    return json.dumps(schema, sort_keys=True, default=repr)


def _types_meet(parts: Iterator[Any] | Any) -> bool:
    """False if the top-level ``type`` keywords of ``parts`` share no structured type."""
    common = set(_STRUCTURED)
    for part in parts:
        declared = part.get("type") if isinstance(part, dict) else None
        if declared is not None:
            common &= {declared} if isinstance(declared, str) else set(declared)
    return bool(common)


def _present(name: str, schema: Any) -> dict:
    """Objects with property ``name`` whose value is not valid against ``schema``."""
    if schema is False:
        return {"type": "object", "required": [name]}
    return {"type": "object", "required": [name], "properties": {name: {"not": schema}}}


# ---- the compiler entries -------------------------------------------------------------------


@contextmanager
def spec_semantics(c: SchemaCompiler) -> Iterator[None]:
    """Compile with an absent ``additionalProperties`` meaning ``true`` (the specification):
    the languages that get complemented (module docstring). Their arrays are never written,
    and a ``uniqueItems`` among them cannot be left to the matcher (see unique_plan)."""
    saved = c.strict
    c.strict = False
    plan = c.unique_plan
    if plan is not None:
        plan.num_negations += 1
    try:
        yield
    finally:
        c.strict = saved
        if plan is not None:
            plan.num_negations -= 1


def _check_regular(node: Node, pointer: str) -> None:
    """Refuse a tree that is not one plain regular language (rule references, markers)."""
    for item in subtrees(node):
        if isinstance(item, Reference) or (
            isinstance(item, CharSet) and any(lo <= 0x02 and hi >= 0x01 for lo, hi in item.ranges)
        ):
            raise Refused(
                "the negated subschema is not a regular language here (it holds a rule "
                "reference or an unbounded value)",
                pointer,
                "not",
            )


def _scalar_part(
    c: SchemaCompiler, rest: dict, neg: Any, t: str, ptr: str, neg_ptr: str
) -> Node | None:
    """The values of scalar type ``t`` valid against ``rest`` and not against ``neg``."""
    typed = {"type": t}
    if t == "string":
        return _string_part(c, rest, neg, ptr, neg_ptr)
    with spec_semantics(c):
        removed = c.compile_exact({"allOf": [neg, typed]}, neg_ptr)
    if removed is None:
        return c.compile({"allOf": [rest, typed]}, ptr)
    kept = c.compile_exact({"allOf": [rest, typed]}, ptr)
    if t in ("null", "boolean"):
        texts = ["null"] if t == "null" else ["true", "false"]
        return alt(
            literal(text)
            for text in texts
            if c.fullmatch(kept, text) and not c.fullmatch(removed, text)
        )
    if kept is None:
        return None
    _check_regular(kept, ptr)
    _check_regular(removed, neg_ptr)
    return _automata("number", ptr, lambda: number_difference(kept, removed))


def _automata(what: str, ptr: str, build: Callable[[], Any]) -> Any:
    """``build()``, its automaton budget errors (and automaton refusals) as :class:`Refused`."""
    try:
        return build()
    except SchemaError:
        raise
    except (GrammarError, KeyLanguageTooLarge) as exc:  # CompileBudgetError is a GrammarError
        raise Refused(
            f"the complement of the {what} values is over budget ({exc})", ptr, "not"
        ) from exc


_LENGTHS = ("minLength", "maxLength")


def _only_string_branch(c: SchemaCompiler, target: Any, pointer: str) -> tuple[Any, str]:
    """``target`` as far as strings go: an ``anyOf`` / ``oneOf`` (beside at most a ``type``
    that allows strings) whose branches but one reject every string is that branch, for
    strings (a string is valid against the union, or against exactly one branch, iff against
    that branch), repeatedly; an ``anyOf`` of length ranges that overlap is one range (not a
    ``oneOf``: a string valid against two branches fails it). So its length bounds split it
    as :func:`_string_part` says (``oneOf: [number, {maxLength: 64}]`` written as one text
    automaton nests 64 deep)."""
    while isinstance(target, dict):
        target_before = target
        keys = set(target) & VALIDATION_KEYWORDS
        union = keys & {"anyOf", "oneOf"}
        if len(union) != 1 or keys - union - {"type"} or "string" not in _types_of(target):
            break
        key = union.pop()
        admitting = []
        for i, branch in enumerate(target[key]):
            found = c._resolve(branch, f"{pointer}/{key}/{i}")
            if found is True or (isinstance(found, dict) and "string" in _types_of(found)):
                admitting.append((found, f"{pointer}/{key}/{i}"))
            elif found is not False and not isinstance(found, dict):
                return target, pointer
        if len(admitting) > 1 and key == "anyOf":  # overlapping length ranges: one range
            reduced = [_only_string_branch(c, found, at)[0] for found, at in admitting]
            target = _one_length_range(reduced)
            return (target, pointer) if target is not None else (target_before, pointer)
        if len(admitting) != 1:  # (oneOf: a string valid against two is not valid)
            break
        target, pointer = admitting[0]
    return target, pointer


def _one_length_range(branches: list[Any]) -> dict | None:
    """The union of ``branches`` as one ``{"type": "string", minLength, maxLength}`` for
    strings, where each only bounds a string's length and the ranges overlap or touch."""
    ranges = []
    for branch in branches:
        if branch is True:
            ranges.append((0, None))
            continue
        if set(branch) & VALIDATION_KEYWORDS - {"type", *_LENGTHS}:
            return None
        ranges.append((int(branch.get("minLength", 0)), branch.get("maxLength")))
    ranges.sort(key=lambda r: r[0])
    shortest, longest = ranges[0]
    for lo, hi in ranges[1:]:
        if longest is not None and lo > int(longest) + 1:
            return None  # a gap
        longest = None if longest is None or hi is None else max(int(longest), int(hi))
    out: dict[str, Any] = {"type": "string", "minLength": shortest}
    if longest is not None:
        out["maxLength"] = int(longest)
    return out


def _string_part(c: SchemaCompiler, rest: dict, neg: Any, ptr: str, neg_ptr: str) -> Node | None:
    """The strings valid against ``rest`` and not against ``neg``.

    Length bounds are kept out of the automata (a bound ``n`` is ``n`` states in a chain,
    whose tree nests ``n`` deep): ``neg``'s own bounds ``Len`` split it, as
    ``not (Len and P) = not Len or not P`` (``not Len`` is a plain length range), and
    ``rest``'s bounds become a length lookahead around the text difference of the rest,
    ``"(?=CHAR{m,n}")(R - P)`` (as ``compiler._guarded_string`` writes a pattern with bounds).
    """
    typed = {"type": "string"}
    parts: list[Node | None] = []
    target, neg_ptr = _only_string_branch(c, c._resolve(neg, neg_ptr), neg_ptr)
    if isinstance(target, dict) and any(k in target for k in _LENGTHS):
        shortest, longest = int(target.get("minLength", 0)), target.get("maxLength")
        if shortest > 0:
            parts.append(c.compile({"allOf": [rest, typed, {"maxLength": shortest - 1}]}, ptr))
        if longest is not None:
            parts.append(c.compile({"allOf": [rest, typed, {"minLength": int(longest) + 1}]}, ptr))
        neg = {k: v for k, v in target.items() if k not in _LENGTHS}
    with spec_semantics(c):
        removed = c.compile_exact({"allOf": [neg, typed]}, neg_ptr)
    if removed is None:
        return alt([*parts, c.compile({"allOf": [rest, typed]}, ptr)])
    shortest = int(rest.get("minLength", 0))
    longest = None if rest.get("maxLength") is None else int(rest["maxLength"])
    if longest is not None and longest < shortest:
        return alt(parts)
    unbounded = {k: v for k, v in rest.items() if k not in _LENGTHS}
    kept = c.compile_exact({"allOf": [unbounded, typed]}, ptr)
    if kept is None:
        return alt(parts)
    _check_regular(kept, ptr)
    _check_regular(removed, neg_ptr)
    if not _automata("string", ptr, lambda: texts_meet(kept, removed)):
        return alt([*parts, c.compile({"allOf": [rest, typed]}, ptr)])  # nothing removed
    if shortest == 0 and longest is None:
        return alt(
            [
                *parts,
                _automata(
                    "string",
                    ptr,
                    lambda: text_difference(kept, removed, allow_automaton=c.allow_automata),
                ),
            ]
        )
    body = _automata(
        "string",
        ptr,
        lambda: text_difference(kept, removed, prefix='"', allow_automaton=c.allow_automata),
    )
    if body is None:
        return alt(parts)
    guard = Lookahead(seq(Repeat(JSON_CHAR, shortest, longest, -1), literal('"')), -1)
    guarded = seq(literal('"'), group(guard, body))
    # the product of the body with the length counter, built once here to bound it
    if _automata("string", ptr, lambda: byte_dfa(guarded)) is None:
        return alt(parts)  # no string of the difference has an allowed length
    return alt([*parts, guarded])


def compile_not(c: SchemaCompiler, rest: dict, neg: Any, ptr: str) -> Node | None:
    """The tree of ``{...rest, "not": neg}`` (``rest`` merged, without combinators).

    Parameters
    ----------
    c : SchemaCompiler
        The compiler (its layout, depth, strictness and refusals apply).
    rest : dict
        The schema's other keywords.
    neg : Any
        The ``not`` subschema (``$ref``s allowed).
    ptr : str
        The JSON pointer of the schema holding ``not``.

    Returns
    -------
    Node | None
        The exact language (``None``: empty). Under ``lenient``, a refused complement is
        dropped (``rest`` alone: a superset).

    Raises
    ------
    SchemaError
        A refusal (see the module docstring), with the pointer and keyword it concerns.
    """
    depth = _NESTED_NOTS.get()
    token = _NESTED_NOTS.set(depth + 1)
    try:
        if depth >= MAX_NESTED_NOTS:
            raise Refused(
                f"complements nested over {MAX_NESTED_NOTS} levels (a recursive $ref under "
                "'not' is not a regular language)",
                ptr,
                "not",
            )
        return _complement(c, rest, neg, ptr)
    except Refused as exc:
        c.refuse(exc.message, exc.pointer, exc.keyword)
        return c.compile(rest, ptr)
    finally:
        _NESTED_NOTS.reset(token)


def _complement(c: SchemaCompiler, rest: dict, neg: Any, ptr: str) -> Node | None:
    neg_ptr = ptr + "/not"
    types = _types_of(rest)
    parts: list[Node | None] = []
    for t in ("null", "boolean", "string", "number"):
        if t in types or (t == "number" and "integer" in types):
            parts.append(_scalar_part(c, rest, neg, t, ptr, neg_ptr))
    structured = [t for t in _STRUCTURED if t in types]
    if structured:
        # one member order for every disjunct: rest's (its required-only names included),
        # then, where rest allows other keys, the names of the negated schema; a disjunct
        # declares the names it constrains, so they are laid out after these
        negation = StructuredNegation(c, rest)
        names = property_order(rest, c.root)
        if negation.rest_has_extras:  # then the negated schema's names, in its order
            names += property_order(c._resolve(neg, neg_ptr), c.root)
        negation.lay_out(names)
        order = {"properties": dict.fromkeys(names, True)}
        rest_structured = {**rest, "type": structured}
        for disjunct in negation.disjuncts(neg, neg_ptr):
            parts.append(c.compile({"allOf": [rest_structured, order, disjunct]}, ptr))
    return alt(parts)


def exclusive_branch(branch: Any, others: list[Any]) -> Any:
    """``oneOf`` branch ``branch`` valid while every branch of ``others`` is not."""
    if not others:
        return branch
    negated = others[0] if len(others) == 1 else {"anyOf": others}
    return {"allOf": [branch, {"not": negated}]}


def conditional(schema: dict, draft: str) -> dict:
    """``schema`` with ``if``/``then``/``else`` written as ``(if and then) or (not if and else)``
    (``then or not if`` without ``else``, ``if or else`` without ``then``).

    Parameters
    ----------
    schema : dict
        A schema holding ``if`` and/or ``then``/``else``.
    draft : str
        The root's draft: before draft 7 the three are unknown keywords (ignored).

    Returns
    -------
    dict
        The schema without the three keywords, their meaning added as an ``allOf`` part
        (a missing ``then``/``else`` is ``true``; ``if`` alone, or ``then``/``else`` without
        ``if``, mean nothing).
    """
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    if "if" not in schema or draft in ("draft4", "draft6"):
        return rest
    condition = schema["if"]
    then, otherwise = schema.get("then", True), schema.get("else", True)
    if is_trivial(then) and is_trivial(otherwise):
        return rest
    if condition is True or is_trivial(condition):
        part = then
    elif condition is False:
        part = otherwise
    elif is_trivial(otherwise):
        # (if and then) or not if == then or not if: one intersection fewer, and the
        # branches keep the schemas' own keywords (then's arrays are not cut by if's)
        part = {"anyOf": [then, {"not": condition}]}
    elif is_trivial(then):
        part = {"anyOf": [condition, otherwise]}  # if or (not if and else) == if or else
    else:
        part = {
            "anyOf": [
                {"allOf": [condition, then]},
                {"allOf": [{"not": condition}, otherwise]},
            ]
        }
    return {**rest, "allOf": [*rest.get("allOf", []), part]}


def _clear_differences() -> None:
    texts_meet.cache_clear()
    text_difference.cache_clear()
    number_difference.cache_clear()


caches.register(
    "json_schema.complements",
    "LRU: 256 text meets, 256 text and 256 number differences",
    _clear_differences,
)
