"""Exact digit automata (as syntax trees) for JSON integers and decimals in a range.

Integers are written as JSON integer literals ``-?(0|[1-9][0-9]*)`` (no fraction or exponent;
``-0`` is accepted and equals 0). Unbounded ``number`` uses the full JSON number grammar; a
``number`` with bounds or ``multipleOf`` is written without exponent, ``-?I(.F)?``, because
"value >= bound" over exponent notation is not a regular language. Values are compared as
exact decimals; a float bound from the schema is read through its shortest ``repr``.

``multipleOf`` (any positive rational, any bounds): :func:`int_multiple` and
:func:`decimal_multiple` take the small closed forms where they exist (``m = 1`` or ``10^-k``:
a range; few multiples: a trie; ``m | 1000``: a residue suffix) and otherwise a general
construction: the residue automaton of :mod:`~formcast.grammar.json_schema.residues` (a DFA
node, for grammars) or, where a regex text is wanted (``json_schema_to_regex``), the tree of
:mod:`~formcast.grammar.json_schema.multiples` (``MultipleTooLarge``, a ``ValueError``, over
their budgets).
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

from formcast.grammar import caches
from formcast.grammar.json_schema.multiples import MultipleTooLarge as MultipleTooLarge
from formcast.grammar.json_schema.multiples import multiples_tree, scaled_form
from formcast.grammar.json_schema.residues import multiples_automaton
from formcast.grammar.regex.combinators import (
    alt,
    char_range,
    literal,
    opt,
    repeat,
    seq,
    star,
    trie_alt,
)
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Node

INTEGER: Node = parse_regex(r"-?(?:0|[1-9][0-9]*)")
NUMBER: Node = parse_regex(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
DIGIT = char_range("0", "9")
NONZERO_DIGIT = char_range("1", "9")
_ZEROS = star(literal("0"))
_ZEROS_PLUS = repeat(literal("0"), 1, None)
MAX_ENUMERATED_MULTIPLES = 256


def _digit_class(lo: int, hi: int) -> Node:
    return char_range(str(lo), str(hi))


def _same_length_range(a: str, b: str) -> list[Node]:
    """Trees for all digit strings s with len(s)==len(a)==len(b) and a <= s <= b."""
    if not a:
        return [literal("")]
    if a[0] == b[0]:
        return [seq(literal(a[0]), r) for r in _same_length_range(a[1:], b[1:])]
    n = len(a) - 1
    out = []
    lo_rest_all0 = a[1:] == "0" * n
    hi_rest_all9 = b[1:] == "9" * n
    first_lo = int(a[0]) + (0 if lo_rest_all0 else 1)
    last_hi = int(b[0]) - (0 if hi_rest_all9 else 1)
    if not lo_rest_all0:
        out += [seq(literal(a[0]), r) for r in _same_length_range(a[1:], "9" * n)]
    if first_lo <= last_hi:
        out.append(seq(_digit_class(first_lo, last_hi), repeat(DIGIT, n, n)))
    if not hi_rest_all9:
        out += [seq(literal(b[0]), r) for r in _same_length_range("0" * n, b[1:])]
    return out


@functools.lru_cache(maxsize=1024)  # pure; the same bounds recur across a schema and schemas
def nonneg_int_range(lo: int, hi: int | None) -> Node | None:
    """Canonical decimal literals (no leading zeros) of the integers in [lo, hi], lo >= 0."""
    if hi is not None and hi < lo:
        return None
    branches: list[Node] = []
    if lo == 0:
        branches.append(literal("0"))
        lo = 1
    if hi is not None and hi < lo:
        return alt(branches)
    top_len = None if hi is None else len(str(hi))
    length = len(str(lo))
    while top_len is None or length <= top_len:
        a = str(lo) if length == len(str(lo)) else "1" + "0" * (length - 1)
        if top_len is not None and length == top_len:
            branches += _same_length_range(a, str(hi))
            break
        if a == "1" + "0" * (length - 1) and top_len is None:
            branches.append(seq(NONZERO_DIGIT, repeat(DIGIT, length - 1, None)))
            break
        branches += _same_length_range(a, "9" * length)
        length += 1
    return alt(branches)


def int_range(lo: int | None, hi: int | None) -> Node | None:
    """JSON integer literals with value in [lo, hi] (None = unbounded)."""
    if lo is not None and hi is not None and hi < lo:
        return None
    neg = None
    if lo is None or lo < 0:
        mag_hi = None if lo is None else -lo
        mag_lo = 1 if hi is None or hi >= 0 else -hi
        neg = seq(literal("-"), nonneg_int_range(mag_lo, mag_hi))
    pos = None
    if hi is None or hi >= 0:
        pos = nonneg_int_range(max(lo or 0, 0), hi)
        if pos is not None and (lo is None or lo <= 0):
            neg = alt([neg, literal("-0")])
    return alt([neg, pos])


def int_bounds(schema_bounds: tuple) -> tuple[int | None, int | None]:
    """Integer [lo, hi] from (minimum, exclusiveMinimum, maximum, exclusiveMaximum) values."""
    lo_incl, lo_excl, hi_incl, hi_excl = (
        None if v is None else to_fraction(v) for v in schema_bounds
    )
    lo = hi = None
    if lo_incl is not None:
        lo = -((-lo_incl.numerator) // lo_incl.denominator)  # ceil
    if lo_excl is not None:
        v = lo_excl.numerator // lo_excl.denominator + 1  # smallest integer > x
        lo = v if lo is None else max(lo, v)
    if hi_incl is not None:
        hi = hi_incl.numerator // hi_incl.denominator  # floor
    if hi_excl is not None:
        v = -((-hi_excl.numerator) // hi_excl.denominator) - 1  # largest integer < x
        hi = v if hi is None else min(hi, v)
    return lo, hi


# a value whose text without exponent has more characters is written only as json.dumps does
MAX_SPELLING_CHARS = 48


def value_spellings(values: list[int | float], *, is_integer_only: bool = False) -> Node | None:
    """The JSON texts formcast accepts for the numbers ``values`` (an ``enum`` or ``const``).

    JSON Schema compares numbers by value (``2`` equals ``2.0``), so each value is written as
    ``json.dumps`` writes it *or* as any text without exponent equal to it: ``2``, ``2.0``,
    ``2.00`` for 2; ``2.5``, ``2.50`` for 2.5; ``0``, ``-0``, ``0.0`` for zero. Exponent
    spellings other than ``json.dumps``'s (``2e0``) are not written, as in the ranges above.
    ``is_integer_only`` (the schema's types hold ``integer`` but not ``number``): integer
    literals, no fraction (the integer layout), besides ``json.dumps``'s text. A value whose
    text without exponent is over ``MAX_SPELLING_CHARS`` long (``1e300``) keeps only that text.
    """
    integral: set[str] = set()  # texts of integral values, "-"? digits
    fractional: set[str] = set()  # "-"? digits "." digits, no trailing zero
    others: set[str] = set()  # json.dumps texts the two sets above do not spell
    for value in values:
        canonical = repr(value) if isinstance(value, float) else str(value)
        plain = format(Decimal(canonical), "f")
        if "." in plain:
            plain = plain.rstrip("0").rstrip(".")
        if plain in ("0", "-0"):
            integral.update(("0", "-0"))
        elif len(plain) <= MAX_SPELLING_CHARS:
            (fractional if "." in plain else integral).add(plain)
        is_spelled = len(plain) <= MAX_SPELLING_CHARS and "e" not in canonical.lower()
        if not is_spelled or (is_integer_only and "." in canonical):
            others.add(canonical)
    integers = trie_alt(integral)
    if not is_integer_only and integers is not None:
        integers = seq(integers, opt(seq(literal("."), _ZEROS_PLUS)))
    decimals = None
    if fractional and not is_integer_only:
        decimals = seq(trie_alt(fractional), _ZEROS)
    return alt([integers, decimals, trie_alt(others)])


def to_fraction(value: float | int) -> Fraction:
    """Exact value of a schema number (floats through their shortest decimal repr)."""
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def int_multiple(
    m: int, lo: int | None, hi: int | None, *, as_automaton: bool = False
) -> Node | None:
    """JSON integer literals of the multiples of ``m`` in ``[lo, hi]`` (``None``: unbounded).

    Parameters
    ----------
    m : int
        The divisor, >= 1 (for ``type: integer`` and ``multipleOf: p/q``, ``p``).
    lo, hi : int | None
        Inclusive bounds.
    as_automaton : bool
        Where no closed form applies, build the residue automaton
        (:mod:`~formcast.grammar.json_schema.residues`: any ``m``, any bounds) instead of
        the tree of :mod:`~formcast.grammar.json_schema.multiples` (a regex text, which
        grows exponentially with the odd part of ``m``).

    Returns
    -------
    Node | None
        The exact tree (``-0`` included when 0 is in range); ``None`` when empty.

    Raises
    ------
    MultipleTooLarge
        The general construction is over its budget (see ``multiples``).
    """
    if m == 1:
        return int_range(lo, hi)
    if lo is not None and hi is not None and (hi - lo) // m <= MAX_ENUMERATED_MULTIPLES:
        first = -((-lo) // m) * m
        values = range(first, hi + 1, m)
        return alt([trie_alt(str(v) for v in values), literal("-0") if 0 in values else None])
    k = next((k for k in range(1, 4) if 10**k % m == 0), None)
    if k is None and as_automaton:
        return multiples_automaton(int_range(lo, hi), m, 0, f"multipleOf {m}")
    if k is None:
        lo_fraction = None if lo is None else Fraction(lo)
        hi_fraction = None if hi is None else Fraction(hi)
        return multiples_tree(Fraction(m), lo_fraction, False, hi_fraction, False, is_number=False)
    neg = pos = None
    if hi is None or hi >= 0:
        pos = _nonneg_multiple(m, k, max(lo or 0, 0), hi)
    if lo is None or lo < 0:
        mag_lo = 1 if hi is None or hi >= 0 else -hi
        neg = seq(literal("-"), _nonneg_multiple(m, k, mag_lo, None if lo is None else -lo))
    zero_ok = (lo is None or lo <= 0) and (hi is None or hi >= 0)
    return alt([neg, literal("-0") if zero_ok else None, pos])


def decimal_multiple(
    m: Fraction,
    lo: Fraction | None,
    lo_strict: bool,
    hi: Fraction | None,
    hi_strict: bool,
    *,
    as_automaton: bool = False,
) -> Node | None:
    """Numbers ``-?I(\\.F)?`` (no exponent) that are multiples of ``m`` in the given range.

    Parameters
    ----------
    m : Fraction
        ``multipleOf``, > 0 (any rational; its multiples that are finite decimals).
    lo, hi : Fraction | None
        Bounds (``None``: unbounded); ``lo_strict`` / ``hi_strict`` make them exclusive.
    as_automaton : bool
        As in :func:`int_multiple`.

    Returns
    -------
    Node | None
        The exact tree; ``None`` when empty.

    Raises
    ------
    MultipleTooLarge
        The general construction is over its budget (see ``multiples`` / ``residues``).
    ValueError
        For ``m = 10^-k``: a bound that ``decimal_range`` cannot write (see there).
    """
    big_p, num_fraction_digits = scaled_form(m, is_number=True)
    if big_p == 1:  # m = 10^-k: fraction digits past k are zeros
        return decimal_range(lo, lo_strict, hi, hi_strict, num_fraction_digits)
    if num_fraction_digits == 0:  # integral multiples: the integer texts, then ".0", ".00", ...
        int_lo = int_hi = None
        if lo is not None:  # the least integer > lo (strict) or >= lo
            int_lo = math.floor(lo) + 1 if lo_strict else math.ceil(lo)
        if hi is not None:  # the greatest integer < hi (strict) or <= hi
            int_hi = math.ceil(hi) - 1 if hi_strict else math.floor(hi)
        ints = int_multiple(big_p, int_lo, int_hi, as_automaton=as_automaton)
        return None if ints is None else seq(ints, opt(seq(literal("."), _ZEROS_PLUS)))
    if as_automaton:
        span = decimal_range(lo, lo_strict, hi, hi_strict)
        return multiples_automaton(span, big_p, num_fraction_digits, f"multipleOf {float(m)}")
    return multiples_tree(m, lo, lo_strict, hi, hi_strict, is_number=True)


def _nonneg_multiple(m: int, k: int, lo: int, hi: int | None) -> Node | None:
    """x = q*10^k + r with r in residues: split into short (x < 10^k) and long forms."""
    base = 10**k
    short = [str(x) for x in range(lo, base if hi is None else min(hi + 1, base)) if x % m == 0]
    residues = [r for r in range(0, base, m)]
    groups: dict[tuple, list[str]] = {}
    for r in residues:
        q_lo = max(1, -((r - lo) // base))  # ceil((lo - r) / base)
        q_hi = None if hi is None else (hi - r) // base
        if q_hi is not None and q_hi < q_lo:
            continue
        groups.setdefault((q_lo, q_hi), []).append(str(r).zfill(k))
    longs = [
        seq(nonneg_int_range(q_lo, q_hi), trie_alt(suffixes))
        for (q_lo, q_hi), suffixes in groups.items()
    ]
    return alt([trie_alt(short) if short else None, *longs])


# ---- decimals (number type with bounds): -?I(\.F)?, value compared exactly -------------------


def _frac_digits(x: Fraction) -> tuple[int, str] | None:
    """Integer part and fraction digits (no trailing zeros) of x >= 0, if finite decimal."""
    ip = x.numerator // x.denominator
    rest = x - ip
    digits = ""
    for _ in range(60):
        if rest == 0:
            return ip, digits
        rest *= 10
        d = rest.numerator // rest.denominator
        digits += str(d)
        rest -= d
    return None


def _any_digits(pos: int, max_frac: int | None) -> Node:
    """Digit strings (possibly empty) from fraction position ``pos`` on."""
    if max_frac is None:
        return star(DIGIT)
    free = max(0, max_frac - pos)
    return seq(repeat(DIGIT, 0, free), _ZEROS)  # type: ignore[arg-type]


def _frac_range(
    lf: str | None, lo_strict: bool, hf: str | None, hi_strict: bool, pos: int, max_frac: int | None
) -> tuple[Node | None, bool]:
    """Digit strings F with lf <(=) 0.F <(=) hf (padded comparison; None = no bound).

    Returns (tree of the nonempty such F, whether the empty F qualifies). Exact: each first
    digit either frees the rest (one class) or carries the bound digit into the recursion.
    """
    if lf is None and hf is None:
        top = 9 if max_frac is None or pos < max_frac else 0
        return seq(_digit_class(0, top), _any_digits(pos + 1, max_frac)), True
    if hf == "" and lf in ("", None):  # F <= 0 (or < 0): only all-zero digit strings
        ok = not hi_strict and not (lf == "" and lo_strict)
        return (repeat(literal("0"), 1, None) if ok else None), ok
    if lf == "" and hf is None:  # F >= 0 (or > 0)
        if not lo_strict:
            return _frac_range(None, False, None, False, pos, max_frac)
        return _nonzero_digits(pos, max_frac), False
    zero_lo_ok = lf is None or (lf == "" and not lo_strict)
    zero_hi_ok = hf is None or hf != "" or not hi_strict
    empty_ok = zero_lo_ok and zero_hi_ok
    top = 9 if max_frac is None or pos < max_frac else 0
    groups: dict[tuple, list[int]] = {}
    for d in range(top + 1):
        if lf is None:
            rl: str | None = None
        elif lf == "":
            rl = None if d > 0 else ""
        elif d > int(lf[0]):
            rl = None
        elif d == int(lf[0]):
            rl = lf[1:]
        else:
            continue
        if hf is None:
            ru: str | None = None
        elif hf == "":
            if d > 0:
                continue
            ru = ""
        elif d < int(hf[0]):
            ru = None
        elif d == int(hf[0]):
            ru = hf[1:]
        else:
            continue
        groups.setdefault((rl, ru), []).append(d)
    branches: list[Node | None] = []
    for (rl, ru), digits in groups.items():
        sub, sub_empty = _frac_range(rl, lo_strict, ru, hi_strict, pos + 1, max_frac)
        runs = _runs(digits)
        for lo, hi in runs:
            head = _digit_class(lo, hi)
            if sub is None:
                branches.append(head if sub_empty else None)
            else:
                branches.append(seq(head, opt(sub) if sub_empty else sub))
    return alt(branches), empty_ok


def _nonzero_digits(pos: int, max_frac: int | None) -> Node | None:
    """Digit strings with a nonzero digit (at a position below ``max_frac``, if given)."""
    if max_frac is None:
        return seq(_ZEROS, NONZERO_DIGIT, star(DIGIT))
    free = max_frac - pos
    if free <= 0:
        return None
    return alt(
        seq(literal("0" * i), NONZERO_DIGIT, _any_digits(pos + i + 1, max_frac))
        for i in range(free)
    )


def _runs(digits: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for d in digits:
        if out and d == out[-1][1] + 1:
            out[-1][1] = d
        else:
            out.append([d, d])
    return [(a, b) for a, b in out]


def _with_fraction(integer: Node | None, frac: tuple[Node | None, bool]) -> Node | None:
    digits, empty_ok = frac
    if integer is None:
        return None
    if digits is None:
        return integer if empty_ok else None
    fraction = seq(literal("."), digits)
    return seq(integer, opt(fraction) if empty_ok else fraction)


def nonneg_decimal_range(
    lo: Fraction, lo_strict: bool, hi: Fraction | None, hi_strict: bool, max_frac: int | None
) -> Node | None:
    """Texts ``I(\\.F)?`` (I canonical, F nonempty) with lo <(=) value <(=) hi, value >= 0.

    ``max_frac``: fraction digits beyond this position must be 0 (``multipleOf`` 10^-k).
    """
    lo_parts = _frac_digits(lo)
    hi_parts = None if hi is None else _frac_digits(hi)
    if lo_parts is None or (hi is not None and hi_parts is None):
        raise ValueError("bound is not a finite decimal")
    li, lf = lo_parts
    if hi is not None and (hi < lo or (hi == lo and (lo_strict or hi_strict))):
        return None
    if hi_parts is not None and hi_parts[0] == li:
        frac = _frac_range(lf, lo_strict, hi_parts[1], hi_strict, 0, max_frac)
        return _with_fraction(literal(str(li)), frac)
    branches = [
        _with_fraction(literal(str(li)), _frac_range(lf, lo_strict, None, False, 0, max_frac))
    ]
    mid_hi = None if hi_parts is None else hi_parts[0] - 1
    any_frac = _frac_range(None, False, None, False, 0, max_frac)
    branches.append(_with_fraction(nonneg_int_range(li + 1, mid_hi), any_frac))
    if hi_parts is not None:
        hf_range = _frac_range(None, False, hi_parts[1], hi_strict, 0, max_frac)
        branches.append(_with_fraction(literal(str(hi_parts[0])), hf_range))
    return alt(branches)


@functools.lru_cache(maxsize=1024)  # pure (Fractions hash by value): bounds recur in a schema
def decimal_range(
    lo: Fraction | None,
    lo_strict: bool,
    hi: Fraction | None,
    hi_strict: bool,
    max_frac: int | None = None,
) -> Node | None:
    """JSON numbers without exponent, ``-?I(\\.F)?``, with value in the given range."""
    branches: list[Node | None] = []
    if hi is None or hi > 0 or (hi == 0 and not hi_strict):
        p_lo, p_strict = (Fraction(0), False) if lo is None or lo < 0 else (lo, lo_strict)
        branches.append(nonneg_decimal_range(p_lo, p_strict, hi, hi_strict, max_frac))
    if lo is None or lo < 0 or (lo == 0 and not lo_strict):
        n_lo, n_strict = (Fraction(0), False) if hi is None or hi > 0 else (-hi, hi_strict)
        n_hi, nh_strict = (None, False) if lo is None else (-lo, lo_strict)
        branches.append(
            seq(literal("-"), nonneg_decimal_range(n_lo, n_strict, n_hi, nh_strict, max_frac))
        )
    return alt(branches)


caches.register("json_schema.int_ranges", "LRU: 1024 ranges", nonneg_int_range.cache_clear)
caches.register("json_schema.decimal_ranges", "LRU: 1024 ranges", decimal_range.cache_clear)
