"""Draft models for speculative decoding, each with its own small paged KV cache.

Two kinds:

- **self-draft**: the target's first ``L`` decoder layers, its final norm and its LM head
  (shared weights, no copy). The layer modules are the target's, so during a draft forward
  their cache views are swapped to the draft's own cache and restored afterwards; the
  target's KV cache is never read or written by the draft. (Reading the target's cache for
  the committed tokens would save the draft's prefill but couples the two caches' block
  tables; the draft cache costs ``L / num_layers`` of the target's per token.)
- **separate draft model**: any model folder with the target's vocabulary, run by a plain
  `ModelRunner` with its own cache.

`DraftModel` keeps one *shadow* `Sequence` per target sequence: the same ``token_ids`` list,
its own block table and ``num_cached_tokens`` in the draft cache (a `BlockManager` without
prefix caching). ``logits_for`` runs every shadow's uncached tokens as one span and returns
the logits of its last position; ``rollback`` truncates a shadow after verification.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence as SequenceABC
from pathlib import Path

import torch

from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.model_runner import ModelRunner
from formcast.engine.models.config import ModelConfig
from formcast.engine.models.llama import LlamaForCausalLM
from formcast.engine.models.loader import resolve_model_path
from formcast.engine.scheduler import ScheduledSeq
from formcast.engine.sequence import Sequence
from formcast.errors import EngineConfigError


class LayerPrefixModel:
    """The first ``num_layers`` layers of a target model + its final norm and LM head.

    Callable like `LlamaForCausalLM` (``forward(input_ids, positions, meta)``,
    ``compute_logits(hidden)``); attention reads and writes ``kv_cache`` ``(L, 2, Hkv, N,
    block_size, D)`` instead of the target's cache.
    """

    def __init__(self, target: LlamaForCausalLM, num_layers: int, kv_cache: torch.Tensor) -> None:
        self.target = target
        self.layers = list(target.model.layers[:num_layers])
        self.kv_cache = kv_cache
        self.compute_logits = target.compute_logits

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, meta) -> torch.Tensor:
        """Hidden states ``(T, hidden)`` after the prefix layers and the final norm."""
        target = self.target
        h = target.model.embed_tokens(input_ids)
        cos_sin = target.rotary.cos_sin(positions, h.dtype)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            saved = attn.k_cache, attn.v_cache
            attn.k_cache, attn.v_cache = self.kv_cache[i, 0], self.kv_cache[i, 1]
            try:
                h = layer(h, cos_sin, meta)
            finally:
                attn.k_cache, attn.v_cache = saved
        return target.model.norm(h)


class SelfDraftRunner(ModelRunner):
    """A `ModelRunner` over `LayerPrefixModel` of a target runner (shares its weights)."""

    def __init__(self, target: ModelRunner, num_layers: int, num_kv_blocks: int) -> None:
        # deliberately not ModelRunner.__init__: no weights are loaded, no layer is re-bound
        self.config = target.config
        self.model_config = dataclasses.replace(target.model_config, num_hidden_layers=num_layers)
        self.device = target.device
        self.dtype = target.dtype
        self.block_size = target.block_size
        self.num_kv_blocks = num_kv_blocks
        mc = self.model_config
        # (L, K/V, Hkv, blocks, block_size, D)
        self.kv_cache = torch.zeros(
            num_layers,
            2,
            mc.num_key_value_heads,
            num_kv_blocks,
            self.block_size,
            mc.head_dim,
            dtype=self.dtype,
            device=self.device,
        )
        self.backend = target.backend
        self.model = LayerPrefixModel(target.model, num_layers, self.kv_cache)


def build_draft_runner(
    method: str,
    target: ModelRunner,
    num_layers: int | None,
    draft_model: str | None,
    num_kv_blocks: int,
) -> ModelRunner:
    """The runner of a ``"self_draft"`` or ``"draft_model"`` speculative method.

    Raises
    ------
    EngineConfigError
        ``draft_num_layers`` not below the target's layer count, or a draft model whose
        vocabulary size differs from the target's.
    """
    target_layers = target.model_config.num_hidden_layers
    if method == "self_draft":
        num_layers = num_layers if num_layers is not None else max(1, target_layers // 4)
        if num_layers >= target_layers:
            raise EngineConfigError(
                f"SpeculativeConfig.draft_num_layers={num_layers} must be below the target's "
                f"{target_layers} layers"
            )
        return SelfDraftRunner(target, num_layers, num_kv_blocks)
    folder = Path(resolve_model_path(draft_model))
    model_config = ModelConfig.from_folder(folder)
    if model_config.vocab_size != target.model_config.vocab_size:
        raise EngineConfigError(
            f"SpeculativeConfig.draft_model={draft_model!r}: vocab_size "
            f"{model_config.vocab_size} differs from the target's "
            f"{target.model_config.vocab_size}"
        )
    fields = {f.name: getattr(target.config, f.name) for f in dataclasses.fields(EngineConfig)}
    fields.update(num_kv_blocks=num_kv_blocks, kv_cache_memory_bytes=None, speculative=None)
    return ModelRunner(folder, model_config, EngineConfig(**fields))


class DraftModel:
    """A draft runner plus its shadow sequences (see module docstring).

    Parameters
    ----------
    runner : ModelRunner
        From `build_draft_runner`.
    """

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.block_manager = BlockManager(
            runner.num_kv_blocks, runner.block_size, enable_prefix_caching=False
        )
        self.shadows: dict[int, Sequence] = {}
        self.num_forwards = 0

    def shadow(self, seq: Sequence) -> Sequence:
        """The shadow of ``seq`` (created on first use), sharing its ``token_ids`` list."""
        shadow = self.shadows.get(seq.seq_id)
        if shadow is None:
            shadow = Sequence(seq.request_id, seq.prompt_token_ids, seq.sampling_params)
            self.shadows[seq.seq_id] = shadow
        shadow.token_ids = seq.token_ids
        if shadow.num_cached_tokens > len(seq.token_ids):
            self.block_manager.truncate_inplace(shadow, len(seq.token_ids))
        return shadow

    def can_extend(self, seq: Sequence, num_more: int) -> bool:
        """True if the draft cache can take ``seq``'s uncached tokens plus ``num_more``."""
        shadow = self.shadow(seq)
        need = shadow.num_uncached_tokens + num_more
        return self.block_manager.num_free_blocks >= self.block_manager.num_blocks_to_grow(
            shadow, need
        )

    def logits_for(self, seqs: SequenceABC[Sequence]) -> torch.Tensor:
        """Run each sequence's tokens missing from the draft cache; ``(B, V)`` last-position
        logits, one row per sequence in order. Every sequence must have an uncached token."""
        scheduled = []
        for seq in seqs:
            shadow = self.shadow(seq)
            num_new = shadow.num_uncached_tokens
            self.block_manager.grow_inplace(shadow, num_new)
            scheduled.append(ScheduledSeq(shadow, num_new, 1))
        logits = self.runner.execute(scheduled, self.block_manager.take_pending_copies())
        for item in scheduled:
            item.seq.num_cached_tokens += item.num_new_tokens
        self.num_forwards += 1
        return logits

    def rollback(self, seq: Sequence, num_valid_tokens: int) -> None:
        """Keep at most the first ``num_valid_tokens`` tokens of ``seq`` in the draft cache."""
        shadow = self.shadows.get(seq.seq_id)
        if shadow is not None and shadow.num_cached_tokens > num_valid_tokens:
            self.block_manager.truncate_inplace(shadow, num_valid_tokens)

    def release(self, seq_id: int) -> None:
        """Free a finished sequence's draft cache."""
        shadow = self.shadows.pop(seq_id, None)
        if shadow is not None:
            self.block_manager.free_inplace(shadow)
