"""ChainKeys: lexer-walk keys of counted chains, shared across bounds and positions.

``X{lo,hi}`` over a prefix code ``X`` (one JSON string character) is built as a chain of copies
of ``X``'s minimal DFA (:func:`~formcast.grammar.automata.nfa_builder.counted_chain_dfa`): state
``k * width + j`` is "``k`` code words read, state ``j`` of ``X``'s DFA" (``width`` = the
states of ``X`` but its final one), and ``hi * width`` is the end state. From ``(k, j)`` a byte
string ``w`` completes some ``c`` code words and stops in ``X``'s state ``j'``; the chain
accepts iff ``j' = 0`` and ``lo <= k + c <= hi``, and stays alive iff ``k + c <= hi``
(``k + c < hi`` if ``j' != 0``). A vocabulary walk reads at most ``L`` bytes (the longest
token), so ``c <= L``: with the *horizon* ``H = L + 1`` the walk depends on ``k`` only through

    ``m = min(max(lo - k, 0), H)`` and ``r = min(hi - k, H)``,

(``c <= L < H`` makes every bound past ``H`` behave like ``H``). So walks are keyed by
``(X, j, m, r)`` instead of ``(DFA, state)``: every position of every bounded string more than
``H`` characters before its maximum shares one walk, and strings of different ``maxLength``
share the positions at equal distance from it. A walk not stored yet is computed on the
*canonical* chain ``X{0,H}`` at ``k_c = H - r``, with its states accepting from copy
``k_c + m`` on (:func:`canonical_chain`), so one small DFA serves every key of ``X``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class ChainKeys:
    """Walk keys of the states of one chain DFA ``X{lo,hi}`` (see module docstring).

    Attributes
    ----------
    item:
        Regex text of ``X`` (the chain's code).
    width:
        States per copy (``X``'s DFA states but its final one).
    lo, hi:
        The repetition bounds (``hi`` finite).
    shift:
        1 for the chain without the empty string (``lo = 0``): a non-accepting copy of the
        start state comes first and every other state is shifted by one.
    """

    item: str
    width: int
    lo: int
    hi: int
    shift: int = 0

    def key(self, state: int, horizon: int) -> tuple[str, int, int, int]:
        """``(item, j, m, r)`` of ``state`` for walks of at most ``horizon - 1`` bytes."""
        lo = self.lo
        if self.shift:
            if state == 0:
                return self._key(0, 0, max(lo, 1), horizon)
            state -= 1
        if state == self.hi * self.width:
            return self._key(self.hi, 0, lo, horizon)
        k, j = divmod(state, self.width)
        return self._key(k, j, lo, horizon)

    def _key(self, k: int, j: int, lo: int, horizon: int) -> tuple[str, int, int, int]:
        return (self.item, j, min(max(lo - k, 0), horizon), min(self.hi - k, horizon))

    def without_empty(self) -> ChainKeys:
        """Keys of the chain with its start made non-accepting (see ``shift``)."""
        assert self.shift == 0 and self.lo == 0, "only a nullable chain is stripped"
        return replace(self, shift=1)


def canonical_chain(
    key: tuple[str, int, int, int], width: int, horizon: int
) -> tuple[str, int, int]:
    """``(pattern, state, accept_from)``: the canonical chain ``X{0,H}``, the state of it
    whose walks are ``key``'s, and the copy from which its states accept.

    At ``k_c = H - r`` the chain ``X{0,H}`` has ``r`` words left, like ``key``; the lower
    bound is matched by acceptance alone: ``(k, 0)`` accepts for the walk iff
    ``k >= k_c + m`` (:func:`chain_acceptance`). So one DFA (its table and chain coverage)
    serves every key of the code ``X``."""
    item, j, m, r = key
    k = horizon - r
    state = k * width + j if k < horizon else horizon * width
    return f"(?:{item}){{0,{horizon}}}", state, k + m


def chain_acceptance(width: int, horizon: int, accept_from: int) -> np.ndarray:
    """``(H * width + 1,)`` bool: the states ``(k, 0)`` of ``X{0,H}`` with
    ``k >= accept_from`` (the end state is ``(H, 0)``)."""
    is_start = np.zeros(horizon * width + 1, dtype=bool)
    is_start[::width] = True  # (k, 0) is state k * width; the end state is H * width
    copy = np.arange(horizon * width + 1) // width
    return is_start & (copy >= accept_from)
