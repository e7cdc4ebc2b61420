"""ModelRunner: owns the model and the KV cache; turns scheduled spans into one forward pass.

Step tensors: the spans' token ids and positions concatenated ``(T,)`` (decodes first, longest
context first, then short spans on a cached prefix, so the attention can batch them), the slot
of each new token, block tables.
The runner returns float32 logits only for the positions asked for, in the scheduled order:
``num_logits`` rows per span, for the span's last ``num_logits`` positions; the final hidden
states of those rows stay in ``last_hidden`` (Medusa heads read them, no second forward).

A span may end with the nodes of a token tree (``execute(trees=...)``, Medusa speculation):
node ``i`` of a tree of ``N`` nodes is stored at position ``prefix_len + i`` of the cache but
sits at rotary position ``prefix_len - 1 + depth[i]``, and attends to the prefix and its
ancestors only (`AttentionMetadata.build(trees=...)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from formcast.engine.attention.metadata import AttentionMetadata, is_decode_like
from formcast.engine.attention.torch_backend import TorchAttention
from formcast.engine.config import EngineConfig
from formcast.engine.decode_graphs import DecodeGraphs
from formcast.engine.memory_profile import CudaReadings, KVBudget, choose_kv_budget
from formcast.engine.models.config import ModelConfig
from formcast.engine.models.weights import build_model
from formcast.engine.scheduler import ScheduledSeq
from formcast.samplers.batch import to_device


class ModelRunner:
    """Runs the model over a scheduled step against the paged KV cache.

    Decode steps run through `DecodeGraphs` when ``EngineConfig.compile_decode`` is on.

    Parameters
    ----------
    folder : Path
        Hugging Face style model folder.
    model_config : ModelConfig
        The model's architecture.
    config : EngineConfig
        Engine settings (``max_model_len`` must already be resolved).
    """

    decode_graphs: DecodeGraphs | None = None  # prepared decode forwards (compile_decode)

    def __init__(self, folder: Path, model_config: ModelConfig, config: EngineConfig) -> None:
        self.config = config
        self.model_config = model_config
        self.device = torch.device(config.device)
        if self.device.type == "cuda" and self.device.index is not None:
            # kernels, streams and plain "cuda" tensors default to the current device
            torch.cuda.set_device(self.device)
        self.dtype = config.torch_dtype
        self.block_size = config.block_size
        sizes_from_profile = (
            self.device.type == "cuda"
            and config.num_kv_blocks is None
            and config.kv_cache_memory_bytes is None
        )
        # device memory before the weights: the profile counts what this engine adds
        readings = CudaReadings.start(self.device) if sizes_from_profile else None
        self.model = build_model(
            folder, model_config, self.dtype, self.device, max_positions=config.max_model_len
        )
        if config.attention_backend == "triton":
            from formcast.engine.attention.triton_backend import TritonAttention

            self.backend = TritonAttention()
        else:
            self.backend = TorchAttention()
        for layer in self.model.model.layers:
            layer.self_attn.backend = self.backend
        self.last_hidden: torch.Tensor | None = None  # (sum num_logits, hidden) of the last step
        # on CUDA a warm-up step runs `execute` here, on a temporary cache: whatever
        # `execute` reads must be set up above this line
        self.kv_budget = self._num_kv_blocks(readings)
        self.num_kv_blocks = self.kv_budget.num_blocks
        mc = model_config
        # static decode buffers pad with a scratch block past the ones the block manager owns
        is_static = config.compile_decode and config.attention_backend == "triton"
        # (layers, K/V, Hkv, blocks, block_size, D)
        self.kv_cache = torch.zeros(
            mc.num_hidden_layers,
            2,
            mc.num_key_value_heads,
            self.num_kv_blocks + int(is_static),
            self.block_size,
            mc.head_dim,
            dtype=self.dtype,
            device=self.device,
        )
        for i, layer in enumerate(self.model.model.layers):
            layer.self_attn.k_cache = self.kv_cache[i, 0]
            layer.self_attn.v_cache = self.kv_cache[i, 1]
        if config.compile_decode:
            self.decode_graphs = DecodeGraphs(
                self.model,
                config.max_num_seqs,
                is_static=is_static,
                scratch_block=self.num_kv_blocks,
                max_blocks_per_seq=-(-config.max_model_len // self.block_size),
                block_size=self.block_size,
            )
            self.decode_graphs.warm_up()

    @property
    def bytes_per_block(self) -> int:
        """KV bytes of one block across all layers."""
        mc = self.model_config
        element = torch.empty(0, dtype=self.dtype).element_size()
        return (
            mc.num_hidden_layers
            * 2
            * mc.num_key_value_heads
            * mc.head_dim
            * self.block_size
            * element
        )

    def _num_kv_blocks(self, readings: CudaReadings | None) -> KVBudget:
        """The KV cache size: explicit, profiled on CUDA (``readings`` taken before the
        weights loaded), or the CPU default; see ``formcast.engine.memory_profile``."""
        return choose_kv_budget(self, readings)

    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        """Execute copy-on-write block copies ``(src, dst)`` in every layer."""
        if not copies:
            return
        src = torch.tensor([c[0] for c in copies], device=self.device)
        dst = torch.tensor([c[1] for c in copies], device=self.device)
        self.kv_cache[:, :, :, dst] = self.kv_cache[:, :, :, src]

    @torch.inference_mode()
    def copy_slots(self, src_slots: torch.Tensor, dst_slots: torch.Tensor) -> None:
        """Copy the K/V of cache slots ``src_slots (n,)`` to ``dst_slots (n,)`` in every layer."""
        mc = self.model_config
        flat = self.kv_cache.view(mc.num_hidden_layers, 2, mc.num_key_value_heads, -1, mc.head_dim)
        src = src_slots.to(self.device)
        flat[:, :, :, dst_slots.to(self.device)] = flat[
            :, :, :, src
        ]  # gathered first: overlap-safe

    @torch.inference_mode()
    def execute(
        self,
        scheduled: list[ScheduledSeq],
        copies: list[tuple[int, int]] = (),
        trees: Mapping[int, tuple[Sequence[int], torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """Run one step; return float32 logits ``(sum num_logits, V)`` in scheduled order.

        The sum may be 0 (only mid-prefill chunks): the KV cache is still written and the
        result has no rows.

        ``trees``: ``seq_id -> (depths (N,), ancestor_mask (N, N) bool)`` for spans ending
        with a token tree's ``N`` nodes.
        """
        self.copy_blocks(list(copies))

        # decodes first (longest context first), then short spans on a cached prefix
        # (jump-forward), then the other multi-token spans
        def sort_key(i: int) -> tuple[int, int]:
            n = scheduled[i].num_new_tokens
            context = scheduled[i].seq.num_cached_tokens + n
            kind = 0 if n == 1 else 1 if is_decode_like(n, context) else 2
            return kind, -context

        order = sorted(range(len(scheduled)), key=sort_key)
        input_ids: list[int] = []
        query_lens: list[int] = []
        context_lens: list[int] = []
        block_tables: list[list[int]] = []
        for i in order:
            item = scheduled[i]
            start = item.seq.num_cached_tokens
            end = start + item.num_new_tokens
            input_ids.extend(item.seq.token_ids[start:end])
            query_lens.append(item.num_new_tokens)
            context_lens.append(end)
            block_tables.append(item.seq.block_table)
        tree_spans = [
            (rank, trees[scheduled[i].seq.seq_id])
            for rank, i in enumerate(order)
            if trees and scheduled[i].seq.seq_id in trees
        ]
        meta = AttentionMetadata.build(
            block_tables,
            context_lens,
            query_lens,
            self.block_size,
            self.device,
            for_torch_path=self.config.attention_backend == "torch",
            trees=[(rank, ancestors) for rank, (_, ancestors) in tree_spans] or None,
        )
        qlen = np.asarray(query_lens)
        ctx = np.asarray(context_lens)
        qstart = np.concatenate([[0], np.cumsum(qlen)])
        seq_of_token = np.repeat(np.arange(len(order)), qlen)
        positions = np.arange(int(qstart[-1])) - qstart[seq_of_token] + (ctx - qlen)[seq_of_token]
        for rank, (depths, _) in tree_spans:
            # node i: rotary position prefix_len - 1 + depth[i] (root = last committed token)
            num_nodes = len(depths)
            prefix = int(ctx[rank]) - num_nodes
            end = int(qstart[rank + 1])
            positions[end - num_nodes : end] = prefix - 1 + np.asarray(depths)
        # logit rows: the last num_logits tokens of each span, in scheduled order; a step of
        # mid-prefill chunks only (a prompt longer than the token budget) asks for none
        end_of = {i: int(qstart[rank + 1]) for rank, i in enumerate(order)}
        rows = [
            row
            for i, item in enumerate(scheduled)
            for row in range(end_of[i] - item.num_logits, end_of[i])
        ]
        # one non-blocking copy from pinned memory (see to_device); int64 always, also when
        # ``rows`` is empty (an empty float array would be no index)
        token_ids, token_positions, row_ids = to_device(
            [
                np.asarray(input_ids, dtype=np.int64),
                positions.astype(np.int64, copy=False),
                np.asarray(rows, dtype=np.int64),
            ],
            self.device,
        )
        graphs = self.decode_graphs
        bucket = None if graphs is None else graphs.bucket_for(meta, len(input_ids))
        if bucket is None:
            hidden = self.model(token_ids, token_positions, meta)
        else:
            hidden = graphs.run(token_ids, token_positions, meta, bucket)
        self.last_hidden = hidden[row_ids]
        return self.model.compute_logits(self.last_hidden)
