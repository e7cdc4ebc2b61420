"""DecodeGraphs: decode steps run a prepared forward, one per batch-size bucket of a ladder.

A decode step (every span one token, no token tree) of ``n`` sequences runs in the smallest
bucket ``b >= n`` of the ladder (1, 2, 4, ..., up to ``max_num_seqs``); rows ``n .. b - 1``
are padding. Larger steps, prefill and verification spans run the eager forward. Two kinds:

- **compiled** (CPU): the model's forward through ``torch.compile`` (inductor) with static
  shapes, one graph per bucket. Matmuls (``formcast::cpu_linear``) and paged attention
  (``formcast::paged_attention``, reading the step's metadata from `attention_step`) stay
  opaque; inductor fuses the norms, RoPE, SwiGLU and residual adds around them. Padding
  rows are sliced off before attention. Inductor's own kernels run on one thread (a thread
  count baked into them would fight other work when the ThreadGovernor shrinks the pool:
  0.1-0.3x under a busy core). Compiled graphs are cached on disk by inductor
  (``TORCHINDUCTOR_CACHE_DIR``), so a second start skips the C++ compile.
- **static** (Triton attention): inputs and attention metadata live in fixed buffers that each
  step overwrites in place, so the forward's tensors are the same every step. On CUDA each
  bucket's forward is captured once as a CUDA graph at warm-up and replayed (one launch per
  step instead of ~1,000); elsewhere (the CPU twin, tested under the Triton interpreter) the
  same buffers go through the eager forward. Padding rows write their K/V into a scratch
  block that no sequence owns, with context length 1, so they read nothing of the others.

Either way a bucket's first use is prepared at `warm_up` (engine start), and the time it took
is `warm_up_seconds`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from formcast.engine.attention.metadata import AttentionMetadata
from formcast.engine.attention.paged_op import attention_step
from formcast.engine.models.llama import LlamaForCausalLM

log = logging.getLogger(__name__)


def bucket_ladder(max_num_seqs: int) -> list[int]:
    """Powers of two below ``max_num_seqs``, then ``max_num_seqs`` itself."""
    ladder = []
    size = 1
    while size < max_num_seqs:
        ladder.append(size)
        size *= 2
    return [*ladder, max_num_seqs]


class DecodeGraphs:
    """Prepared decode forwards for a ladder of batch sizes (see the module docstring).

    Parameters
    ----------
    model : LlamaForCausalLM
        The model; its attention layers are already bound to the KV cache and backend.
    max_num_seqs : int
        Largest decode batch (the top of the ladder).
    is_static : bool
        Static buffers (Triton attention; CUDA graphs on CUDA) instead of a compiled forward.
    scratch_block : int
        A KV block no sequence owns (static kind): padding rows write there.
    max_blocks_per_seq : int
        Block-table width of the static buffers (``ceil(max_model_len / block_size)``).
    block_size : int
        Tokens per KV block.
    """

    def __init__(
        self,
        model: LlamaForCausalLM,
        max_num_seqs: int,
        *,
        is_static: bool,
        scratch_block: int,
        max_blocks_per_seq: int,
        block_size: int,
    ) -> None:
        self.model = model
        self.layers = [layer.self_attn for layer in model.model.layers]
        self.buckets = bucket_ladder(max_num_seqs)
        self.is_static = is_static
        self.device = model.model.embed_tokens.weight.device
        self.is_cuda_graph = is_static and self.device.type == "cuda"
        self.block_size = block_size
        self.scratch_block = scratch_block
        self.warm_up_seconds = 0.0
        self.num_runs = 0
        largest = self.buckets[-1]
        device = self.device
        # (B,) token ids and positions of the largest bucket; a bucket uses the first b rows
        self.input_ids = torch.zeros(largest, dtype=torch.long, device=device)
        self.positions = torch.zeros(largest, dtype=torch.long, device=device)
        self.forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
        if is_static:
            self.slot_mapping = torch.zeros(largest, dtype=torch.long, device=device)
            self.block_tables = torch.zeros(
                (largest, max_blocks_per_seq), dtype=torch.int32, device=device
            )  # (B, M)
            self.context_lens = torch.ones(largest, dtype=torch.int32, device=device)
            self.query_start_loc = torch.arange(largest + 1, dtype=torch.int32, device=device)
            self.metas = {b: self._static_meta(b, max_blocks_per_seq) for b in self.buckets}
            self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        else:
            # one graph per bucket: recompiles are expected, up to the ladder's length
            limit = len(self.buckets) + 8
            dynamo_config = torch._dynamo.config
            if getattr(dynamo_config, "recompile_limit", limit) < limit:
                dynamo_config.recompile_limit = limit
            # inductor's CPU kernels would bake today's OpenMP thread count into each kernel;
            # the fused pointwise work between the opaque ops is a few vectors per row, so they
            # run serially and only the matmuls and attention follow the ThreadGovernor
            self.forward = torch.compile(
                self._forward_tokens,
                dynamic=False,
                fullgraph=True,
                options={"cpp.threads": 1} if self.device.type == "cpu" else None,
            )

    def _forward_tokens(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model.forward(input_ids, positions, None)

    def _static_meta(self, bucket: int, max_blocks_per_seq: int) -> AttentionMetadata:
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:bucket],
            block_tables=self.block_tables[:bucket],
            context_lens=self.context_lens[:bucket],
            query_start_loc=self.query_start_loc[: bucket + 1],
            num_decode_seqs=bucket,
            max_query_len=1,
            max_context_len=max_blocks_per_seq * self.block_size,
            block_size=self.block_size,
        )

    def bucket_for(self, meta: AttentionMetadata, num_tokens: int) -> int | None:
        """The bucket of a step, or None when the step is not a plain decode that fits."""
        num_seqs = meta.context_lens.shape[0]
        if meta.tree is not None or meta.num_decode_seqs != num_seqs or num_tokens != num_seqs:
            return None
        for bucket in self.buckets:
            if bucket >= num_seqs:
                return bucket
        return None

    @torch.inference_mode()
    def warm_up(self) -> float:
        """Prepare every bucket (compile, or capture on CUDA) with an all-padding step."""
        started = time.perf_counter()
        for bucket in self.buckets:
            if self.is_static:
                self._fill_static(bucket, None, None, None)
                if self.is_cuda_graph:
                    self._capture(bucket)
                else:
                    self.model.forward(
                        self.input_ids[:bucket], self.positions[:bucket], self.metas[bucket]
                    )
            else:
                meta = self._padding_meta()
                with attention_step(meta, self.layers):
                    self.forward(self.input_ids[:bucket], self.positions[:bucket])
        self.warm_up_seconds = time.perf_counter() - started
        log.info(
            "decode graphs: %d buckets %s (%s) prepared in %.1f s",
            len(self.buckets),
            self.buckets,
            "CUDA graphs" if self.is_cuda_graph else "static" if self.is_static else "compiled",
            self.warm_up_seconds,
        )
        return self.warm_up_seconds

    def _padding_meta(self) -> AttentionMetadata:
        # a step with no real token: the op stores nothing and returns zeros
        empty = torch.zeros(0, dtype=torch.long, device=self.device)
        return AttentionMetadata(
            slot_mapping=empty,
            block_tables=torch.zeros((0, 1), dtype=torch.int32, device=self.device),
            context_lens=empty.int(),
            query_start_loc=torch.zeros(1, dtype=torch.int32, device=self.device),
            num_decode_seqs=0,
            max_query_len=1,
            max_context_len=1,
            block_size=self.block_size,
        )

    def _capture(self, bucket: int) -> None:
        meta = self.metas[bucket]
        ids, positions = self.input_ids[:bucket], self.positions[:bucket]
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):  # a run outside the graph first (lazy inits, autotune)
            self.model.forward(ids, positions, meta)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        pool = next(iter(self.graphs.values()))[0].pool() if self.graphs else None
        with torch.cuda.graph(graph, pool=pool):
            hidden = self.model.forward(ids, positions, meta)  # (b, hidden), graph-owned
        self.graphs[bucket] = (graph, hidden)

    def _fill_static(
        self,
        bucket: int,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor | None,
        meta: AttentionMetadata | None,
    ) -> None:
        """Write a step's ``n`` rows into the buffers and padding into rows ``n .. b - 1``."""
        num = 0 if input_ids is None else input_ids.shape[0]
        if num:
            self.input_ids[:num].copy_(input_ids, non_blocking=True)
            self.positions[:num].copy_(positions, non_blocking=True)
            self.slot_mapping[:num].copy_(meta.slot_mapping, non_blocking=True)
            self.context_lens[:num].copy_(meta.context_lens, non_blocking=True)
            width = meta.block_tables.shape[1]
            self.block_tables[:num, :width].copy_(meta.block_tables, non_blocking=True)
        # padding: token 0 at position 0, stored in the scratch block's first slot, attending
        # to that slot only
        self.input_ids[num:bucket] = 0
        self.positions[num:bucket] = 0
        self.slot_mapping[num:bucket] = self.scratch_block * self.block_size
        self.context_lens[num:bucket] = 1
        self.block_tables[num:bucket, 0] = self.scratch_block

    def run(
        self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata, bucket: int
    ) -> torch.Tensor:
        """Hidden states ``(n, hidden)`` of a decode step of ``n`` tokens in ``bucket``."""
        num = input_ids.shape[0]
        self.num_runs += 1
        if self.is_static:
            self._fill_static(bucket, input_ids, positions, meta)
            if self.is_cuda_graph:
                graph, hidden = self.graphs[bucket]
                graph.replay()
                return hidden[:num]
            hidden = self.model.forward(
                self.input_ids[:bucket], self.positions[:bucket], self.metas[bucket]
            )
            return hidden[:num]
        self.input_ids[:num].copy_(input_ids)
        self.positions[:num].copy_(positions)
        self.input_ids[num:bucket] = 0
        self.positions[num:bucket] = 0
        with attention_step(meta, self.layers):
            hidden = self.forward(self.input_ids[:bucket], self.positions[:bucket])
        return hidden[:num]
