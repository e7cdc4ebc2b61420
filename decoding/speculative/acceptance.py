"""AcceptanceTracker: per-sequence acceptance rate and the adaptive number of drafts.

Each verification updates ``a <- decay * a + (1 - decay) * accepted / proposed``. With
per-draft acceptance ``a`` (drafts accepted independently), ``k`` drafts yield
``E[tokens] = 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a)`` tokens for a step that costs
``1 + span_overhead + draft_cost * k`` plain decode steps (``span_overhead``: the jump from a
one-token step to any multi-token span, large on CPU where a 2-row matmul is a packed GEMM
costing ~2x the 1-row GEMV; ~0 on GPU). The chosen ``k`` maximises tokens per cost and is 0
(no speculation this step) when no ``k`` beats plain decoding. A sequence without history
starts with ``max_drafts``; a paused one probes with 2 drafts every ``probe_interval`` steps.
"""

from __future__ import annotations

PROBE_DRAFTS = 2  # a paused sequence probes with this many drafts (cheap; k grows if accepted)


def best_num_drafts(
    acceptance: float, max_drafts: int, draft_cost: float, span_overhead: float = 0.0
) -> int:
    """The ``k`` in ``[0, max_drafts]`` maximising expected tokens per unit of cost.

    ``k = 0`` (plain decoding, value 1) wins when no ``k >= 1`` is expected to pay off.
    """
    a = min(max(acceptance, 0.0), 0.999)
    best_k, best_value = 0, 1.0
    for k in range(1, max_drafts + 1):
        value = (1 - a ** (k + 1)) / (1 - a) / (1 + span_overhead + draft_cost * k)
        if value > best_value + 1e-12:
            best_k, best_value = k, value
    return best_k


class AcceptanceTracker:
    """Moving-average acceptance per sequence id; chooses each sequence's next ``k``.

    Parameters
    ----------
    max_drafts : int
        Upper bound on ``k``.
    adaptive : bool
        False: always ``max_drafts``.
    draft_cost : float
        Relative cost of one more verified position.
    span_overhead : float
        Relative extra cost of any multi-token span over a one-token step.
    decay : float
        History weight of the moving average.
    probe_interval : int
        A paused sequence probes again after this many steps.
    """

    def __init__(
        self,
        max_drafts: int,
        adaptive: bool = True,
        draft_cost: float = 0.1,
        span_overhead: float = 0.0,
        decay: float = 0.7,
        probe_interval: int = 16,
    ) -> None:
        self.max_drafts = max_drafts
        self.adaptive = adaptive
        self.draft_cost = draft_cost
        self.span_overhead = span_overhead
        self.decay = decay
        self.probe_interval = probe_interval
        self._rates: dict[int, float] = {}
        self._paused: dict[int, int] = {}

    def num_drafts(self, seq_id: int) -> int:
        """How many drafts to propose for ``seq_id`` this step."""
        if not self.adaptive or seq_id not in self._rates:
            return self.max_drafts
        k = best_num_drafts(
            self._rates[seq_id], self.max_drafts, self.draft_cost, self.span_overhead
        )
        if k > 0:
            self._paused.pop(seq_id, None)
            return k
        paused = self._paused.get(seq_id, 0) + 1
        if paused >= self.probe_interval:
            self._paused.pop(seq_id, None)
            return min(PROBE_DRAFTS, self.max_drafts)
        self._paused[seq_id] = paused
        return 0

    def acceptance(self, seq_id: int) -> float | None:
        """The current moving-average acceptance of ``seq_id`` (None before any)."""
        return self._rates.get(seq_id)

    def update(self, seq_id: int, num_proposed: int, num_accepted: int) -> None:
        """Record a verification of ``num_proposed`` drafts of which ``num_accepted`` passed."""
        if num_proposed <= 0:
            return
        rate = num_accepted / num_proposed
        old = self._rates.get(seq_id)
        self._rates[seq_id] = rate if old is None else self.decay * old + (1 - self.decay) * rate

    def retain(self, seq_ids: set[int]) -> None:
        """Drop every sequence not in ``seq_ids``."""
        for seq_id in [s for s in self._rates if s not in seq_ids]:
            del self._rates[seq_id]
            self._paused.pop(seq_id, None)

    def forget(self, seq_id: int) -> None:
        """Drop a finished sequence."""
        self._rates.pop(seq_id, None)
        self._paused.pop(seq_id, None)
