"""CompileBudget: the state and time limits a grammar compilation must stay within.

Every expensive loop (repetition expansion, determinisation, minimisation, eager indexing)
calls :meth:`CompileBudget.check_time` regularly and raises :class:`CompileBudgetError` with
the pattern offset it was working on, so a pathological pattern fails fast instead of hanging
or eating memory. A compilation made of many automata (the structural JSON-schema path)
runs inside :func:`compile_deadline`: every budget check of this thread (and
:func:`check_deadline` in the loops between automata) then also stops at that deadline.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from formcast.errors import CompileBudgetError

DEFAULT_MAX_STATES = 100_000
DEFAULT_MAX_NFA_STATES = 2_000_000
DEFAULT_TIMEOUT_S = 60.0

# (perf_counter deadline, its timeout_s) of the enclosing compile_deadline, or None
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("compile_deadline", default=None)


@contextmanager
def compile_deadline(timeout_s: float) -> Iterator[None]:
    """Budget checks inside the block raise :class:`CompileBudgetError` after ``timeout_s``
    wall-clock seconds (nested deadlines: the earliest wins)."""
    if not timeout_s > 0:
        raise CompileBudgetError(f"timeout_s must be > 0, got {timeout_s}")
    outer = _DEADLINE.get()
    deadline = (time.perf_counter() + timeout_s, timeout_s)
    if outer is not None and outer[0] <= deadline[0]:
        deadline = outer
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(what: str, position: int | None = None) -> None:
    """Raise :class:`CompileBudgetError` if the enclosing :func:`compile_deadline` is past."""
    found = _DEADLINE.get()
    if found is not None and time.perf_counter() > found[0]:
        raise CompileBudgetError(
            f"compile budget exceeded: {what} went past timeout_s={found[1]:g} s",
            position=position,
        )


@dataclass
class CompileBudget:
    """Limits for one compilation.

    Attributes
    ----------
    max_states:
        Most DFA states determinisation may create.
    timeout_s:
        Wall-clock seconds for the whole compilation.
    max_nfa_states:
        Most NFA states the expansion of counted repetitions may create.
    max_determinized_nfa_states:
        Most states of a built NFA that determinisation starts on (None: any; an early exit
        where a caller has a cheaper route for larger automata). Where set, the NFA builder
        holds its growth to ``max_nfa_states`` as it builds, without refusing on its
        unshared upper bound first.
    """

    max_states: int = DEFAULT_MAX_STATES
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_nfa_states: int = DEFAULT_MAX_NFA_STATES
    started_at: float = field(default_factory=time.perf_counter)
    max_determinized_nfa_states: int | None = None

    def __post_init__(self) -> None:
        if self.max_states < 1:
            raise CompileBudgetError(f"max_states must be >= 1, got {self.max_states}")
        if not self.timeout_s > 0:
            raise CompileBudgetError(f"timeout_s must be > 0, got {self.timeout_s}")

    def check_time(self, what: str, position: int | None) -> None:
        """Raise :class:`CompileBudgetError` if the time budget is spent."""
        elapsed = time.perf_counter() - self.started_at
        if elapsed > self.timeout_s:
            raise CompileBudgetError(
                f"compile budget exceeded: {what} took more than timeout_s={self.timeout_s:g} s",
                position=position,
            )
        check_deadline(what, position)

    def check_states(self, num_states: int, position: int | None) -> None:
        """Raise :class:`CompileBudgetError` if ``num_states`` exceeds ``max_states``."""
        if num_states > self.max_states:
            raise CompileBudgetError(
                f"compile budget exceeded: the DFA needs more than max_states={self.max_states} "
                "states (a counted repetition or alternation blows up determinisation)",
                position=position,
            )

    def check_nfa_states(self, num_states: int, position: int | None) -> None:
        """Raise :class:`CompileBudgetError` if the NFA grows beyond ``max_nfa_states``."""
        if num_states > self.max_nfa_states:
            raise CompileBudgetError(
                f"compile budget exceeded: expanding the pattern needs more than "
                f"{self.max_nfa_states} automaton states (repetition counts too large)",
                position=position,
            )


_GC_PAUSE_LOCK = threading.Lock()
_gc_pause_depth = 0  # pauses open in any thread
_gc_was_enabled = False  # the collector's state when the outermost pause began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration (re-entrant, thread-safe).

    Automaton construction allocates millions of small lists and tuples, none of them in
    reference cycles; every allocation burst triggers generation scans of the whole heap
    (tokenizer and vocabulary tables included), which cost 25-40% of compile time, and the
    temporaries that live across a scan are promoted until a full collection of the whole
    heap (0.2-0.3 s with torch and a tokenizer loaded) falls inside the compile. Reference
    counting still frees everything as usual. The pauses of all threads nest: the collector
    resumes when the last one ends, and only if it was enabled when the first one began.

    What the pause owes is paid when it ends: if the young generation has grown past the
    collector's threshold (a compile leaves its whole grammar there), it is collected at once
    into the old generation, so those scans (8 ms after a 700-property schema's compile) do
    not fall on the first masks that allocate, and no later young scan meets them again.
    """
    global _gc_pause_depth, _gc_was_enabled
    with _GC_PAUSE_LOCK:
        if _gc_pause_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pause_depth += 1
    try:
        yield
    finally:
        with _GC_PAUSE_LOCK:
            _gc_pause_depth -= 1
            is_last = _gc_pause_depth == 0 and _gc_was_enabled
            if is_last:
                gc.enable()
        if is_last and gc.get_count()[0] > gc.get_threshold()[0]:
            gc.collect(1)  # due at the next allocation anyway: the young generations now
