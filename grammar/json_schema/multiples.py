"""Exact ``multipleOf``: the JSON texts of the multiples of a rational ``m`` in a range.

Texts are those of :mod:`~formcast.grammar.json_schema.number_ranges`: integers
``-?(0|[1-9][0-9]*)``; numbers (bounded or with ``multipleOf``) ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``
(no exponent, any trailing zeros in the fraction). ``-0`` forms are written when 0 is in range.

Math. Let ``m = p/q`` in lowest terms. An integer ``x`` is a multiple iff ``p | x``. A decimal
``x`` is a multiple iff ``x = k p/q``; a finite decimal needs the factors of ``q`` other than 2
and 5 to divide ``k``, so the multiples that are texts are those of ``p / q25`` (``q25``: the
2-and-5 part of ``q``), i.e. ``m = P / 10^s`` with ``P`` an integer. Then ``x`` is a multiple
iff ``M = x 10^s`` is an integer (fraction digits past ``s`` are zeros) and ``P | M``, and the
range on ``x`` is an integer range ``[A, B]`` on ``M``. Split ``P = c D`` with ``D = 2^a 5^b``
and ``gcd(c, 10) = 1``; with ``t = max(a, b, s)``, ``D | 10^t``. Writing ``M = u 10^t + v``
(``v`` the last ``t`` digits): ``P | M`` iff ``v = -u 10^t`` mod ``P``, which depends on ``u``
only through ``u mod c`` (``u 10^t = 0`` mod ``D``); and ``A <= M`` iff ``u > uA`` or
(``u = uA`` and ``v >= vA``), likewise for ``B``.

Construction. One generalised automaton (edges labelled by syntax trees) reads the text:
the prefix ``u`` (canonical digits) by a digit automaton tracking the range of ``u`` and
``u mod c`` (cyclic only for an unbounded ``u``, with ``c`` states), then, guessed
nondeterministically, the last ``t - s`` integer digits and the fraction by a *layered*
automaton whose state is ``(position, residue the rest still needs mod P, tight to vA?, tight
to vB?)``. Texts with ``u = 0`` enter the layered part after implicit leading zeros. State
elimination (least growth first) turns it into a tree.

Sizes and budgets. Layered parts eliminate into small trees (the 10-digit multiples of 1024:
~10^5 characters where a trie has ~10^7), but a regex for the cyclic residue core grows
exponentially with ``c``: one unbounded sign takes ~450 characters for ``c = 3``, ~3 * 10^4
for ``c = 7``, ~5 * 10^5 for ``c = 9``, over 10^6 from ``c = 11``; a bound of ``n`` digits
adds fixed-length residue languages of up to ``n`` digits. And the guessed suffix makes the
tree ambiguous, so its subset construction can outgrow it: for ``D = 2^a`` about 7 * 10^3
states at ``a = 7`` (one sign), 10^5 from ``a = 8``. Measured (both signs, ``-?I(.F)?``):
``c = 1`` (``0.5``, ``0.05``, ``2.5``, ``0.001``, ``625``): under 10^3 characters with any
bounds; ``c = 3`` (``3``, ``12``, ``1.5``): 10^3 to 10^4; ``c = 7`` (``7``, ``0.07``):
6 * 10^4 to 2.3 * 10^5, 0.3-1 s; ``c >= 9`` or ``2^a`` with ``a >= 8``: only bounded ranges
of about 10^6 values or less (``c = 97`` over ``[0, 10^6]``: 1.2 * 10^4). Over the budgets
(``MAX_MULTIPLE_CHARS`` per tree and per edge while eliminating, ``MAX_MULTIPLE_STATES``,
``MAX_ELIMINATION_EDGES`` / ``MAX_ELIMINATION_CHARS`` of work, ``MAX_NESTING`` levels,
``MAX_MULTIPLE_DFA_STATES`` subset states) :class:`MultipleTooLarge` is raised, in about a
second; the compiler reports it as a ``multipleOf`` refusal with its pointer.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction

from formcast.errors import CompileBudgetError
from formcast.grammar.automata.budget import check_deadline
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema.dfa_to_tree import MAX_NESTING
from formcast.grammar.regex.char_classes import normalize
from formcast.grammar.regex.combinators import alt, chars, literal, seq, star
from formcast.grammar.regex.syntax_tree import EMPTY, Alternation, Node, children

# bound on the tree of one multipleOf language and on every edge tree while it is built
# (``num_chars``); the regex route takes whole schemas up to ~1M characters
MAX_MULTIPLE_CHARS = 300_000
MAX_MULTIPLE_STATES = 20_000  # automaton states before elimination
# work bounds of the elimination (edges written, their total num_chars): a refusal comes in
# about a second (successful trees measured: <= 15,000 edges and 400,000 characters)
MAX_ELIMINATION_EDGES = 40_000
MAX_ELIMINATION_CHARS = 3_000_000
# trees over DFA_CHECK_CHARS are determinised once here, within MAX_MULTIPLE_DFA_STATES
# subset states (DFA_CHECK_S seconds is only a safety net: the state bound decides)
DFA_CHECK_CHARS = 2_000
MAX_MULTIPLE_DFA_STATES = 20_000
DFA_CHECK_S = 30.0
_DOT = ord(".")
_DIGITS = "0123456789"


class MultipleTooLarge(ValueError):
    """The exact tree of a ``multipleOf`` language is over its budget."""


def scaled_form(m: Fraction, is_number: bool) -> tuple[int, int]:
    """``(P, s)`` with the multiples of ``m`` among the texts = ``{M / 10^s : P | M}``.

    Parameters
    ----------
    m : Fraction
        The ``multipleOf`` value, > 0.
    is_number : bool
        Decimal texts (else integers only: ``P = m.numerator``, ``s = 0``).
    """
    if not is_number:
        return m.numerator, 0
    q25 = 1
    q = m.denominator
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
            q25 *= prime
    s = max(_valuation(q25, 2), _valuation(q25, 5))
    return m.numerator * 10**s // q25, s


def _valuation(n: int, prime: int) -> int:
    count = 0
    while n % prime == 0 and n:
        n //= prime
        count += 1
    return count


def multiples_tree(
    m: Fraction,
    lo: Fraction | None,
    lo_strict: bool,
    hi: Fraction | None,
    hi_strict: bool,
    *,
    is_number: bool,
    max_chars: int = MAX_MULTIPLE_CHARS,
) -> Node | None:
    """Texts of the multiples of ``m`` with ``lo <(=) value <(=) hi`` (``None``: unbounded).

    Parameters
    ----------
    m : Fraction
        ``multipleOf``, > 0.
    lo, hi : Fraction | None
        Bounds; ``lo_strict`` / ``hi_strict`` make them exclusive.
    is_number : bool
        Decimal texts ``-?I(\\.F)?`` (else JSON integer literals).
    max_chars : int
        Budget on the tree's ``num_chars``.

    Returns
    -------
    Node | None
        The tree, ``None`` for the empty language.

    Raises
    ------
    MultipleTooLarge
        The tree, an intermediate tree, its nesting or the automaton is over budget.
    """
    try:
        return _multiples_tree(m, lo, lo_strict, hi, hi_strict, is_number, max_chars)
    except MultipleTooLarge as exc:
        shown = str(m.numerator) if m.denominator == 1 else str(float(m))
        raise MultipleTooLarge(
            f"multipleOf {shown} over this range: the exact language is over budget: {exc}"
        ) from None


def _multiples_tree(
    m: Fraction,
    lo: Fraction | None,
    lo_strict: bool,
    hi: Fraction | None,
    hi_strict: bool,
    is_number: bool,
    max_chars: int,
) -> Node | None:
    big_p, s = scaled_form(m, is_number)
    scale = 10**s
    # M = x 10^s: the least integer M over lo 10^s, the greatest under hi 10^s
    low = (
        None if lo is None else (math.floor(lo * scale) + 1 if lo_strict else math.ceil(lo * scale))
    )
    high = (
        None if hi is None else (math.ceil(hi * scale) - 1 if hi_strict else math.floor(hi * scale))
    )
    # only multiples of P matter: round the bounds inward to multiples
    low = None if low is None else -((-low) // big_p) * big_p
    high = None if high is None else (high // big_p) * big_p
    if low is not None and high is not None and high < low:
        return None
    branches: list[Node | None] = []
    if high is None or high >= 0:
        side = _Side(big_p, s, is_number, max_chars, max(low or 0, 0), high)
        branches.append(side.tree())
    if low is None or low <= 0:  # "-0" forms too when 0 is in range (as int_range writes)
        mirrored_low = 0 if high is None else max(-high, 0)
        side = _Side(big_p, s, is_number, max_chars, mirrored_low, None if low is None else -low)
        branches.append(seq(literal("-"), side.tree()))
    tree = alt(branches)
    if tree is not None:
        if tree.num_chars > max_chars:
            raise MultipleTooLarge(f"tree of {tree.num_chars} characters (budget {max_chars})")
        if _depth(tree) > MAX_NESTING:
            raise MultipleTooLarge(f"tree nested over {MAX_NESTING} levels")
        if tree.num_chars > DFA_CHECK_CHARS:
            # the guessed suffix makes the tree's automaton nondeterministic; its subset
            # construction can outgrow the tree (powers of 2 from 2^8: ~10^5 states)
            try:
                regex_to_dfa(tree, max_states=MAX_MULTIPLE_DFA_STATES, timeout_s=DFA_CHECK_S)
            except CompileBudgetError as exc:
                raise MultipleTooLarge(f"its automaton is over budget ({exc})") from exc
    return tree


class _Side:
    """The automaton of the nonnegative texts of ``M`` in ``[low, high]`` with ``P | M``
    (module docstring), and its elimination into a tree.

    State keys: ``("u", length, cmp_lo, cmp_hi, residue)`` and ``("core", residue)`` read the
    prefix ``u`` (comparisons with the bounds of ``u`` as -1/0/1, ``residue = u mod c``);
    ``(kind, k, need, tight_lo, tight_hi)`` read the suffix: ``kind`` ``"i"`` (integer
    digits), ``"d"`` (just after ``.``) or ``"f"`` (fraction digits), ``k`` suffix digits of
    ``M`` read, ``need`` = what the rest of ``v`` must be mod P, ``tight_*`` = ``v`` so far
    equals that bound's digits.
    """

    def __init__(
        self, big_p: int, s: int, is_number: bool, max_chars: int, low: int, high: int | None
    ) -> None:
        self.big_p = big_p
        self.is_number = is_number
        d_part = math.gcd(big_p, 10 ** max(1, big_p.bit_length()))  # the 2^a 5^b factor
        self.c = big_p // d_part
        self.d_part = d_part
        self.t = t = max(_valuation(d_part, 2), _valuation(d_part, 5), s)
        self.h = t - s  # integer digits in the suffix
        self.pow10 = [10**i % big_p for i in range(t + 1)]
        self.low, self.high = low, high
        self.u_lo, v_lo = divmod(low, 10**t)
        self.v_lo = str(v_lo).zfill(t) if t else ""
        self.u_hi: int | None = None
        self.v_hi = "9" * t
        if high is not None:
            self.u_hi, v_hi = divmod(high, 10**t)
            self.v_hi = str(v_hi).zfill(t) if t else ""
        # u strictly between the bounds' prefixes (u >= 1): the prefix automaton's range
        self.mid_lo = max(self.u_lo + 1, 1)
        self.mid_hi = None if self.u_hi is None else self.u_hi - 1
        self.lo_text = str(self.mid_lo)
        self.hi_text = None if self.mid_hi is None else str(self.mid_hi)
        self.graph = _Graph(max_chars)
        self.source, self.sink = self.graph.add(), self.graph.add()
        self.ids: dict[tuple, int] = {}
        self.pending: list[tuple] = []

    def tree(self) -> Node | None:
        """The texts as a tree (``None``: empty)."""
        if self.high is not None and self.high < self.low:
            return None
        graph, source, u_lo, u_hi = self.graph, self.source, self.u_lo, self.u_hi
        if self.mid_hi is None or self.mid_hi >= self.mid_lo:
            start = (0, 0, 0, 0)  # (length, cmp to lo, cmp to hi, residue): nothing read
            self.connect_moves(source, [(d, self.prefix_step(start, d)) for d in range(1, 10)])
        # u at a bound: its digits literally, then the suffix tight to that bound
        tight_both = u_hi == u_lo
        if u_lo >= 1:
            entry = self.suffix_state("i", 0, self.entry_need(u_lo % self.c), True, tight_both)
            graph.connect(source, self.state(entry), literal(str(u_lo)))
        if u_hi is not None and u_hi >= 1 and not tight_both:
            entry = self.suffix_state("i", 0, self.entry_need(u_hi % self.c), False, True)
            graph.connect(source, self.state(entry), literal(str(u_hi)))
        if u_lo == 0:
            self.short_entries(tight_hi=tight_both)
        while self.pending:
            self.expand(self.pending.pop())
        return graph.eliminate(source, self.sink)

    def entry_need(self, u_residue: int) -> int:
        """What the suffix ``v`` must be mod P after a prefix ``u = u_residue`` (mod c):
        ``-u 10^t`` mod c and 0 mod D, joined by the Chinese remainder theorem."""
        if self.c == 1:
            return 0
        target = (-u_residue * pow(10, self.t, self.c)) % self.c
        return self.d_part * (target * pow(self.d_part, -1, self.c) % self.c) % self.big_p

    # ---- states -------------------------------------------------------------------------------

    def state(self, key: tuple) -> int:
        found = self.ids.get(key)
        if found is None:
            if len(self.ids) >= MAX_MULTIPLE_STATES:
                raise MultipleTooLarge(f"over {MAX_MULTIPLE_STATES} automaton states")
            found = self.ids[key] = self.graph.add()
            self.pending.append(key)
        return found

    def connect_moves(self, here: int, moves: list[tuple[int, tuple | None]]) -> None:
        """Edges for ``(digit, or a character code from 10 on, target key or None)`` moves,
        one edge per target."""
        by_target: dict[tuple, list[int]] = {}
        for symbol, target in moves:
            if target is not None:
                code = ord(_DIGITS[symbol]) if symbol < 10 else symbol
                by_target.setdefault(target, []).append(code)
        for target, codes in by_target.items():
            label = chars(normalize((code, code) for code in codes))
            if label is not None:
                self.graph.connect(here, self.state(target), label)

    def expand(self, key: tuple) -> None:
        """Out-edges of one state: its moves, the guess into the suffix, acceptance."""
        here = self.ids[key]
        if key[0] in ("u", "core"):
            self.connect_moves(here, [(d, self.prefix_step(key[1:], d)) for d in range(10)])
            if self.prefix_accepts(key):
                entry = ("i", 0, self.entry_need(key[-1]), False, False)
                self.graph.connect(here, self.state(entry), EMPTY)
            return
        self.connect_moves(here, self.suffix_moves(key))
        if self.suffix_accepts(key):
            self.graph.connect(here, self.sink, EMPTY)

    # ---- the prefix u: canonical digits in [lo_text, hi_text], residue mod c ----------------

    def prefix_step(self, state: tuple, digit: int) -> tuple | None:
        """``state`` = ``(length, cmp_lo, cmp_hi, residue)`` or ``(residue,)`` (core)."""
        c = self.c
        if len(state) == 1:
            return ("core", (10 * state[0] + digit) % c)
        length, cmp_lo, cmp_hi, residue = state
        lo_text, hi_text = self.lo_text, self.hi_text
        if hi_text is not None and length == len(hi_text):
            return None
        if length < len(lo_text) and cmp_lo == 0:
            cmp_lo = _compare(digit, int(lo_text[length]))
        if hi_text is not None and cmp_hi == 0:
            cmp_hi = _compare(digit, int(hi_text[length]))
        residue = (10 * residue + digit) % c
        length += 1
        if length > len(lo_text):  # longer than the lower bound: it holds
            if hi_text is None:
                return ("core", residue)
            cmp_lo = 1
        return ("u", length, cmp_lo, cmp_hi, residue)

    def prefix_accepts(self, key: tuple) -> bool:
        if key[0] == "core":
            return True
        _, length, cmp_lo, cmp_hi, _ = key
        lo_ok = length > len(self.lo_text) or (length == len(self.lo_text) and cmp_lo >= 0)
        hi_text = self.hi_text
        hi_ok = hi_text is None or length < len(hi_text) or cmp_hi <= 0
        return lo_ok and hi_ok

    # ---- the suffix: t - s integer digits, then the fraction ------------------------------

    def short_entries(self, tight_hi: bool) -> None:
        """``u = 0``: the integer part is the last ``h`` digits without leading zeros."""
        h = self.h
        for zeros in range(h + 1):  # implicit leading zeros of the h suffix integer digits
            state: tuple | None = self.suffix_state("i", 0, 0, True, tight_hi)
            for _ in range(zeros):
                state = None if state is None else self.suffix_digit(state, 0, "i")
            if state is None:
                continue
            if zeros == h:  # the integer part "0"
                self.graph.connect(self.source, self.state(state), literal("0"))
            else:  # a nonzero first digit
                moves = [(d, self.suffix_digit(state, d, "i")) for d in range(1, 10)]
                self.connect_moves(self.source, moves)

    def suffix_digit(self, state: tuple, digit: int, kind: str) -> tuple | None:
        """Read suffix digit ``digit`` at position ``state[1]``; ``None`` if out of range."""
        _, k, need, tight_lo, tight_hi = state
        if tight_lo:
            bound = int(self.v_lo[k])
            if digit < bound:
                return None
            tight_lo = digit == bound
        if tight_hi:
            bound = int(self.v_hi[k])
            if digit > bound:
                return None
            tight_hi = digit == bound
        k += 1
        need = (need - digit * self.pow10[self.t - k]) % self.big_p
        return self.suffix_state(kind, k, need, tight_lo, tight_hi)

    def suffix_state(self, kind: str, k: int, need: int, tight_lo: bool, tight_hi: bool) -> tuple:
        """The state key, a tight bound dropped where it always holds (its remaining digits
        all 0 for the low bound, all 9 for the high one)."""
        if tight_lo and not self.v_lo[k:].strip("0"):
            tight_lo = False
        if tight_hi and not self.v_hi[k:].strip("9"):
            tight_hi = False
        return (kind, k, need, tight_lo, tight_hi)

    def suffix_moves(self, key: tuple) -> list[tuple[int, tuple | None]]:
        """``(digit, or a character code from 10 on, target)`` moves of a suffix state."""
        kind, k, need, tight_lo, tight_hi = key
        t, h = self.t, self.h
        moves: list[tuple[int, tuple | None]] = []
        if kind == "i":
            if k < h:
                digit_kind = "i"
            else:
                if self.is_number:
                    moves.append((_DOT, ("d", k, need, tight_lo, tight_hi)))
                return moves
        else:
            digit_kind = "f"
        if k == t:  # past the s fraction digits (or after "." when s == 0): zeros only
            if kind != "i" and need == 0:
                moves.append((0, ("f", t, 0, False, False)))
            return moves
        moves += [(digit, self.suffix_digit(key, digit, digit_kind)) for digit in range(10)]
        return moves

    def suffix_accepts(self, key: tuple) -> bool:
        """The text may end here: the missing digits up to position t read as zeros."""
        kind, k, need, tight_lo, _ = key
        if kind == "d" or (kind == "i" and k < self.h):
            return False
        return need == 0 and not (tight_lo and self.v_lo[k:].strip("0"))


def _compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


class _Graph:
    """A generalised NFA: edges labelled by syntax trees, eliminated into one tree."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.out: list[dict[int, Node]] = []
        self.into: list[set[int]] = []
        self.num_edges_written = 0
        self.num_chars_written = 0

    def add(self) -> int:
        self.out.append({})
        self.into.append(set())
        return len(self.out) - 1

    def connect(self, p: int, q: int, label: Node) -> None:
        old = self.out[p].get(q)
        label = label if old is None else _union(old, label)
        if label.num_chars > self.max_chars:
            raise MultipleTooLarge(f"an intermediate tree is over {self.max_chars} characters")
        self.num_edges_written += 1
        self.num_chars_written += label.num_chars
        if self.num_edges_written > MAX_ELIMINATION_EDGES:
            raise MultipleTooLarge(f"state elimination wrote over {MAX_ELIMINATION_EDGES} edges")
        if self.num_chars_written > MAX_ELIMINATION_CHARS:
            raise MultipleTooLarge(
                f"state elimination wrote over {MAX_ELIMINATION_CHARS} characters of trees"
            )
        if self.num_edges_written % 1024 == 0:
            check_deadline("building a multipleOf tree")
        self.out[p][q] = label
        self.into[q].add(p)

    def eliminate(self, source: int, sink: int) -> Node | None:
        """The language from ``source`` to ``sink``: every other live state eliminated,
        least estimated growth first (Brzozowski-McCluskey, as in ``dfa_to_tree``)."""
        out, into = self.out, self.into
        live = self._reach(source, out) & self._reach(sink, into)
        if source not in live or sink not in live:
            return None
        for p in range(len(out)):
            if p not in live:
                for q in out[p]:
                    into[q].discard(p)
                out[p] = {}
            else:
                for q in [q for q in out[p] if q not in live]:
                    del out[p][q]
                    into[q].discard(p)

        def weight(v: int) -> int:
            ins = [p for p in into[v] if p != v]
            outs = [q for q in out[v] if q != v]
            loop = out[v].get(v)
            loop_chars = 0 if loop is None else loop.num_chars
            return (
                sum(out[p][v].num_chars for p in ins) * (len(outs) - 1)
                + sum(out[v][q].num_chars for q in outs) * (len(ins) - 1)
                + loop_chars * (len(ins) * len(outs) - 1)
            )

        remaining = live - {source, sink}
        heap = [(weight(v), v) for v in remaining]
        heapq.heapify(heap)
        while heap:
            w, v = heapq.heappop(heap)
            if v not in remaining or w != weight(v):
                continue
            remaining.discard(v)
            loop = out[v].pop(v, None)
            into[v].discard(v)
            loop_star = EMPTY if loop is None else star(loop)
            preds = list(into[v])
            succs = list(out[v].items())
            for p in preds:
                head = out[p].pop(v)
                for q, tail in succs:
                    self.connect(p, q, seq(head, loop_star, tail))
            for q, _ in succs:
                into[q].discard(v)
            out[v].clear()
            into[v].clear()
            for u in {*preds, *(q for q, _ in succs)} & remaining:
                heapq.heappush(heap, (weight(u), u))
        return out[source].get(sink)

    @staticmethod
    def _reach(start: int, edges: list) -> set[int]:
        seen = {start}
        stack = [start]
        while stack:
            for nxt in edges[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


def _union(old: Node, new: Node) -> Node:
    """``old | new``, options flattened, repeats (same object or equal tree) dropped."""
    kept = list(old.options) if isinstance(old, Alternation) else [old]
    for leaf in new.options if isinstance(new, Alternation) else (new,):
        if not any(k is leaf or (k.num_chars == leaf.num_chars and k == leaf) for k in kept):
            kept.append(leaf)
    return kept[0] if len(kept) == 1 else Alternation(tuple(kept))


def _depth(node: Node) -> int:
    """Levels of ``node`` (a leaf is 1), iteratively, each shared subtree once."""
    memo: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(node, False)]
    keep: list[Node] = []  # keeps measured nodes alive so that their ids stay theirs
    while stack:
        current, is_expanded = stack.pop()
        if id(current) in memo:
            continue
        subtree_list = children(current)
        if is_expanded or not subtree_list:
            memo[id(current)] = 1 + max((memo[id(c)] for c in subtree_list), default=0)
            keep.append(current)
            continue
        stack.append((current, True))
        stack.extend((c, False) for c in subtree_list if id(c) not in memo)
    return memo[id(node)]
