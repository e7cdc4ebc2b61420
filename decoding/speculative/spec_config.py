"""SpeculativeConfig: which proposer drafts tokens, how many, and when speculation runs.

``method``:

- ``"ngram"``: prompt lookup. The last ``n`` tokens (``max_ngram`` down to ``min_ngram``)
  are matched against the prompt and the output so far; the tokens that followed the most
  recent earlier occurrence are the drafts (point-mass proposals, no model call).
- ``"self_draft"``: the target's first ``draft_num_layers`` decoder layers, its final norm
  and its LM head form the draft model (shared weights, its own small paged KV cache).
- ``"draft_model"``: a separate model folder (``draft_model``) sharing the target's
  tokenizer, run with its own paged KV cache.
- ``"custom"``: ``proposer`` is any object with ``propose(token_ids, num_tokens) ->
  list[int]`` (point-mass drafts; used by tests to force rejections).
- ``"medusa"``: Medusa heads on the target's last hidden state propose a token *tree*
  (``medusa_tree``: Medusa "choices", rank paths; default
  ``draft_tree.DEFAULT_TREE_CHOICES``), verified in one forward pass with tree attention
  (``formcast.engine.speculative.tree_speculator``). ``medusa_heads``: a heads file, a
  ``MedusaHeads`` module, or None for the shipped heads of the model. ``acceptance="exact"`` (default) is
  lossless (greedy: plain greedy's tokens; sampling: recursive rejection sampling);
  ``acceptance="typical"`` is Medusa's typical acceptance, LOSSY (the output no longer
  follows the target distribution), with ``posterior_threshold`` (default 0.09) and
  ``posterior_alpha`` (default 0.3); it is never chosen implicitly. For Medusa the adaptive
  rule picks the tree *depth* (``num_draft_tokens`` caps it) from the acceptance of the
  path length.

The number of drafts per step adapts to each sequence's acceptance rate (``adaptive``):
with an exponential moving average ``a`` of the per-draft acceptance, the next ``k`` maximises
the expected tokens per unit of cost ``(1 - a^(k+1)) / (1 - a) / (1 + span_overhead +
draft_cost * k)`` over ``0 <= k <= num_draft_tokens`` (0: this sequence skips speculation
for now and probes again every ``probe_interval`` steps). ``span_overhead=None`` picks 0.5 on
CPU (there a 2-token span costs about two 1-token steps, fp32 GEMM vs GEMV, but n-gram
acceptance is bursty, so a lower value keeps copy runs speculating) and 0.1 on GPU. Speculation is skipped in steps where more than
``max_batch_size`` sequences run (large batches are compute-bound: verifying drafts then costs
as much as it saves).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from formcast.decoding.speculative.draft_tree import normalize_choices
from formcast.errors import EngineConfigError

METHODS = ("ngram", "self_draft", "draft_model", "custom", "medusa")
ACCEPTANCES = ("exact", "typical")


@dataclass
class SpeculativeConfig:
    """Speculative decoding settings (``LLM(..., speculative=SpeculativeConfig(...))``).

    Parameters
    ----------
    method : str
        ``"ngram"``, ``"self_draft"``, ``"draft_model"`` or ``"custom"`` (see module doc).
    num_draft_tokens : int
        Most draft tokens verified per sequence and step (``k``).
    adaptive : bool
        Adapt ``k`` per sequence to its acceptance rate (else always ``num_draft_tokens``).
    draft_cost : float
        Relative cost of one more verified position, used by the adaptive rule.
    span_overhead : float or None
        Extra relative cost of a multi-token span over a one-token step (None: by device).
    probe_interval : int
        Steps a paused sequence waits before probing with ``num_draft_tokens`` drafts again.
    acceptance_decay : float
        Weight of history in the moving average, in ``[0, 1)``.
    max_batch_size : int
        Speculate only in steps with at most this many running sequences.
    min_ngram, max_ngram : int
        N-gram lengths tried by prompt lookup (longest first).
    draft_num_layers : int or None
        Layers of the target used by ``"self_draft"`` (default: a quarter, at least 1).
    draft_model : str or None
        Model folder / alias of the ``"draft_model"`` method.
    proposer : Any
        The ``"custom"`` proposer.
    medusa_heads : str, PathLike, MedusaHeads or None
        ``"medusa"``: the heads (None: the shipped heads of the target model).
    medusa_tree : list of rank paths or None
        ``"medusa"``: the static tree topology (None: the CPU default).
    acceptance : str
        ``"exact"`` (lossless) or ``"typical"`` (Medusa's typical acceptance, lossy).
    posterior_threshold, posterior_alpha : float or None
        Typical acceptance thresholds (only with ``acceptance="typical"``; None: 0.09, 0.3).
    """

    method: str = "ngram"
    num_draft_tokens: int = 4
    adaptive: bool = True
    draft_cost: float = 0.15
    span_overhead: float | None = None
    probe_interval: int = 4
    acceptance_decay: float = 0.7
    max_batch_size: int = 8
    min_ngram: int = 1
    max_ngram: int = 4
    draft_num_layers: int | None = None
    draft_model: str | None = None
    proposer: Any = None
    medusa_heads: Any = None
    medusa_tree: Any = None
    acceptance: str = "exact"
    posterior_threshold: float | None = None
    posterior_alpha: float | None = None

    def __post_init__(self) -> None:
        where = "SpeculativeConfig"
        if self.method not in METHODS:
            raise EngineConfigError(f"{where}.method={self.method!r}: use one of {METHODS}")
        for name in ("num_draft_tokens", "max_batch_size", "min_ngram", "max_ngram"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise EngineConfigError(f"{where}.{name}={value!r} must be an int >= 1")
        if self.min_ngram > self.max_ngram:
            raise EngineConfigError(
                f"{where}.min_ngram={self.min_ngram} exceeds max_ngram={self.max_ngram}"
            )
        if not isinstance(self.adaptive, bool):
            raise EngineConfigError(f"{where}.adaptive={self.adaptive!r} must be a bool")
        if not isinstance(self.draft_cost, (int, float)) or not 0 <= self.draft_cost < 100:
            raise EngineConfigError(f"{where}.draft_cost={self.draft_cost!r} must be in [0, 100)")
        if self.span_overhead is not None and (
            not isinstance(self.span_overhead, (int, float)) or not 0 <= self.span_overhead < 100
        ):
            raise EngineConfigError(
                f"{where}.span_overhead={self.span_overhead!r} must be None or in [0, 100)"
            )
        if not isinstance(self.probe_interval, int) or self.probe_interval < 1:
            raise EngineConfigError(
                f"{where}.probe_interval={self.probe_interval!r} must be an int >= 1"
            )
        if not isinstance(self.acceptance_decay, (int, float)) or not (
            0 <= self.acceptance_decay < 1
        ):
            raise EngineConfigError(
                f"{where}.acceptance_decay={self.acceptance_decay!r} must be in [0, 1)"
            )
        if self.draft_num_layers is not None and (
            not isinstance(self.draft_num_layers, int) or self.draft_num_layers < 1
        ):
            raise EngineConfigError(
                f"{where}.draft_num_layers={self.draft_num_layers!r} must be None or an int >= 1"
            )
        if self.method == "draft_model" and not self.draft_model:
            raise EngineConfigError(f"{where}: method='draft_model' needs draft_model=<folder>")
        if self.method == "custom" and not callable(getattr(self.proposer, "propose", None)):
            raise EngineConfigError(
                f"{where}: method='custom' needs proposer=<object with propose(token_ids, k)>"
            )
        self._check_medusa(where)

    def _check_medusa(self, where: str) -> None:
        if self.acceptance not in ACCEPTANCES:
            raise EngineConfigError(
                f"{where}.acceptance={self.acceptance!r}: use one of {ACCEPTANCES}"
            )
        for name in ("posterior_threshold", "posterior_alpha"):
            value = getattr(self, name)
            if value is None:
                continue
            if self.acceptance != "typical":
                raise EngineConfigError(
                    f"{where}.{name}={value!r} applies to acceptance='typical' only (lossy; "
                    "choose it explicitly)"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise EngineConfigError(f"{where}.{name}={value!r} must be in (0, 1]")
        if self.method != "medusa":
            for name in ("medusa_heads", "medusa_tree"):
                if getattr(self, name) is not None:
                    raise EngineConfigError(f"{where}.{name} applies to method='medusa' only")
            if self.acceptance != "exact":
                raise EngineConfigError(
                    f"{where}.acceptance={self.acceptance!r} applies to method='medusa' only"
                )
            return
        if self.medusa_tree is not None:
            self.medusa_tree = [
                list(c) for c in normalize_choices(self.medusa_tree, f"{where}.medusa_tree")
            ]
        heads = self.medusa_heads
        if (
            heads is not None
            and not isinstance(heads, (str, os.PathLike))
            and not callable(getattr(heads, "top_candidates", None))
        ):
            raise EngineConfigError(
                f"{where}.medusa_heads={heads!r} must be None, a heads file path or a MedusaHeads"
            )

    @classmethod
    def coerce(cls, value: Any) -> SpeculativeConfig | None:
        """None, a `SpeculativeConfig`, or a dict of its fields -> a `SpeculativeConfig`."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(cls.__dataclass_fields__))
            if unknown:
                raise EngineConfigError(f"SpeculativeConfig: unknown field(s) {unknown}")
            return cls(**value)
        raise EngineConfigError(
            f"EngineConfig.speculative={value!r} must be None, a SpeculativeConfig or a dict"
        )
