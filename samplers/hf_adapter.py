"""`FormcastLogitsProcessor`: formcast sampling stages inside transformers' ``generate``.

The only samplers module that imports transformers (it is not imported by the package
``__init__``). It applies formcast's penalties, logit bias, ``min_tokens`` ban, an optional
per-row grammar bitmask, temperature and truncation, and returns the processed scores;
``generate`` then samples (``do_sample=True``) or takes the argmax. Grammar matchers drive it
through ``bitmask_fn(input_ids) -> bitmask``, so samplers never imports grammar.

Disable transformers' own warpers when using it (``temperature=1.0, top_k=0, top_p=1.0``),
otherwise they run again on the already-processed scores.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import torch
from transformers import LogitsProcessor

from formcast.samplers.batch import SamplingBatch
from formcast.samplers.inputs import SamplerInputError
from formcast.samplers.params import SamplingParams
from formcast.samplers.sampler import Sampler

BitmaskFn = Callable[[torch.LongTensor], "torch.Tensor | None"]


class FormcastLogitsProcessor(LogitsProcessor):
    """transformers ``LogitsProcessor`` running formcast's processing stages.

    Parameters
    ----------
    params : SamplingParams | Sequence[SamplingParams]
        One for every row, or one per row of ``input_ids`` (``batch * num_return_sequences``).
    eos_token_ids : Collection[int]
        EOS ids, masked while a row has fewer than ``params.min_tokens`` new tokens.
    bitmask_fn : Callable[[torch.LongTensor], torch.Tensor | None] | None
        Called with the full ``input_ids`` (B, L) each step; returns an int32
        (B, ceil(V / 32)) bitmask (bit ``i % 32`` of word ``i // 32`` = token ``i`` allowed) or
        None for "no constraint this step".
    prompt_length : int | None
        Length of the (padded) prompt in ``input_ids``; by default the length seen at the
        first call. Tokens after it are "output" for frequency / presence / min_tokens.

    Notes
    -----
    A greedy ``params`` (temperature 0) gets penalties, bias and mask only; use it with
    ``do_sample=False``. The returned scores are float32.
    """

    def __init__(
        self,
        params: SamplingParams | Sequence[SamplingParams],
        eos_token_ids: Collection[int] = (),
        bitmask_fn: BitmaskFn | None = None,
        prompt_length: int | None = None,
    ) -> None:
        if isinstance(params, SamplingParams):
            self.params: SamplingParams | tuple[SamplingParams, ...] = params
        else:
            self.params = tuple(params)
            if not all(isinstance(p, SamplingParams) for p in self.params):
                raise SamplerInputError("params must be SamplingParams or a sequence of them")
        self.eos_token_ids = tuple(int(t) for t in eos_token_ids)
        self.bitmask_fn = bitmask_fn
        self.prompt_length = prompt_length
        self.sampler = Sampler()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        """Process ``scores`` (B, V) given ``input_ids`` (B, L); returns new float32 scores."""
        num_rows, vocab_size = scores.shape
        if self.prompt_length is None:
            self.prompt_length = input_ids.shape[1]
        if isinstance(self.params, SamplingParams):
            row_params = [self.params] * num_rows
        elif len(self.params) == num_rows:
            row_params = list(self.params)
        else:
            raise SamplerInputError(
                f"FormcastLogitsProcessor got {len(self.params)} SamplingParams for {num_rows} rows"
            )
        # token ids as host lists (one copy): the batch's sparse edits are built on the host
        # and moved to the scores' device, whatever device input_ids live on
        prompt = input_ids[:, : self.prompt_length].tolist()
        output = input_ids[:, self.prompt_length :].tolist()
        batch = SamplingBatch.build(
            row_params,
            prompt,
            output,
            vocab_size,
            self.eos_token_ids,
            device=scores.device,
        )
        bitmask = None if self.bitmask_fn is None else self.bitmask_fn(input_ids)
        if bitmask is not None:  # matchers fill host memory; the kernels read the scores' device
            bitmask = bitmask.to(scores.device, non_blocking=True)
        return self.sampler.process_logits(scores, batch, bitmask)
