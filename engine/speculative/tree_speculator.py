"""TreeSpeculator: Medusa tree speculation inside the engine step (propose, fit, verify).

One engine step with ``SpeculativeConfig(method="medusa")``:

1. ``propose``: a sequence whose last computed position ``t`` left its final hidden state
   ``h_t`` (recorded from the previous step, no extra forward) gets the heads' top-k
   candidates for positions ``t + 2, t + 3, ...`` (all sequences in one heads call), and the
   static topology (`TreeTopology`, depth adapted per sequence) is expanded into a
   `DraftTree` below the root, the last committed token. Each node is admitted along its
   path by `_PathGuard`: the grammar matcher accepts it (a rejected node is pruned with its
   subtree), one bitmask row is filled per node (the state after it), jump-forward text
   after a node becomes forced nodes (free drafts), stop conditions end a path; the matcher
   is rolled back to the committed state. The nodes are appended to ``seq.token_ids`` so the
   scheduler gives one span: the uncached committed tokens, then the ``N`` nodes.
2. ``fit_plan``: the span gets ``num_logits = N + 1`` (root and every node) and
   ``is_verification``; ``trees`` tells the runner each node's depth (rotary position
   ``prefix_len - 1 + depth``) and ancestor mask (tree attention).
3. ``verify``: the target's rows are processed like the sampler does; greedy rows follow the
   argmax down the tree, sampled rows use recursive rejection sampling (exact), or Medusa's
   typical acceptance when explicitly configured (lossy). The accepted path's K/V are
   copied to consecutive cache slots in every layer, the cache is truncated
   (``BlockManager.truncate_inplace``) and the path plus the final token are committed
   through the shared `Speculator._emit` (the engine's `Postprocessor`: stop checks,
   matcher, jump-forward), exactly like a chain proposal. The hidden state of the last
   accepted node feeds the next proposal.

Sequences that were sampled by a plain step record their hidden state too, so speculation
(re)starts one step after prefill, a pause or a preemption. Jump-forward tokens appended
after the final token shift the heads: with ``u`` committed tokens after ``t``, the root's
children come from head ``u - 1``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from formcast.decoding.speculative.acceptance import AcceptanceTracker
from formcast.decoding.speculative.draft_tree import (
    DEFAULT_TREE_CHOICES,
    DraftTree,
    TreeTopology,
    build_tree,
)
from formcast.decoding.speculative.spec_config import SpeculativeConfig
from formcast.decoding.speculative.tree_verifier import (
    DEFAULT_POSTERIOR_ALPHA,
    DEFAULT_POSTERIOR_THRESHOLD,
    TreeVerdict,
    verify_tree_greedy,
    verify_tree_sampled,
    verify_tree_typical,
)
from formcast.decoding.speculative.verifier import Proposal, Verdict
from formcast.engine.outputs import StreamDelta
from formcast.engine.scheduler import SchedulerOutput
from formcast.engine.sequence import Sequence
from formcast.engine.speculative.chain_speculator import (
    MAX_FORCED_PER_PROPOSAL,
    EngineParts,
    ProposalState,
    Speculator,
    mark_verification,
)
from formcast.engine.speculative.medusa_heads import MedusaHeads, default_medusa_heads_path
from formcast.errors import EngineConfigError, EngineError
from formcast.grammar import allocate_token_bitmask


@dataclass
class _TreeState:
    """One sequence's tree in the current step."""

    seq: Sequence
    committed_len: int
    tree: DraftTree
    root_row: int  # bitmask row of the distribution after the root
    logits_start: int = 0


class _PathGuard:
    """Admits tree tokens along the current path: grammar, bitmask rows, stop rules."""

    def __init__(self, speculator: TreeSpeculator, seq: Sequence) -> None:
        self.speculator = speculator
        self.seq = seq
        self.matcher_steps: list[bool] = []

    def enter(self, token_id: int, is_forced: bool) -> int | None:
        seq = self.seq
        if not 0 <= token_id < self.speculator.llm.vocab_size:
            raise EngineError(f"Medusa heads proposed token id {token_id} outside the vocabulary")
        matcher = seq.matcher
        if matcher is not None and not matcher.accept_token(token_id):
            if is_forced:
                raise EngineError(
                    f"request {seq.request_id!r}: grammar rejected its own jump-forward "
                    f"token {token_id}"
                )
            return None
        self.matcher_steps.append(matcher is not None)
        seq.token_ids.append(token_id)
        return self.speculator._new_row(seq)

    def leave(self) -> None:
        self.seq.token_ids.pop()
        if self.matcher_steps.pop():
            self.seq.matcher.rollback(1)

    def forced_after(self) -> list[int]:
        seq = self.seq
        if not seq.jump_forward or seq.matcher is None:
            return []
        return self.speculator.llm.postprocessor.forced_token_ids(seq)

    def can_extend(self) -> bool:
        return not self.speculator.llm.postprocessor.stops_after(self.seq, self.seq.token_ids[-1])


class TreeSpeculator(Speculator):
    """Medusa tree speculation for one `LLM` (see module docstring).

    Parameters
    ----------
    llm : EngineParts
        The engine.
    config : SpeculativeConfig
        ``method="medusa"`` settings.
    """

    def __init__(self, llm: EngineParts, config: SpeculativeConfig) -> None:
        super().__init__(llm, config)
        self.heads = self._load_heads(llm, config)
        choices = config.medusa_tree if config.medusa_tree is not None else DEFAULT_TREE_CHOICES
        self.topology = TreeTopology(choices)
        if self.topology.max_rank > self.heads.num_subset_tokens:
            raise EngineConfigError(
                f"SpeculativeConfig.medusa_tree uses rank {self.topology.max_rank - 1}, beyond "
                f"the {self.heads.num_subset_tokens} tokens the heads can predict"
            )
        max_depth = min(self.topology.depth, self.heads.num_heads, config.num_draft_tokens)
        span_overhead = self.tracker.span_overhead
        # the adaptive count is the tree depth; a level costs about as many rows as it has
        # nodes, so the per-level cost is scaled by the tree's mean width
        width = self.topology.num_nodes / self.topology.depth
        self.tracker = AcceptanceTracker(
            max_depth,
            config.adaptive,
            config.draft_cost * width,
            span_overhead,
            config.acceptance_decay,
            config.probe_interval,
        )
        self.max_depth = max_depth
        self._bitmask = allocate_token_bitmask(
            config.max_batch_size * (self.topology.num_nodes + 1), llm.vocab_size
        )
        self._hidden: dict[int, tuple[torch.Tensor, int]] = {}  # seq_id -> (h_t, t)
        self._tree_states: dict[int, _TreeState] = {}
        self.heads_seconds = 0.0

    @staticmethod
    def _load_heads(llm: EngineParts, config: SpeculativeConfig) -> MedusaHeads:
        model = llm.runner.model
        lm_head = model.lm_head.weight if model.lm_head is not None else None
        if lm_head is None:
            lm_head = model.model.embed_tokens.weight
        heads = config.medusa_heads
        if heads is None:
            heads = default_medusa_heads_path(llm.model_path)
            if heads is None:
                raise EngineConfigError(
                    "SpeculativeConfig.medusa_heads=None: no shipped Medusa heads for model "
                    f"{llm.model_path}; train some (formcast train-medusa) and pass the file"
                )
        if isinstance(heads, (str, os.PathLike)):
            heads = MedusaHeads.load(
                heads, lm_head, dtype=llm.runner.dtype, device=llm.runner.device
            )
        if heads.hidden_size != llm.model_config.hidden_size:
            raise EngineConfigError(
                f"SpeculativeConfig.medusa_heads: hidden size {heads.hidden_size} differs from "
                f"the model's {llm.model_config.hidden_size}"
            )
        return heads

    # -- 1. propose ------------------------------------------------------------------------

    def propose(self) -> None:
        """Append a token tree to every running sequence that speculates this step."""
        begin = time.perf_counter()
        self._tree_states = {}
        self.trees = None
        step = self._begin_step()
        if step is None:
            return
        running, budget, free_blocks = step
        bm = self.llm.block_manager
        chosen = []  # (seq, head_offset, depth, max_nodes)
        for seq in running:
            record = self._hidden.get(seq.seq_id)
            if record is None or not self._can_speculate(seq):
                continue
            position = record[1]
            head_offset = seq.num_tokens - 2 - position
            if seq.num_cached_tokens != position + 1 or not 0 <= head_offset < self.max_depth:
                continue
            depth = min(self.tracker.num_drafts(seq.seq_id), self.max_depth - head_offset)
            if depth <= 0:
                continue
            can_force = seq.jump_forward and seq.matcher is not None
            max_nodes = self.topology.num_nodes + (MAX_FORCED_PER_PROPOSAL if can_force else 0)
            max_nodes = min(max_nodes, budget, self.llm.config.max_model_len - seq.num_tokens)
            if max_nodes <= 0:
                continue
            need = bm.num_blocks_to_grow(seq, seq.num_uncached_tokens + max_nodes)
            if need > free_blocks:
                continue
            free_blocks -= need
            budget -= max_nodes
            chosen.append((seq, head_offset, depth, max_nodes))
        if not chosen:
            self.stats.propose_seconds += time.perf_counter() - begin
            return
        heads_begin = time.perf_counter()
        candidates = self._candidates([seq for seq, *_ in chosen])  # (B, K, k)
        self.heads_seconds += time.perf_counter() - heads_begin
        for b, (seq, head_offset, depth, max_nodes) in enumerate(chosen):
            committed_len = seq.num_tokens
            root_row = self._new_row(seq)
            tree = build_tree(
                self.topology.truncated(depth),
                candidates[b],
                head_offset,
                _PathGuard(self, seq),
                max_nodes,
            )
            if len(seq.token_ids) != committed_len:
                raise EngineError(f"sequence {seq.seq_id}: tree guard left tokens behind")
            if tree.num_drafts == 0:
                continue
            seq.token_ids.extend(tree.token_ids)
            self._tree_states[seq.seq_id] = _TreeState(seq, committed_len, tree, root_row)
        self.stats.propose_seconds += time.perf_counter() - begin

    def _candidates(self, seqs: list[Sequence]) -> list[list[list[int]]]:
        """Every head's top-k token ids for each sequence, ``(B, K, k)`` nested lists."""
        hidden = torch.stack([self._hidden[seq.seq_id][0] for seq in seqs])  # (B, H)
        top = self.heads.top_candidates(hidden, self.topology.max_rank)  # (K, B, k)
        return top.permute(1, 0, 2).tolist()

    def _new_row(self, seq: Sequence) -> int:
        """A bitmask row holding the mask of ``seq``'s matcher now (unfilled if none)."""
        row = self._num_rows
        if row >= self._bitmask.shape[0]:
            grown = allocate_token_bitmask(2 * self._bitmask.shape[0], self.llm.vocab_size)
            grown[:row] = self._bitmask[:row]
            self._bitmask = grown
        self._num_rows += 1
        if seq.matcher is not None:
            seq.matcher.fill_bitmask(self._bitmask, row)
        return row

    def _release_finished(self) -> None:
        super()._release_finished()
        live = {seq.seq_id for seq in self.llm.scheduler.running}
        live.update(seq.seq_id for seq in self.llm.scheduler.waiting)
        for seq_id in [s for s in self._hidden if s not in live]:
            del self._hidden[seq_id]

    # -- 2. fit the plan -------------------------------------------------------------------

    def fit_plan(self, plan: SchedulerOutput) -> None:
        """Mark tree spans for verification; drop the trees of sequences not scheduled."""
        scheduled = set()
        trees = {}
        for item in plan.scheduled:
            state = self._tree_states.get(item.seq.seq_id)
            if state is None:
                continue
            seq = item.seq
            mark_verification(item, len(state.tree))
            trees[seq.seq_id] = (state.tree.depths, state.tree.ancestor_mask())
            scheduled.add(seq.seq_id)
        for seq_id in [s for s in self._tree_states if s not in scheduled]:
            state = self._tree_states.pop(seq_id)
            del state.seq.token_ids[state.committed_len :]
        self.trees = trees or None

    # -- 3. verify -------------------------------------------------------------------------

    def verify(self, plan: SchedulerOutput, logits: torch.Tensor) -> list[StreamDelta]:
        """Verify every tree span of ``plan``; record hidden states for the next proposals."""
        hidden = self.llm.runner.last_hidden  # (rows, H), aligned with `logits`
        states: list[_TreeState] = []
        row = 0
        for item in plan.scheduled:
            seq = item.seq
            if item.is_verification:
                state = self._tree_states[seq.seq_id]
                state.logits_start = row
                seq.num_cached_tokens += item.num_new_tokens
                seq.num_steps += 1
                states.append(state)
            elif item.num_logits and seq.num_cached_tokens == seq.num_tokens:
                # a plain step sampled this sequence: h at its last computed position
                self._record_hidden(seq, hidden[row + item.num_logits - 1])
            row += item.num_logits
        self.trees = None
        if not states:
            return []
        begin = time.perf_counter()
        processed, raw = self._process(states, logits)
        # exact sampling distributions of every row, in one call (greedy rows: unused)
        is_sampled = any(not s.seq.sampling_params.is_greedy for s in states)
        probs = torch.softmax(processed, dim=-1) if is_sampled else processed
        deltas = []
        start = 0
        for state in states:
            count = len(state.tree) + 1
            verdict = self._judge_tree(
                state, processed[start : start + count], probs[start : start + count]
            )
            is_processed = self.llm.sampler.reports_processed(state.seq.sampling_params)
            rows = (processed if is_processed else raw)[start : start + count]
            deltas.append(self._apply(state, verdict, rows, hidden))
            start += count
        self._tree_states = {}
        self.stats.verify_seconds += time.perf_counter() - begin
        return deltas

    def _record_hidden(self, seq: Sequence, h: torch.Tensor) -> None:
        """Keep ``h`` (the last computed position's hidden state) for ``seq`` and for the
        ``n > 1`` siblings forked from it this step (same tokens up to that position)."""
        position = seq.num_cached_tokens - 1
        record = (h.clone(), position)
        self._hidden[seq.seq_id] = record
        for other in self.llm.requests[seq.request_id].seqs:
            if (
                other is not seq
                and other.num_cached_tokens == seq.num_cached_tokens
                and other.seq_id not in self._hidden
                and other.token_ids[: position + 1] == seq.token_ids[: position + 1]
            ):
                self._hidden[other.seq_id] = record

    def _process(
        self, states: list[_TreeState], logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Processed and raw logits of every state's root and node rows ``(sum N + 1, V)``."""
        row_ids, params, prompts, outputs, mask_rows = [], [], [], [], []
        for state in states:
            seq, tree = state.seq, state.tree
            committed = seq.token_ids[seq.num_prompt_tokens : state.committed_len]
            paths: list[list[int]] = []  # output tokens after each node
            for node in range(-1, len(tree)):
                if node < 0:
                    path = []
                else:
                    parent = tree.parents[node]
                    path = (paths[parent + 1] if parent >= 0 else []) + [tree.token_ids[node]]
                paths.append(path)
                row_ids.append(state.logits_start + node + 1)
                params.append(seq.sampling_params)
                prompts.append(seq.prompt_token_ids)
                outputs.append(committed + path)
            mask_rows.append(state.root_row)
            mask_rows.extend(tree.mask_rows)
        raw = logits[torch.tensor(row_ids, dtype=torch.long, device=logits.device)]  # (R, V)
        processed = self._process_rows(
            raw,
            states,
            (params, prompts, outputs),
            mask_rows,
            lambda state: [state.root_row, *state.tree.mask_rows],
            "Medusa tree verification",
        )  # (R, V)
        return processed, raw

    def _judge_tree(
        self, state: _TreeState, processed: torch.Tensor, probs: torch.Tensor
    ) -> TreeVerdict:
        """Greedy, exact or typical verdict from the rows ``(N + 1, V)`` of one tree."""
        seq = state.seq
        if seq.sampling_params.is_greedy:
            return verify_tree_greedy(state.tree, processed.argmax(dim=-1).tolist())
        if self.config.acceptance == "typical":
            threshold = self.config.posterior_threshold
            alpha = self.config.posterior_alpha
            return verify_tree_typical(
                state.tree,
                probs,
                seq.generator,
                DEFAULT_POSTERIOR_THRESHOLD if threshold is None else threshold,
                DEFAULT_POSTERIOR_ALPHA if alpha is None else alpha,
            )
        return verify_tree_sampled(state.tree, probs, seq.generator)

    def _apply(
        self, state: _TreeState, verdict: TreeVerdict, raw: torch.Tensor, hidden: torch.Tensor
    ) -> StreamDelta:
        """Move the accepted path's K/V into place, then emit it like a chain proposal."""
        seq, tree = state.seq, state.tree
        path = verdict.path
        self._move_kv(seq, [state.committed_len + n for n in path], state.committed_len)
        proposal = Proposal()
        sample_rows = []  # raw rows of the path's drafts, then the final token's (logprobs)
        for node in path:
            proposal.append(tree.token_ids[node], tree.is_forced[node])
            if not tree.is_forced[node]:
                sample_rows.append(tree.parents[node] + 1)
        sample_rows.append(verdict.final_row)
        # stats count every verified node; the adaptive depth follows accepted / tree depth
        self.stats.num_verifications += 1
        self.stats.num_draft_tokens += tree.num_drafts
        self.stats.num_accepted_tokens += verdict.num_accepted
        self.tracker.update(seq.seq_id, tree.depth, verdict.num_accepted)
        chain = ProposalState(seq, state.committed_len, len(path), proposal)
        delta = self._emit(
            chain,
            Verdict(verdict.num_accepted, len(path), verdict.final_token_id),
            raw[torch.tensor(sample_rows, device=raw.device)],
        )
        if not seq.is_finished:
            h = hidden[state.logits_start + verdict.final_row].clone()
            self._hidden[seq.seq_id] = (h, state.committed_len - 1 + len(path))
        return delta

    def _move_kv(self, seq: Sequence, src_positions: list[int], first: int) -> None:
        """Copy the K/V at ``src_positions`` to positions ``first, first + 1, ...`` (all layers)."""
        moves = [(s, first + j) for j, s in enumerate(src_positions) if s != first + j]
        if not moves:
            return
        bs = self.llm.config.block_size
        table = seq.block_table
        src = torch.tensor([table[p // bs] * bs + p % bs for p, _ in moves])
        dst = torch.tensor([table[p // bs] * bs + p % bs for _, p in moves])
        self.llm.runner.copy_slots(src, dst)
