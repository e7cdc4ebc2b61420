"""CompileBudget: the state and time limits a grammar compilation must stay within.

Every expensive loop (repetition expansion, determinisation, minimisation, eager indexing)
calls :meth:`CompileBudget.check_time` regularly and raises :class:`CompileBudgetError` with
the pattern offset it was working on, so a pathological pattern fails fast instead of hanging
or eating memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from formcast.errors import CompileBudgetError

DEFAULT_MAX_STATES = 100_000
DEFAULT_MAX_NFA_STATES = 2_000_000
DEFAULT_TIMEOUT_S = 60.0


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
    """

    max_states: int = DEFAULT_MAX_STATES
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_nfa_states: int = DEFAULT_MAX_NFA_STATES
    started_at: float = field(default_factory=time.perf_counter)

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
