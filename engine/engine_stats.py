"""EngineStats: counters an LLM keeps across its lifetime (forward passes, tokens, mask time).

Read them before and after a workload and subtract (`EngineStats.since`) to measure it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass
class EngineStats:
    """Cumulative engine counters.

    Attributes
    ----------
    num_steps : int
        Forward passes run (steps with scheduled work).
    num_sampled_tokens : int
        Tokens chosen by the sampler.
    num_forced_tokens : int
        Tokens appended by jump-forward without sampling.
    num_constrained_rows : int
        Sampled rows that carried a grammar mask.
    forward_seconds : float
        Wall time of the model forward passes.
    mask_fill_seconds : float
        Time spent filling grammar bitmasks (in the worker thread when overlapped).
    mask_wait_seconds : float
        Time the step waited for its bitmask after the forward: mask time *not* hidden.
    num_grammar_compiles : int
        Grammar compilations started (requests sharing a grammar key count once).
    """

    num_steps: int = 0
    num_sampled_tokens: int = 0
    num_forced_tokens: int = 0
    num_constrained_rows: int = 0
    forward_seconds: float = 0.0
    mask_fill_seconds: float = 0.0
    mask_wait_seconds: float = 0.0
    num_grammar_compiles: int = 0

    def copy(self) -> EngineStats:
        """A snapshot."""
        return replace(self)

    def since(self, earlier: EngineStats) -> EngineStats:
        """Counters accumulated after the snapshot ``earlier``."""
        return EngineStats(
            **{f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)}
        )
