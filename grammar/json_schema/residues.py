"""``multipleOf`` as an automaton: the residue of the digits read, times the range's DFA.

Math. With ``m = P / 10^s`` (:func:`~formcast.grammar.json_schema.multiples.scaled_form`), a
text ``x`` without exponent is a multiple iff ``M = x 10^s`` is an integer and ``P | M``.
Reading the digits left to right, keep ``r`` = (the digits read, as an integer) mod ``P``:
``r <- (10 r + d) mod P``. With ``k <= s`` fraction digits read, ``M`` = (the digits)
``* 10^(s - k)``, so ``x`` is a multiple iff ``r 10^(s - k) = 0 (mod P)``; fraction digits
past the ``s``-th must be ``0`` (``M`` integral) and leave ``r`` as it is. The sign does not
change divisibility. So the residue automaton has the states ``(k, r)`` with ``k = -1`` (in
the integer part) or ``0..s``: ``P (s + 2)`` states, whatever the bounds; it reads digits,
``-`` and ``.`` and leaves the syntax (canonical digits, where ``-`` may stand, the range) to
the range's DFA. Their product, built breadth first over the reachable pairs and minimised,
is exactly the multiples in the range.

Why not a regex: the regex of the residues mod ``c`` grows exponentially with ``c``
(:mod:`~formcast.grammar.json_schema.multiples`, which builds the tree form for
:func:`~formcast.grammar.json_schema.compile.json_schema_to_regex`); the automaton has at most
``P (s + 2)`` states per range state. Bounded by ``MAX_PRODUCT_STATES`` pairs
(:class:`~formcast.grammar.json_schema.multiples.MultipleTooLarge` beyond).
"""

from __future__ import annotations

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.automata.budget import CompileBudget, check_deadline
from formcast.grammar.automata.byte_dfa import trim
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.multiples import MultipleTooLarge
from formcast.grammar.regex.syntax_tree import Automaton, Node

# pairs (range state, residue state) explored; about 1 s of Python at the bound
MAX_PRODUCT_STATES = 200_000
_TEXT_BYTES = b"-.0123456789"  # the bytes of number texts without exponent
_DASH, _DOT = 0, 1  # their columns in the product table; digit d is column 2 + d


def multiples_automaton(range_tree: Node | None, big_p: int, s: int, label: str) -> Node | None:
    """The texts of ``range_tree`` whose value ``x`` has ``P | x 10^s``, as an automaton node.

    Parameters
    ----------
    range_tree : Node | None
        The texts of the range (``-?I`` or ``-?I(.F)?``, no exponent); ``None``: empty.
    big_p, s : int
        ``multipleOf = P / 10^s`` in scaled form (``P >= 1``).
    label : str
        What the language is, for messages (``"multipleOf 97"``).

    Returns
    -------
    Node | None
        The :class:`~formcast.grammar.regex.syntax_tree.Automaton` (``range_tree`` itself
        when ``P = 1``); ``None`` when no text is left.

    Raises
    ------
    MultipleTooLarge
        Over ``MAX_PRODUCT_STATES`` reachable pairs.
    """
    if range_tree is None:
        return None
    if big_p == 1:
        return range_tree
    span = regex_to_dfa(range_tree)
    table, byte_class = span.transitions, span.byte_to_class
    # range moves per state on the text bytes: (N, 12)
    moves = table[:, byte_class[np.frombuffer(_TEXT_BYTES, dtype=np.uint8)]].tolist()
    range_accepts = span.is_accepting.tolist()
    # residue state code = (k + 1) P + r; code 0 = (k = -1, r = 0), the start
    pow10 = [pow(10, s - k, big_p) for k in range(s + 1)]

    def residue_step(code: int, column: int) -> int:
        k, r = divmod(code, big_p)
        k -= 1
        if column == _DASH:
            return code if code == 0 else -1  # a sign only before any digit
        if column == _DOT:
            return big_p + r if k == -1 else -1  # (0, r)
        digit = column - 2
        if k == -1:
            return (10 * r + digit) % big_p
        if k < s:
            return (k + 2) * big_p + (10 * r + digit) % big_p
        return code if digit == 0 else -1  # past the s-th fraction digit: zeros only

    def residue_accepts(code: int) -> bool:
        k, r = divmod(code, big_p)
        return r * pow10[max(k - 1, 0)] % big_p == 0

    ids: dict[tuple[int, int], int] = {(0, 0): 0}
    pairs: list[tuple[int, int]] = [(0, 0)]
    rows: list[list[int]] = []
    for here, (q, code) in enumerate(pairs):
        if here % 4096 == 4095:
            check_deadline(f"building the {label} automaton")
        row = [-1] * (len(_TEXT_BYTES) + 1)  # the last column: every other byte
        for column, q_next in enumerate(moves[q]):
            if q_next < 0:
                continue
            code_next = residue_step(code, column)
            if code_next < 0:
                continue
            key = (q_next, code_next)
            target = ids.get(key)
            if target is None:
                if len(pairs) >= MAX_PRODUCT_STATES:
                    raise MultipleTooLarge(
                        f"{label}: over {MAX_PRODUCT_STATES:,} automaton states with this range"
                    )
                target = ids[key] = len(pairs)
                pairs.append(key)
            row[column] = target
        rows.append(row)
    is_accepting = np.array([range_accepts[q] and residue_accepts(c) for q, c in pairs])
    byte_to_class = np.full(256, len(_TEXT_BYTES), dtype=np.uint8)
    byte_to_class[np.frombuffer(_TEXT_BYTES, dtype=np.uint8)] = np.arange(len(_TEXT_BYTES))
    try:
        dfa = trim(np.array(rows, dtype=np.int32), byte_to_class, is_accepting)
    except GrammarError:  # no multiple in the range
        return None
    dfa = minimize(dfa, CompileBudget())
    return Automaton.of(dfa.transitions, dfa.byte_to_class, dfa.is_accepting, label)
