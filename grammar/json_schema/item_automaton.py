"""ItemAutomaton: the item kind of a ``uniqueItems`` array over any regular item schema.

Objects, bounded strings, bounded integers, mixed ``oneOf`` items: their texts (in formcast's
layout) are a regular language, but a prefix of an item may have only finitely many
completions, all of them equal to earlier items, so the matcher must know, for a pending
item, whether some completion is a *new value*. This module holds the item's byte DFA and,
per state, what decides that quickly:

- ``is_value_infinite[s]``: the completions from ``s`` hold infinitely many values. True iff
  ``s`` reaches a cycle (a strongly connected component with an inner edge) that has an edge
  on a byte other than ``0``: each turn of such a cycle adds a character to a string (one
  spelling per string), a digit to a number, an item to an array or a property to an object,
  so the values differ. A cycle on ``0`` alone (the trailing zeros of a bounded decimal,
  ``1.5``, ``1.50``, ...) repeats one value: those states are *padded*.
- For the other states the reachable graph is acyclic (or padded) and
  ``log2_values[s] = log2(N) - Z * log2(5)`` bounds the number of distinct completion values
  from below: ``N`` counts completion texts, and one value has at most ``5^Z`` spellings,
  ``Z`` being the most edges on one path that can vary a spelling without changing the value
  (JSON whitespace, ``-`` of ``-0``, ``.``, ``0``, ``e``/``E``; flexible whitespace writes up
  to ``m`` of 4 characters at a position: at most ``5^m`` ways). So a pending item is alive
  when ``log2_values[s] > log2(len(seen))``.
- Otherwise :meth:`ItemAutomaton.has_new_value` enumerates the completions depth first (each
  state at most twice on a path: padding cycles are turned once) and parses them, stopping at
  the first new value (the suffixes from a state are enumerated once, as far as some pending
  item has needed them: they do not depend on the prefix); past ``MAX_ENUMERATED``
  completions it answers False (the token is masked: the output stays valid, a continuation
  may be lost; only for items with thousands of spellings of each earlier value).

Values are compared as jsonschema compares them (``equality_key``: ``1 == 1.0``,
``True != 1``, key order ignored).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from formcast.grammar.automata.byte_dfa import scalar_rows
from formcast.grammar.index.token_index import LazyTransitions
from formcast.grammar.json_schema.values import text_equality_key

if TYPE_CHECKING:
    from formcast.grammar.automata.byte_dfa import ByteDFA
    from formcast.grammar.index.vocabulary import Vocabulary

MAX_ENUMERATED = 4096  # completions has_new_value parses before answering False
_SPELLING_BYTES = frozenset(b" \t\n\r-.0eE")  # a byte here may vary a spelling, not a value
_LOG2_SPELLINGS = math.log2(5)  # per such byte on a path (see module docstring)
_ZERO = 0x30
_NUM_KEYS_CACHED = 4096  # item texts whose keys item_key keeps (a few hundred bytes each)


@functools.lru_cache(maxsize=_NUM_KEYS_CACHED)
def item_key(text: bytes) -> str:
    """`equality_key` of the item ``text`` (a string item's text is its key: formcast writes
    one spelling per string, ``json.dumps``'s). Memoised: the tokens that lead along one item
    path to the same completion (``E``, ``EU``, ``EUR`` of ``"EUR"}``) ask for the same text,
    and the next mask asks again."""
    if text[:1] == b'"':
        return text.decode()
    return text_equality_key(text)


class ItemAutomaton:
    """The byte DFA of one ``uniqueItems`` array's items and its per-state value counts.

    Parameters
    ----------
    dfa : ByteDFA
        The trimmed minimal DFA of the item texts (formcast layout at the array's depth).
    key : str
        Identity (the item tree's printed regex): equal keys, equal automata.
    """

    def __init__(self, dfa: ByteDFA, key: str) -> None:
        self.dfa = dfa
        self.key = key
        self.start = dfa.start_state
        full = dfa.transitions[:, dfa.byte_to_class]  # (N, 256)
        self._rows = scalar_rows(full)
        # per state, the (byte, target) pairs of its live transitions, ascending bytes
        self._edges: tuple[tuple[tuple[int, int], ...], ...] = tuple(
            tuple((byte, row[byte]) for byte in np.flatnonzero(np.asarray(row) >= 0).tolist())
            for row in self._rows
        )
        self.is_accepting: list[bool] = dfa.is_accepting.tolist()
        self.is_value_infinite, self.log2_values = _value_counts(full, dfa.is_accepting)
        self._is_infinite: list[bool] = self.is_value_infinite.tolist()  # scalar lookups
        # bytes from each state to the nearest value-finite or accepting one: a token shorter
        # than that stays inside the item among value-infinite states (never refused)
        self.safe_horizon = _distance_to(full, ~self.is_value_infinite | dfa.is_accepting)
        self._log2_values: list[float] = self.log2_values.tolist()
        # per state, on first use: its completion suffixes in the order of _completion_texts,
        # enumerated as far as some pending item has needed (see has_new_value)
        self._suffixes: dict[int, _Suffixes] = {}
        self._suffixes_lock = threading.Lock()  # (matchers of one grammar on several threads)
        self._alive: dict[int, np.ndarray] = {}  # see alive_states
        # every item is a string: its text is its key (see item_key)
        self.is_string_only = set(dfa.allowed_bytes(self.start).tolist()) == {0x22}
        self._transitions = LazyTransitions(dfa)

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte`` (``-1``: the item cannot continue so)."""
        return self._rows[state][byte]

    def token_ends(self, state: int, vocab: Vocabulary) -> np.ndarray:
        """``(V,)`` int32: the state each token ends in when its bytes all stay inside the
        item from ``state``, else ``-1`` (memoised per state)."""
        return self._transitions(state, vocab)

    def is_alive_fast(self, states: np.ndarray, num_seen: int) -> np.ndarray:
        """``(k,)`` bool: the completions from ``states`` surely hold a value outside any
        ``num_seen`` values (False: undecided, ask `has_new_value`)."""
        if num_seen == 0:
            return np.ones(len(states), dtype=bool)
        return self.is_value_infinite[states] | (self.log2_values[states] > math.log2(num_seen))

    def surely_has_new(self, state: int, num_seen: int) -> bool:
        """`is_alive_fast` of one state (no array)."""
        return (
            num_seen == 0
            or bool(self._is_infinite[state])
            or self._log2_values[state] > math.log2(num_seen)
        )

    def alive_states(self, num_seen: int) -> np.ndarray:
        """``(S,)`` bool, read-only: `is_alive_fast` of every state (memoised per count)."""
        found = self._alive.get(num_seen)
        if found is None:
            found = self.is_alive_fast(np.arange(self.dfa.num_states), num_seen)
            found.setflags(write=False)
            self._alive[num_seen] = found
        return found

    def has_new_value(
        self, state: int, prefix: bytes, seen: frozenset[str], is_checked: bool = False
    ) -> bool:
        """Is some completion ``prefix + suffix`` (``prefix`` ends in ``state``) a value whose
        `equality_key` is not in ``seen``? (``is_checked``: `is_alive_fast` said no already.)"""
        if not is_checked and (
            not seen or self._is_infinite[state] or self._log2_values[state] > math.log2(len(seen))
        ):
            return True
        # the suffixes from a state do not depend on the prefix that reached it: they are
        # enumerated once per state, as far as some prefix has needed (a completion is tens
        # of bytes, each a step of the search; near an item's end the first one is new)
        suffixes = self._suffixes.get(state)
        if suffixes is None:
            suffixes = self._suffixes.setdefault(
                state, _Suffixes(self._completion_texts(state, b""))
            )
        for k in range(MAX_ENUMERATED):
            suffix = suffixes.get(k, self._suffixes_lock)
            if suffix is _END:
                return False
            if suffix is None or item_key(prefix + suffix) not in seen:
                return True  # (None: a value-infinite state, infinitely many values)
        return False

    def has_values(self, count: int) -> bool:
        """Do the items hold at least ``count`` distinct values?"""
        if self.is_alive_fast(np.array([self.start]), max(count - 1, 0))[0]:
            return True
        keys: set[str] = set()
        for text in self._completion_texts(self.start, b""):
            if text is None:
                return True
            keys.add(item_key(text))
            if len(keys) >= count:
                return True
        return False

    def _completion_texts(self, state: int, prefix: bytes) -> Iterator[bytes | None]:
        """``prefix`` + each completion from ``state``, depth first, each state at most
        twice on a path (padding cycles turned once); None for a value-infinite state met on
        the way (infinitely many values)."""
        edges, accepting, infinite = self._edges, self.is_accepting, self._is_infinite
        visits: dict[int, int] = {state: 1}
        text = bytearray(prefix)
        stack: list[list[int]] = [[state, -1]]  # (state, index of the last edge tried)
        while stack:
            frame = stack[-1]
            here, edge = frame
            if edge == -1:
                if infinite[here]:
                    yield None
                    return
                if accepting[here]:
                    yield bytes(text)
            out = edges[here]
            edge += 1
            while edge < len(out) and visits.get(out[edge][1], 0) >= 2:
                edge += 1
            if edge == len(out):
                stack.pop()
                visits[here] -= 1
                if stack:
                    text.pop()
                continue
            frame[1] = edge
            byte, target = out[edge]
            visits[target] = visits.get(target, 0) + 1
            text.append(byte)
            stack.append([target, -1])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ItemAutomaton) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"ItemAutomaton({self.dfa.num_states} states)"

    def __getstate__(self) -> dict:
        return {"dfa": self.dfa, "key": self.key}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["dfa"], state["key"])


_END = object()  # past the last suffix of a state


class _Suffixes:
    """The completion suffixes of one state as far as enumerated: ``get(k)`` is the ``k``-th
    (``None``: a value-infinite state, which ends the enumeration; ``_END``: there is none),
    pulling the enumeration on under ``lock`` where it has not come so far yet."""

    def __init__(self, texts: Iterator[bytes | None]) -> None:
        self._texts = texts
        self._found: list[bytes | None] = []
        self._is_done = False

    def get(self, k: int, lock: threading.Lock) -> bytes | None | object:
        found = self._found
        if k < len(found):
            return found[k]
        with lock:
            while len(found) <= k and not self._is_done:
                text = next(self._texts, _END)
                if text is _END:
                    self._is_done = True
                else:
                    found.append(text)
        return found[k] if k < len(found) else _END


def _value_counts(full: np.ndarray, is_accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(is_value_infinite, log2_values)`` per state of the DFA whose byte table is ``full``
    ``(N, 256)`` (see module docstring; ``-inf`` for padded states)."""
    num_states = full.shape[0]
    successors = [sorted(set(row[row >= 0].tolist())) for row in full]
    component = _strong_components(successors)
    # a component is valued if an inner edge has a byte other than '0', padded if all its
    # inner edges are on '0'
    is_valued = np.zeros(num_states, dtype=bool)  # indexed by component id
    is_padded = np.zeros(num_states, dtype=bool)
    for state in range(num_states):
        row = full[state]
        inner = np.flatnonzero((row >= 0) & (component[np.maximum(row, 0)] == component[state]))
        if inner.size:
            if (inner != _ZERO).any():
                is_valued[component[state]] = True
            else:
                is_padded[component[state]] = True
    infinite = _reaching(successors, is_valued[component])
    padded = _reaching(successors, is_padded[component]) & ~infinite
    log2_n = np.zeros(num_states)
    spelling = np.zeros(num_states)  # Z: most spelling edges on one path
    is_spelling = np.array([b in _SPELLING_BYTES for b in range(256)])
    # the other states reach no cycle: successors first (Tarjan numbers sinks first)
    for state in sorted(range(num_states), key=lambda s: int(component[s])):
        if infinite[state] or padded[state]:
            continue
        row = full[state]
        bytes_out = np.flatnonzero(row >= 0)
        # N = [accepting] + sum over bytes of N(target), in log2
        terms = [0.0] if is_accepting[state] else []
        terms += log2_n[row[bytes_out]].tolist()
        log2_n[state] = _log2_sum(terms)
        extra = is_spelling[bytes_out].astype(float)
        spelling[state] = float((spelling[row[bytes_out]] + extra).max()) if bytes_out.size else 0
    log2_values = log2_n - spelling * _LOG2_SPELLINGS
    log2_values[padded] = -np.inf
    log2_values[infinite] = np.inf
    return infinite, log2_values


def _distance_to(full: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """``(N,)`` int64: the fewest bytes from each state to a target state (breadth first
    over the reversed edges of the ``(N, 256)`` table; ``2**62`` where none is reachable)."""
    num_states = len(full)
    predecessors: list[list[int]] = [[] for _ in range(num_states)]
    for state, row in enumerate(full.tolist()):
        for target in set(row):
            if target >= 0:
                predecessors[target].append(state)
    distance = np.full(num_states, 2**62, dtype=np.int64)
    frontier = np.flatnonzero(is_target).tolist()
    distance[frontier] = 0
    depth = 0
    while frontier:
        depth += 1
        nxt = []
        for state in frontier:
            for before in predecessors[state]:
                if distance[before] > depth:
                    distance[before] = depth
                    nxt.append(before)
        frontier = nxt
    return distance


def _log2_sum(terms: list[float]) -> float:
    if not terms:
        return -np.inf
    top = max(terms)
    return top + math.log2(sum(2.0 ** (t - top) for t in terms))


def _strong_components(successors: list[list[int]]) -> np.ndarray:
    """Tarjan's strongly connected components, iteratively: ``(N,)`` component ids."""
    num_states = len(successors)
    index = [-1] * num_states
    low = [0] * num_states
    on_stack = [False] * num_states
    component = np.full(num_states, -1, dtype=np.int64)
    stack: list[int] = []
    counter = 0
    num_components = 0
    for root in range(num_states):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            state, k = work.pop()
            if k == 0:
                index[state] = low[state] = counter
                counter += 1
                stack.append(state)
                on_stack[state] = True
            children = successors[state]
            if k < len(children):
                work.append((state, k + 1))
                child = children[k]
                if index[child] < 0:
                    work.append((child, 0))
                elif on_stack[child]:
                    low[state] = min(low[state], index[child])
                continue
            for child in children:  # finished children lower this state's link
                if on_stack[child] and component[child] < 0:
                    low[state] = min(low[state], low[child])
            if low[state] == index[state]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = num_components
                    if member == state:
                        break
                num_components += 1
    return component


def _reaching(successors: list[list[int]], is_target: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: the states from which some ``is_target`` state is reachable."""
    predecessors: list[list[int]] = [[] for _ in successors]
    for state, children in enumerate(successors):
        for child in children:
            predecessors[child].append(state)
    found = is_target.copy()
    frontier = np.flatnonzero(found).tolist()
    while frontier:
        state = frontier.pop()
        for parent in predecessors[state]:
            if not found[parent]:
                found[parent] = True
                frontier.append(parent)
    return found
