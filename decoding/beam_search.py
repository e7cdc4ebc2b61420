"""Beam search bookkeeping with transformers' exact semantics (torch only, no engine).

One `BeamSearchState` per prompt ("group"). A step, with ``B`` live beams of running scores
``s_b`` (sums of log-probs) and ``t`` tokens generated so far:

1. ``acc[b, v] = log_probs[b, v] + s_b``; the ``K = max(2, 1 + num_eos) * num_beams`` best
   entries of ``acc`` over ``(B x V)`` are the candidates, in descending order (ties: torch.topk).
2. A candidate "hits" a stop if its token is an EOS / stop id, its grammar terminates after
   it, or it is token ``max_tokens`` (then all candidates hit).
3. Hits ranked among the first ``num_beams`` candidates become hypotheses with the
   length-normalised score ``acc / (t + 1) ** length_penalty`` (length = generated tokens,
   EOS included); the hypothesis pool keeps the best ``num_beams``.
4. The first ``num_beams`` candidates that did not hit are the next step's beams.
5. The group is done when no beam is left, or the pool is full and either
   ``early_stopping is True``, or the best running beam cannot beat the worst hypothesis:
   ``s_best / L ** length_penalty <= worst`` with ``L = max_tokens`` for
   ``early_stopping="never"`` and ``length_penalty > 0``, else ``L = t + 1``.

This is `transformers.GenerationMixin._beam_search` (5.x) per batch item: `_get_top_k_continuations`,
`_get_running_beams_for_next_iteration`, `_update_finished_beams`, `_check_early_stop_heuristic`.
transformers' first step runs ``num_beams`` copies of the prompt with scores ``0, -1e9, ...``;
here the first step has one beam with score 0, which yields the same candidates.

Grammar-constrained beams (an engine or reference-loop matter): disallowed tokens have
log-prob ``-inf``; candidates with ``-inf`` are dropped, so fewer than ``num_beams`` beams may
run (transformers would keep ``-inf`` beams that can never win). By default a token's
log-prob is the model's (``log_softmax`` then mask, as transformers' logits processors do), so
scores are the model's log-probability of the text; ``renormalize_logprobs=True`` scores with
the constrained distribution instead (mask then ``log_softmax``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from formcast.errors import DeadEndError, RequestError, SamplingParamsError
from formcast.grammar import (
    Grammar,
    Matcher,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
)


def _invalid(name: str, value: object, requirement: str) -> SamplingParamsError:
    error = SamplingParamsError(name, value, requirement)
    error.args = (f"BeamSearchParams.{name}={value!r} is invalid: {requirement}",)
    return error


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class BeamSearchParams:
    """Settings of one beam search request (transformers' names and defaults).

    Parameters
    ----------
    num_beams : int
        Beams kept per step, ``>= 1``.
    length_penalty : float
        Exponent of the length normalisation ``score = sum_logprob / length ** length_penalty``
        (length counts generated tokens, EOS included). Finite; ``> 0`` favours longer outputs.
    early_stopping : bool or "never"
        ``True``: stop once ``num_beams`` hypotheses are finished. ``False``: also stop when
        the best running beam, normalised at its current length, cannot beat the worst
        hypothesis. ``"never"``: the same test at ``max_tokens`` when ``length_penalty > 0``.
    num_return_sequences : int
        Best hypotheses returned, ``1 <= num_return_sequences <= num_beams``.
    max_tokens : int
        Maximum new tokens, ``>= 1``.
    stop_token_ids : tuple[int, ...]
        Extra token ids that finish a hypothesis (like EOS).
    stop : tuple[str, ...]
        Strings that finish a hypothesis as soon as its text contains one (the candidate is
        ranked like an EOS candidate); its text ends before the stop string, its token ids
        keep the token that completed it.
    ignore_eos : bool
        EOS does not finish a hypothesis.
    renormalize_logprobs : bool
        With a grammar: score tokens with log-probs renormalised over the allowed tokens
        instead of the model's log-probs. No effect without a grammar.
    """

    num_beams: int = 4
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    num_return_sequences: int = 1
    max_tokens: int = 16
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    renormalize_logprobs: bool = False

    def __post_init__(self) -> None:
        if not _is_int(self.num_beams) or self.num_beams < 1:
            raise _invalid("num_beams", self.num_beams, "must be an int >= 1")
        penalty = self.length_penalty
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)):
            raise _invalid("length_penalty", penalty, "must be a finite real number")
        if not math.isfinite(penalty):
            raise _invalid("length_penalty", penalty, "must be a finite real number")
        mode = self.early_stopping
        if not (isinstance(mode, bool) or (isinstance(mode, str) and mode == "never")):
            raise _invalid("early_stopping", self.early_stopping, "must be True, False or 'never'")
        n = self.num_return_sequences
        if not _is_int(n) or not 1 <= n <= self.num_beams:
            raise _invalid(
                "num_return_sequences", n, f"must be an int in [1, num_beams={self.num_beams}]"
            )
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise _invalid("max_tokens", self.max_tokens, "must be an int >= 1")
        stop_ids = tuple(self.stop_token_ids)
        if not all(_is_int(t) and t >= 0 for t in stop_ids):
            raise _invalid("stop_token_ids", self.stop_token_ids, "must be ints >= 0")
        object.__setattr__(self, "stop_token_ids", stop_ids)
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if not all(isinstance(x, str) and x for x in stop):
            raise _invalid("stop", self.stop, "must be non-empty strings")
        object.__setattr__(self, "stop", stop)
        for name in ("ignore_eos", "renormalize_logprobs"):
            if not isinstance(getattr(self, name), bool):
                raise _invalid(name, getattr(self, name), "must be a bool")

    def finishing_token_ids(self, eos_token_ids: Collection[int]) -> frozenset[int]:
        """Token ids that finish a hypothesis: EOS (unless ``ignore_eos``) and stop ids."""
        eos = () if self.ignore_eos else tuple(eos_token_ids)
        return frozenset(eos) | frozenset(self.stop_token_ids)


@dataclass
class BeamHypothesis:
    """A finished beam: ``score`` is length-normalised, ``cumulative_logprob`` the raw sum."""

    score: float
    cumulative_logprob: float
    num_tokens: int  # generated tokens (the normalisation length)
    payload: Any = None  # the caller's record of the tokens (e.g. token ids, finish reason)


@dataclass
class Candidates:
    """The step's top-K continuations, best first; ``-inf`` ones already dropped."""

    scores: torch.Tensor  # (K,) float32 cumulative log-probs
    beam_indices: list[int]  # index of the parent among the live beams
    token_ids: list[int]

    def __len__(self) -> int:
        return len(self.token_ids)


@dataclass
class StepResult:
    """What one step decided: surviving candidates (ranks, in order) and new hypotheses."""

    running_ranks: list[int]
    finished_ranks: list[int]  # ranks that entered the pool this step (may be evicted later)
    is_done: bool


@dataclass
class BeamSearchState:
    """Per-prompt beam search state.

    Parameters
    ----------
    params : BeamSearchParams
        The request's settings.
    max_tokens : int
        Resolved maximum of new tokens (``params.max_tokens`` capped by the model length).
    num_eos_token_ids : int
        Number of EOS ids (transformers keeps ``max(2, 1 + num_eos) * num_beams`` candidates).
    """

    params: BeamSearchParams
    max_tokens: int
    num_eos_token_ids: int = 1
    running_scores: torch.Tensor = field(default_factory=lambda: torch.zeros(1))  # (B,)
    num_generated: int = 0
    hypotheses: list[BeamHypothesis] = field(default_factory=list)  # best first
    is_done: bool = False

    @property
    def num_candidates(self) -> int:
        """K: candidates kept per step."""
        return max(2, 1 + self.num_eos_token_ids) * self.params.num_beams

    @property
    def num_live_beams(self) -> int:
        """Beams running into the next step."""
        return int(self.running_scores.shape[0])

    def top_candidates(self, log_probs: torch.Tensor) -> Candidates:
        """The best ``K`` continuations of the live beams.

        ``log_probs`` is ``(B, V)`` float32 (``-inf`` where a grammar disallows a token), one
        row per live beam in order.
        """
        num_beams, vocab_size = log_probs.shape
        if num_beams != self.num_live_beams:
            raise RequestError(
                f"beam search step got {num_beams} log-prob rows for {self.num_live_beams} beams"
            )
        scores = log_probs + self.running_scores.to(log_probs.device)[:, None]  # (B, V)
        flat = scores.reshape(-1)
        top_scores, top_indices = torch.topk(flat, min(self.num_candidates, flat.numel()))
        top_scores, top_indices = top_scores.cpu(), top_indices.cpu()
        num_finite = int(torch.isfinite(top_scores).sum())
        indices = top_indices[:num_finite].tolist()
        return Candidates(
            top_scores[:num_finite],
            [i // vocab_size for i in indices],
            [i % vocab_size for i in indices],
        )

    def advance(
        self,
        candidates: Candidates,
        is_stop: Callable[[int], bool],
        make_payload: Callable[[int, str], Any],
    ) -> StepResult:
        """Apply one step's candidates.

        Parameters
        ----------
        candidates : Candidates
            From `top_candidates`.
        is_stop : callable
            ``rank -> bool``: does candidate ``rank`` end with a stop (EOS, stop id, grammar
            terminated)? Called lazily, in rank order, only where the answer matters.
        make_payload : callable
            ``(rank, finish_reason) -> payload`` for candidates entering the hypothesis pool
            (``finish_reason`` is ``"stop"`` or ``"length"``).
        """
        if self.is_done:
            raise RequestError("beam search step on a finished group")
        num_beams = self.params.num_beams
        at_length = self.num_generated + 1 >= self.max_tokens
        running: list[int] = []
        finished: list[int] = []
        reasons: dict[int, str] = {}
        for rank in range(len(candidates)):
            if rank >= num_beams and (at_length or len(running) == num_beams):
                break
            stops = is_stop(rank)
            if stops or at_length:
                if rank < num_beams:  # only the top num_beams may become hypotheses
                    finished.append(rank)
                    reasons[rank] = "stop" if stops else "length"
            elif len(running) < num_beams:
                running.append(rank)
        length = self.num_generated + 1
        normalised = candidates.scores / (length**self.params.length_penalty)  # float32
        new = [
            BeamHypothesis(
                float(normalised[rank]),
                float(candidates.scores[rank]),
                length,
                make_payload(rank, reasons[rank]),
            )
            for rank in finished
        ]
        # the pool keeps the best num_beams (earlier entries first among equal scores)
        pool = sorted(self.hypotheses + new, key=lambda h: -h.score)[:num_beams]
        self.hypotheses = pool
        self.running_scores = candidates.scores[running].clone()
        self.num_generated = length
        self.is_done = not running or self._cannot_improve()
        return StepResult(running, finished, self.is_done)

    def _cannot_improve(self) -> bool:
        """transformers' stopping rule once ``num_beams`` hypotheses exist."""
        params = self.params
        if len(self.hypotheses) < params.num_beams:
            return False
        if params.early_stopping is True:
            return True
        if params.early_stopping == "never" and params.length_penalty > 0.0:
            best_length = self.max_tokens
        else:
            best_length = self.num_generated
        best_possible = self.running_scores[:1] / (best_length**params.length_penalty)
        worst = torch.tensor([min(h.score for h in self.hypotheses)], dtype=torch.float32)
        return not bool((best_possible > worst).any())

    def best(self, num: int) -> list[BeamHypothesis]:
        """The ``num`` best hypotheses, best first."""
        return self.hypotheses[:num]


def beam_log_probs(
    logits: torch.Tensor, bitmask: torch.Tensor | None = None, renormalize: bool = False
) -> torch.Tensor:
    """Per-beam token log-probs ``(B, V)`` float32, ``-inf`` where ``bitmask`` disallows.

    Without ``renormalize`` the model's log-probs are masked (transformers applies logits
    processors after ``log_softmax``); with it the masked logits are normalised.
    """
    logits = logits.float()
    if bitmask is None:
        return torch.log_softmax(logits, dim=-1)
    if renormalize:
        masked = logits.clone()
        apply_token_bitmask_inplace(masked, bitmask.to(logits.device))
        log_probs = torch.log_softmax(masked, dim=-1)
    else:
        log_probs = torch.log_softmax(logits, dim=-1)
        apply_token_bitmask_inplace(log_probs, bitmask.to(logits.device))
    empty = ~torch.isfinite(log_probs).any(dim=-1)
    if bool(empty.any()):
        rows = empty.nonzero().flatten().tolist()
        raise DeadEndError(f"beam search: the grammar allows no token for beam rows {rows}")
    return log_probs


BatchLogitsFn = Callable[[Sequence[Sequence[int]]], torch.Tensor]


def beam_search_reference(
    logits_fn: BatchLogitsFn,
    prompt_token_ids: Sequence[int],
    params: BeamSearchParams,
    *,
    eos_token_ids: Collection[int],
    grammar: Grammar | None = None,
) -> list[BeamHypothesis]:
    """Beam search for one prompt over any batched model; the oracle for the engine.

    Parameters
    ----------
    logits_fn : callable
        ``list of token id lists -> (B, V)`` next-token logits after each list.
    prompt_token_ids : Sequence[int]
        The prompt (non-empty).
    params : BeamSearchParams
        Settings; ``params.max_tokens`` is used as is.
    eos_token_ids : Collection[int]
        Ids that finish a hypothesis (unless ``params.ignore_eos``).
    grammar : Grammar, optional
        Constrain every beam (one matcher per beam; a terminated matcher finishes it).

    Returns
    -------
    list[BeamHypothesis]
        The best ``num_return_sequences`` hypotheses; ``payload`` is
        ``(generated token ids, finish_reason)``.
    """
    if not prompt_token_ids:
        raise RequestError("the prompt is empty")
    state = BeamSearchState(params, params.max_tokens, len(tuple(eos_token_ids)))
    stop_ids = params.finishing_token_ids(eos_token_ids)
    beams: list[list[int]] = [[]]
    matchers = [grammar.matcher()] if grammar is not None else None
    bitmask = None
    while not state.is_done:
        logits = logits_fn([list(prompt_token_ids) + b for b in beams])  # (B, V)
        if matchers is not None:
            bitmask = allocate_token_bitmask(len(beams), logits.shape[-1])
            for row, matcher in enumerate(matchers):
                matcher.fill_bitmask(bitmask, row)
        log_probs = beam_log_probs(logits, bitmask, params.renormalize_logprobs)
        beams, matchers = _reference_step(state, beams, matchers, log_probs, stop_ids)
    return state.best(params.num_return_sequences)


class CandidateMatchers:
    """Lazily forked matchers of candidates: the parent beam's matcher plus the new token.

    Parameters
    ----------
    parent_matchers : Sequence or None
        One matcher per live beam (None: unconstrained, every query answers "no grammar").
    candidates : Candidates
        The step's candidates.
    """

    def __init__(self, parent_matchers: Sequence[Matcher] | None, candidates: Candidates) -> None:
        self.parent_matchers = parent_matchers
        self.candidates = candidates
        self._forks: dict[int, Matcher] = {}

    def matcher(self, rank: int) -> Matcher | None:
        """The matcher after candidate ``rank``'s token (forked once, then cached)."""
        if self.parent_matchers is None:
            return None
        if rank not in self._forks:
            token_id = self.candidates.token_ids[rank]
            matcher = self.parent_matchers[self.candidates.beam_indices[rank]].fork()
            if not matcher.accept_token(token_id):
                raise DeadEndError(
                    f"beam search: the grammar rejected token {token_id} that its mask allowed"
                )
            self._forks[rank] = matcher
        return self._forks[rank]

    def is_terminated(self, rank: int) -> bool:
        """True if candidate ``rank``'s grammar is complete after its token."""
        matcher = self.matcher(rank)
        return matcher is not None and matcher.is_terminated()


def _reference_step(
    state: BeamSearchState,
    beams: list[list[int]],
    matchers: list[Matcher] | None,
    log_probs: torch.Tensor,
    stop_ids: frozenset[int],
) -> tuple[list[list[int]], list[Matcher] | None]:
    candidates = state.top_candidates(log_probs)
    forks = CandidateMatchers(matchers, candidates)

    def is_stop(rank: int) -> bool:
        return candidates.token_ids[rank] in stop_ids or forks.is_terminated(rank)

    def extend(rank: int) -> list[int]:
        return beams[candidates.beam_indices[rank]] + [candidates.token_ids[rank]]

    result = state.advance(candidates, is_stop, lambda rank, reason: (extend(rank), reason))
    new_beams = [extend(rank) for rank in result.running_ranks]
    if matchers is None:
        return new_beams, None
    return new_beams, [forks.matcher(rank) for rank in result.running_ranks]
