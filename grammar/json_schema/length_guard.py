"""LengthGuard: a JSON string's pattern automaton with its length bounds counted at run time.

A string schema with ``pattern`` / ``format`` and ``minLength`` / ``maxLength`` is the
intersection of the pattern's language with a character counter. The compiler builds that
product as one automaton when it is small (``compiler._guarded_string``); past its budget
(``format: uri`` with ``maxLength: 2048``: ~174 pattern states x 2049 counts) the grammar keeps
the pattern alone and the matcher counts (``unique_items.JsonCursor``): it runs this automaton
over the string's text (quotes included), counts characters, and refuses a token that would
pass ``max_len``, close the string under ``min_len``, or leave the string where no completion
fits the bounds.

Math. Every state of the string-text automaton has one lexical mode (before the opening
quote, content, after ``\\``, inside ``\\uXXXX``, closed), found breadth first from the start; a
byte read in content starts a character unless it is a UTF-8 continuation byte or the closing
quote, so a transition's weight (0 or 1) is a function of (state, byte). A pending string with
``n`` characters in state ``s`` can complete within the bounds iff some completion adds
``k`` characters with ``lo = min_len - n <= k <= hi = max_len - n``. With ``shortest[s]`` /
``longest[s]`` the fewest / most characters of a completion (``longest`` infinite when a cycle
is reachable: every cycle of a string automaton holds a character) and ``every[s]`` a count
from which every larger one is achievable (through a state with a one-character self-loop:
the way there, any number of turns, the shortest way on), the answer is no if
``shortest > hi`` or ``longest < lo``, yes if ``shortest >= lo`` or ``longest <= hi`` or
``every <= hi``; otherwise (rare: no such loop within reach) a search over (state, count)
pairs decides.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from formcast.grammar.automata.byte_dfa import ByteDFA, scalar_rows
from formcast.grammar.index.token_index import LazyTransitions

if TYPE_CHECKING:
    from formcast.grammar.index.vocabulary import Vocabulary

INFINITE = 2**62

_OPEN, _CONTENT, _ESCAPE, _HEX, _CLOSED = range(5)
_QUOTE, _BACKSLASH = 0x22, 0x5C


class LengthGuard:
    """The automaton of one string schema's JSON texts and its length bounds.

    Parameters
    ----------
    dfa : ByteDFA
        The trimmed DFA of the string's JSON texts, quotes included, without the bounds.
    min_len, max_len : int, int or None
        ``minLength`` / ``maxLength`` in characters.

    Raises
    ------
    ValueError
        If some state is reached in two lexical modes (not a JSON string automaton).
    """

    def __init__(self, dfa: ByteDFA, min_len: int, max_len: int | None) -> None:
        self.dfa = dfa
        self.min_len, self.max_len = min_len, max_len
        self.start = dfa.start_state
        full = dfa.transitions[:, dfa.byte_to_class]  # (N, 256)
        self._rows = scalar_rows(full)
        self.is_accepting: list[bool] = dfa.is_accepting.tolist()
        modes, hex_left = _modes(self._rows, self.start)
        # (N, 256) weights: 1 where the byte starts a character of the content
        starts = np.ones(256, dtype=bool)
        starts[0x80:0xC0] = False
        starts[_QUOTE] = False
        is_content = np.asarray(modes) == _CONTENT
        self._weights = scalar_rows((is_content[:, None] & starts[None, :]).astype(np.int64))
        into = _reversed_edges(self._rows, self._weights)
        self.shortest = _distances(into, np.where(dfa.is_accepting, 0, INFINITE))
        self.longest = _longest(self._rows, self._weights, dfa.is_accepting)
        self.max_shortest = int(self.shortest.max(initial=0))
        self._shortest_list: list[int] = self.shortest.tolist()
        self._longest_list: list[int] = self.longest.tolist()
        self._every: list[int] = _distances(
            into, _self_loop_counts(self._rows, self._weights, self.shortest)
        ).tolist()
        # some content state has boundedly many characters ahead: under min_len a token can
        # then lead where too few remain (else only closing the string early breaks it)
        self.has_bounded_content = bool(
            (is_content & (self.longest < INFINITE) & ~dfa.is_accepting).any()
        )
        self._is_content: list[bool] = is_content.tolist()
        self._modes: list[int] = modes
        self._hex_left: list[int] = hex_left
        self.is_plain_count = _is_plain_count(
            self._rows, self._weights, self.shortest, modes, min_len
        )
        self._fits: dict[tuple[int, int], bool] = {}  # (state, characters) -> fits (search)
        self._transitions = LazyTransitions(dfa)

    def with_max_len(self, max_len: int | None) -> LengthGuard:
        """The same automaton and ``min_len`` under another ``max_len`` (its analysis
        shared: nothing but `fits`'s searches depends on ``max_len``)."""
        other = copy.copy(self)
        other.max_len = max_len
        other._fits = {}
        return other

    def step(self, state: int, byte: int) -> tuple[int, int]:
        """``(state after byte, characters it adds)``; state ``-1``: the text cannot go on."""
        return self._rows[state][byte], self._weights[state][byte]

    def refuses_closing(self, state: int, num_chars: int, head: bytes) -> bool | None:
        """From ``state`` with ``num_chars`` characters, do ``head`` (no quote or backslash,
        in the content) and a closing quote break the string: the text dies, passes
        ``max_len``, or closes under ``min_len``? None if that quote is not the end here."""
        rows, weights, max_len = self._rows, self._weights, self.max_len
        for byte in head:
            num_chars += weights[state][byte]
            state = rows[state][byte]
            if state < 0 or (max_len is not None and num_chars > max_len):
                return True
        state = rows[state][_QUOTE]  # (a closing quote adds no character)
        if state < 0:
            return True
        if not self.is_accepting[state]:
            return None
        return num_chars < self.min_len

    def shortest_at(self, state: int) -> int:
        """The fewest characters any completion from ``state`` adds."""
        return self._shortest_list[state]

    def escape_left(self, state: int) -> tuple[bool, int]:
        """``(after a backslash, hex digits of a \\uXXXX still to read)`` at ``state``
        (``(False, 0)`` in the content or outside the string)."""
        return self._modes[state] == _ESCAPE, self._hex_left[state]

    def is_content(self, state: int) -> bool:
        """Is ``state`` inside the string's content, not after a backslash or in ``\\uXXXX``
        (a byte there starts a character unless it continues a UTF-8 one)?"""
        return self._is_content[state]

    def token_ends(self, state: int, vocab: Vocabulary) -> np.ndarray:
        """``(V,)`` int32: the state each token ends in when its bytes all stay inside the
        string text from ``state``, else ``-1`` (memoised per state)."""
        return self._transitions(state, vocab)

    def fits(self, state: int, num_chars: int) -> bool:
        """Can the text in ``state`` with ``num_chars`` characters complete within the
        bounds (some completion adds ``k`` characters, ``min_len <= num_chars + k <=
        max_len``)?"""
        lo = max(self.min_len - num_chars, 0)
        hi = INFINITE if self.max_len is None else self.max_len - num_chars
        if hi < 0 or self._shortest_list[state] > hi or self._longest_list[state] < lo:
            return False
        if self._shortest_list[state] >= lo or self._longest_list[state] <= hi:
            return True  # the shortest (or longest) completion is inside [lo, hi]
        if lo > hi:
            return False
        if self._every[state] <= hi:
            return True  # max(lo, every) is achievable and inside [lo, hi]
        key = (state, num_chars)
        found = self._fits.get(key)
        if found is None:
            found = _has_count_in(self._rows, self._weights, self.is_accepting, state, lo, hi)
            self._fits[key] = found
        return found

    def __repr__(self) -> str:
        return f"LengthGuard({self.dfa.num_states} states, {self.min_len}..{self.max_len})"


def _is_plain_count(
    rows: Sequence[Sequence[int]],
    weights: Sequence[Sequence[int]],
    shortest: np.ndarray,
    modes: Sequence[int],
    min_len: int,
) -> bool:
    """Does every byte read inside the string (content, after a backslash, in ``\\uXXXX``)
    that keeps it open take ``shortest`` down by its weight (to at least 0), with no
    ``min_len`` of the guard's own? Then (the counted plain strings, ``"CHAR{m,}"``) a text
    in a content state that fits its bounds still fits after bytes that keep the string
    open iff their characters fit the room left: ``shortest`` after them is
    ``max(shortest - chars, 0)``, at most the room left then."""
    if min_len > 0:
        return False
    for state, mode in enumerate(modes):
        if mode not in (_CONTENT, _ESCAPE, _HEX):
            continue
        row, weight, left = rows[state], weights[state], int(shortest[state])
        for byte, target in enumerate(row):
            if target < 0 or modes[target] == _CLOSED:
                continue
            if shortest[target] != max(left - weight[byte], 0):
                return False
    return True


def _modes(rows: Sequence[Sequence[int]], start: int) -> tuple[list[int], list[int]]:
    """The lexical mode of each state and, in ``\\uXXXX``, the hex digits still to read
    (breadth first from ``start``)."""
    modes = [-1] * len(rows)
    modes[start] = _OPEN
    hex_left = [0] * len(rows)
    queue = collections.deque([start])
    while queue:
        state = queue.popleft()
        mode = modes[state]
        for byte, target in enumerate(rows[state]):
            if target < 0:
                continue
            after, left = _next_mode(mode, hex_left[state], byte)
            if modes[target] == -1:
                modes[target], hex_left[target] = after, left
                queue.append(target)
            elif (modes[target], hex_left[target]) != (after, left):
                raise ValueError("a state of the string automaton has two lexical modes")
    return modes, hex_left


def _next_mode(mode: int, hex_left: int, byte: int) -> tuple[int, int]:
    if mode == _OPEN:
        return _CONTENT, 0
    if mode == _CONTENT:
        if byte == _QUOTE:
            return _CLOSED, 0
        return (_ESCAPE, 0) if byte == _BACKSLASH else (_CONTENT, 0)
    if mode == _ESCAPE:
        return (_HEX, 4) if byte == 0x75 else (_CONTENT, 0)  # \u
    if mode == _HEX:
        return (_HEX, hex_left - 1) if hex_left > 1 else (_CONTENT, 0)
    return _CLOSED, 0


def _reversed_edges(
    rows: Sequence[Sequence[int]], weights: Sequence[Sequence[int]]
) -> list[list[tuple[int, int]]]:
    """Per state, ``(state before, weight)`` of every transition into it."""
    into: list[list[tuple[int, int]]] = [[] for _ in rows]
    for state, row in enumerate(rows):
        for byte, target in enumerate(row):
            if target >= 0:
                into[target].append((state, weights[state][byte]))
    return into


def _distances(into: list[list[tuple[int, int]]], initial: np.ndarray) -> np.ndarray:
    """``(N,)`` ``min over sources p (characters from each state to p + initial[p])``
    (``INFINITE``: no source reachable), over the 0/1-weighted reversed edges ``into``:
    relaxed until stable, weight-0 edges first (0-1 breadth first from several sources).

    With ``initial`` 0 at the accepting states this is the shortest completion; with
    ``shortest[p]`` at the states ``p`` with a one-character self-loop, a count from which
    every larger one is achievable (the way to ``p``, any number of turns, then the shortest
    way on)."""
    distance = np.asarray(initial, dtype=np.int64).copy()
    sources = np.flatnonzero(distance < INFINITE).tolist()
    queue = collections.deque(sorted(sources, key=lambda s: distance[s]))
    while queue:
        state = queue.popleft()
        for before, weight in into[state]:
            found = distance[state] + weight
            if found < distance[before]:
                distance[before] = found
                if weight == 0:
                    queue.appendleft(before)
                else:
                    queue.append(before)
    return distance


def _self_loop_counts(
    rows: Sequence[Sequence[int]], weights: Sequence[Sequence[int]], shortest: np.ndarray
) -> np.ndarray:
    """``(N,)`` ``shortest[p]`` at the states ``p`` with a one-character self-loop, else
    ``INFINITE``."""
    counts = np.full(len(rows), INFINITE, dtype=np.int64)
    for state, row in enumerate(rows):
        if any(target == state and weights[state][byte] == 1 for byte, target in enumerate(row)):
            counts[state] = shortest[state]
    return counts


def _longest(
    rows: Sequence[Sequence[int]], weights: Sequence[Sequence[int]], is_accepting: np.ndarray
) -> np.ndarray:
    """``(N,)`` most characters from each state to acceptance (``INFINITE`` when a cycle is
    reachable; the trimmed automaton's states all reach acceptance)."""
    num_states = len(rows)
    successors = [sorted({t for t in row if t >= 0}) for row in rows]
    # iterative DFS: post-order, with cycle detection (gray states)
    color = [0] * num_states  # 0 white, 1 gray, 2 black
    longest = np.full(num_states, -1, dtype=np.int64)
    on_cycle_path = [False] * num_states
    for root in range(num_states):
        if color[root]:
            continue
        stack = [(root, 0)]
        color[root] = 1
        while stack:
            state, k = stack[-1]
            if k < len(successors[state]):
                stack[-1] = (state, k + 1)
                target = successors[state][k]
                if color[target] == 0:
                    color[target] = 1
                    stack.append((target, 0))
                elif color[target] == 1:
                    on_cycle_path[state] = True  # a back edge: a cycle through state
                continue
            stack.pop()
            color[state] = 2
            best = 0 if is_accepting[state] else -INFINITE
            for byte, target in enumerate(rows[state]):
                if target < 0:
                    continue
                if on_cycle_path[target] or longest[target] >= INFINITE:
                    on_cycle_path[state] = True
                    continue
                best = max(best, int(longest[target]) + weights[state][byte])
            longest[state] = INFINITE if on_cycle_path[state] else best
    return longest


def _has_count_in(
    rows: Sequence[Sequence[int]],
    weights: Sequence[Sequence[int]],
    is_accepting: list[bool],
    state: int,
    lo: int,
    hi: int,
) -> bool:
    """Does some completion from ``state`` add between ``lo`` and ``hi`` characters? (Search
    over (state, characters added) pairs, characters capped at ``hi``.)"""
    seen = {(state, 0)}
    stack = [(state, 0)]
    while stack:
        here, count = stack.pop()
        if is_accepting[here] and lo <= count <= hi:
            return True
        for byte, target in enumerate(rows[here]):
            if target < 0:
                continue
            after = count + weights[here][byte]
            if after <= hi and (target, after) not in seen:
                seen.add((target, after))
                stack.append((target, after))
    return False
