"""What the engine hands back: finished request outputs and streaming deltas."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    """One completion of a request (``n > 1`` requests have several).

    ``logprobs`` (when asked) holds, per generated token, ``{token_id: logprob}`` for the
    chosen token and the top ``SamplingParams.logprobs`` alternatives.
    """

    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None
    logprobs: list[dict[int, float]] | None = None
    stop_reason: str | int | None = None  # the stop string or stop token id that ended it
    # grammar requests: True iff the text is a complete string of the grammar (False: an
    # unfinished structure, e.g. cut by max_tokens); None without a grammar
    is_grammar_complete: bool | None = None
    num_forced_tokens: int = 0  # tokens appended by jump-forward (not sampled)
    # beam search and score requests: sum of the tokens' log-probs; beam search: that sum /
    # length ** length_penalty (transformers' ``sequences_scores``); None for sampled completions
    cumulative_logprob: float | None = None
    beam_score: float | None = None
    # score requests (`LLM.add_score_request`): log-probability that the model stops right
    # after this continuation (any EOS token)
    stop_logprob: float | None = None


@dataclass
class RequestOutput:
    """The result of one request; ``text`` / ``token_ids`` / ... are those of completion 0.

    ``finish_reason`` is ``"stop"`` (EOS, stop token or stop string, or the grammar
    terminated), ``"length"`` (``max_tokens`` or ``max_model_len``) or ``"abort"``. With a
    grammar, check ``is_grammar_complete``: a ``"length"`` output is usually an unfinished
    structure.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_prompt_tokens: int = 0
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Text of the first completion."""
        return self.outputs[0].text

    @property
    def token_ids(self) -> list[int]:
        """Generated token ids of the first completion."""
        return self.outputs[0].token_ids

    @property
    def finish_reason(self) -> str | None:
        """Why the first completion ended (None while running)."""
        return self.outputs[0].finish_reason

    @property
    def logprobs(self) -> list[dict[int, float]] | None:
        """Per-token logprobs of the first completion (None unless asked)."""
        return self.outputs[0].logprobs

    @property
    def is_grammar_complete(self) -> bool | None:
        """Whether the first completion is a complete string of its grammar (None: no grammar)."""
        return self.outputs[0].is_grammar_complete


@dataclass
class StreamDelta:
    """New tokens and text of one completion produced by one engine step."""

    request_id: str
    index: int
    token_ids: list[int]
    text: str
    finish_reason: str | None
    logprobs: list[dict[int, float]] | None = None
    # set on the last delta when the request has a grammar (as CompletionOutput's)
    is_grammar_complete: bool | None = None

    @property
    def finished(self) -> bool:
        """True on the completion's last delta."""
        return self.finish_reason is not None
