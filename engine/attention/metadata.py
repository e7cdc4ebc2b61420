"""Paged attention step metadata, built once per step and shared by all layers and backends.

KV cache layout, per layer: ``k_cache, v_cache`` of shape ``(Hkv, num_blocks, block_size, D)``
(head-major, so a gather of blocks yields ``(Hkv, B, L, D)`` ready for batched matmuls).
A token at position ``p`` of a sequence with block table ``bt`` lives in slot
``bt[p // block_size] * block_size + p % block_size`` of the flat view ``(Hkv, N * bs, D)``.

One step is a ragged batch: sequence ``i`` brings ``query_len[i]`` new tokens (positions
``context_len[i] - query_len[i] .. context_len[i] - 1``) that attend causally to all
``context_len[i]`` tokens in its cache (cached prefix + the new ones, written first).
Sequences with one new token (decodes) come first in the batch, then short spans on top of a
cached prefix (jump-forward spans, speculative drafts), then the rest.

Torch path: every token of a decode or of a short span with a prefix is a "decode row": its
query attends to the first ``position + 1`` keys of its sequence, so all such rows of the
step run as a few padded batched attentions (`DecodeGroup`) instead of one call per span.
Longer spans (prompts, prefill chunks) run one attention per span (`PrefillSegment`).

Token trees (Medusa speculation): a span may end with the ``N`` nodes of a tree stored at
positions ``prefix_len .. prefix_len + N - 1`` (``build(trees=...)``). A node row attends to
the prefix and to its ancestors only (``formcast.engine.attention.tree``): in the torch path
its row of the decode-group (or segment) key mask is patched; the Triton backend recomputes
the tree rows with the tree kernel (`TreeMetadata`). Steps without trees are unchanged.

Every tensor is computed on the host (numpy) and reaches the device through one
`formcast.samplers.batch.to_device` call per step: one pinned, non-blocking copy, so building
the metadata never waits for the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from formcast.samplers.batch import to_device

MAX_SPAN_AS_DECODE_ROWS = 16  # spans up to this long (with a cached prefix) run as decode rows


def is_decode_like(query_len: int, context_len: int) -> bool:
    """True for a span the torch path runs as decode rows: short, on top of a cached prefix."""
    return query_len == 1 or (query_len <= MAX_SPAN_AS_DECODE_ROWS and context_len > query_len)


@dataclass
class DecodeGroup:
    """Decode rows ``[seq_start, seq_end)`` (query rows of the step) padded to one context
    length (torch path); each row attends to its sequence's first ``position + 1`` keys."""

    seq_start: int
    seq_end: int
    block_ids: torch.Tensor  # (n * M,) int64, block ids padded with 0
    num_blocks: int  # M: blocks per sequence after padding
    additive_mask: torch.Tensor  # (1, n, 1, M * bs) float: 0 where attended, -inf beyond length
    # the mask in other dtypes, converted once per step for all layers
    _masks: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    def additive_mask_as(self, dtype: torch.dtype) -> torch.Tensor:
        """``additive_mask`` in ``dtype`` (a 16-bit model's SDPA takes its own dtype)."""
        if dtype == self.additive_mask.dtype:
            return self.additive_mask
        found = self._masks.get(dtype)
        if found is None:
            found = self._masks[dtype] = self.additive_mask.to(dtype)
        return found


@dataclass
class PrefillSegment:
    """One multi-token span (torch path): rows ``[q_start, q_end)`` of the step."""

    q_start: int
    q_end: int
    key_slots: torch.Tensor | None  # (C,) int64 slots of the whole context; None: no prefix
    mask: torch.Tensor | None  # (n, C) bool causal mask with offset C - n; None: plain causal


@dataclass
class TreeMetadata:
    """The tree rows of a step (Triton backend): ``R`` rows of ``B`` trees."""

    rows: torch.Tensor  # (R,) int64 query rows of the step holding tree nodes
    block_tables: torch.Tensor  # (B, M) int32
    query_start_loc: torch.Tensor  # (B + 1,) int32 offsets into the R rows
    prefix_lens: torch.Tensor  # (B,) int32 committed tokens before each tree
    node_mask: torch.Tensor  # (R, Nmax) uint8 ancestors (self included) among the tree's nodes


@dataclass
class AttentionMetadata:
    """Everything attention needs about one step; built once, shared by all layers."""

    slot_mapping: torch.Tensor  # (T,) int64 cache slot of each new token
    block_tables: torch.Tensor  # (B, M) int32, padded with 0
    context_lens: torch.Tensor  # (B,) int32 cached + new tokens
    query_start_loc: torch.Tensor  # (B + 1,) int32 row offsets of each sequence's new tokens
    num_decode_seqs: int  # the first num_decode_seqs sequences have exactly one new token
    max_query_len: int
    max_context_len: int
    block_size: int
    decode_groups: list[DecodeGroup] = field(default_factory=list)
    prefill_segments: list[PrefillSegment] = field(default_factory=list)
    tree: TreeMetadata | None = None

    @classmethod
    def build(
        cls,
        block_tables: list[list[int]],
        context_lens: list[int],
        query_lens: list[int],
        block_size: int,
        device: torch.device | str,
        for_torch_path: bool = True,
        trees: list[tuple[int, torch.Tensor]] | None = None,
    ) -> AttentionMetadata:
        """Build step metadata; decodes (``query_len == 1``) must precede longer spans.

        ``trees``: ``(i, ancestor_mask (N, N) bool)`` when sequence ``i``'s span ends with the
        ``N`` nodes of a token tree (see the module docstring).
        """
        num_seqs = len(context_lens)
        max_blocks = max(len(bt) for bt in block_tables)
        tables = np.zeros((num_seqs, max_blocks), dtype=np.int64)
        for i, bt in enumerate(block_tables):
            tables[i, : len(bt)] = bt
        ctx = np.asarray(context_lens, dtype=np.int64)
        qlen = np.asarray(query_lens, dtype=np.int64)
        num_decode = int(np.argmax(qlen != 1)) if (qlen != 1).any() else num_seqs
        if (qlen[num_decode:] == 1).any():
            raise AssertionError("decode sequences must come first in the step")
        qstart = np.zeros(num_seqs + 1, dtype=np.int64)
        np.cumsum(qlen, out=qstart[1:])
        # positions of new tokens: context_len - query_len + [0, query_len)
        seq_of_token = np.repeat(np.arange(num_seqs), qlen)
        positions = np.arange(int(qstart[-1])) - qstart[seq_of_token] + (ctx - qlen)[seq_of_token]
        slots = tables[seq_of_token, positions // block_size] * block_size + positions % block_size
        # tree rows: row -> (prefix_len, allowed tree keys of that row), ancestors of a node
        # precede it, so its allowed keys all lie within its causal range
        tree_keys: dict[int, tuple[int, np.ndarray]] = {}
        host_trees = [(i, _host_bool(ancestors)) for i, ancestors in trees or ()]
        for i, anc in host_trees:
            num_nodes = anc.shape[0]
            first = int(qstart[i + 1]) - num_nodes
            prefix = int(ctx[i]) - num_nodes
            for a in range(num_nodes):
                tree_keys[first + a] = (prefix, anc[a, : a + 1])
        groups: list[_HostDecodeGroup] = []
        segments: list[_HostSegment] = []
        tree: list[np.ndarray] = []
        if for_torch_path:
            num_like = num_decode
            while num_like < num_seqs and is_decode_like(int(qlen[num_like]), int(ctx[num_like])):
                num_like += 1
            num_rows = int(qstart[num_like])  # rows of decodes and short spans, one per token
            row_seq = seq_of_token[:num_rows]
            groups = _decode_groups(
                tables[row_seq], positions[:num_rows] + 1, block_size, tree_keys
            )
            segments = _prefill_segments(tables, ctx, qlen, qstart, num_like, block_size, tree_keys)
        elif host_trees:
            tree = _tree_metadata(host_trees, tables, ctx, qstart)
        # every array of the step in one transfer: the dense four, then groups, segments, tree
        arrays: list[np.ndarray] = [
            slots,
            tables.astype(np.int32),
            ctx.astype(np.int32),
            qstart.astype(np.int32),
        ]
        for group in groups:
            arrays += [group.block_ids, group.additive_mask]
        for segment in segments:
            if segment.key_slots is not None:
                arrays += [segment.key_slots, segment.mask]
        arrays += tree
        tensors = iter(to_device(arrays, device))
        meta = cls(
            slot_mapping=next(tensors),
            block_tables=next(tensors),
            context_lens=next(tensors),
            query_start_loc=next(tensors),
            num_decode_seqs=num_decode,
            max_query_len=int(qlen.max()),
            max_context_len=int(ctx.max()),
            block_size=block_size,
        )
        meta.decode_groups = [
            DecodeGroup(g.seq_start, g.seq_end, next(tensors), g.num_blocks, next(tensors))
            for g in groups
        ]
        meta.prefill_segments = [
            PrefillSegment(seg.q_start, seg.q_end, None, None)
            if seg.key_slots is None
            else PrefillSegment(seg.q_start, seg.q_end, next(tensors), next(tensors))
            for seg in segments
        ]
        if tree:
            meta.tree = TreeMetadata(*(next(tensors) for _ in tree))
        return meta


def _host_bool(ancestors: torch.Tensor) -> np.ndarray:
    """An ancestor mask (N, N) as a host bool array (a read when it lives on a device)."""
    ancestors = ancestors.detach()
    if ancestors.device.type != "cpu":
        ancestors = ancestors.cpu()
    return ancestors.numpy().astype(bool)


@dataclass
class _HostDecodeGroup:
    """A `DecodeGroup` with host arrays, before the step's one transfer."""

    seq_start: int
    seq_end: int
    block_ids: np.ndarray
    num_blocks: int
    additive_mask: np.ndarray


@dataclass
class _HostSegment:
    """A `PrefillSegment` with host arrays, before the step's one transfer."""

    q_start: int
    q_end: int
    key_slots: np.ndarray | None
    mask: np.ndarray | None


def _tree_metadata(
    trees: list[tuple[int, np.ndarray]],
    tables: np.ndarray,
    ctx: np.ndarray,
    qstart: np.ndarray,
) -> list[np.ndarray]:
    """Host arrays of `TreeMetadata`, in its field order."""
    sizes = [int(anc.shape[0]) for _, anc in trees]
    max_nodes = max(sizes)
    node_mask = np.zeros((sum(sizes), max_nodes), dtype=np.uint8)
    rows, prefix_lens, offsets = [], [], [0]
    for (i, anc), n in zip(trees, sizes, strict=True):
        start = offsets[-1]
        node_mask[start : start + n, :n] = anc
        rows.extend(range(int(qstart[i + 1]) - n, int(qstart[i + 1])))
        prefix_lens.append(int(ctx[i]) - n)
        offsets.append(start + n)
    index = [i for i, _ in trees]
    return [
        np.asarray(rows, dtype=np.int64),
        tables[index].astype(np.int32),
        np.asarray(offsets, dtype=np.int32),
        np.asarray(prefix_lens, dtype=np.int32),
        node_mask,
    ]


def _decode_groups(
    tables: np.ndarray,
    ctx: np.ndarray,
    block_size: int,
    tree_keys: dict[int, tuple[int, np.ndarray]] | None = None,
) -> list[_HostDecodeGroup]:
    # Sequences are padded to their group's longest context; starting a new group whenever the
    # length falls below 3/4 of the group's first keeps padding waste bounded without a
    # Python-level loop over sequences inside the layers.
    groups: list[_HostDecodeGroup] = []
    start = 0
    num = len(ctx)
    while start < num:
        group_max = int(ctx[start])
        end = start + 1
        while end < num and (ctx[end] * 4 >= group_max * 3 or end - start < 4):
            group_max = max(group_max, int(ctx[end]))
            end += 1
        num_blocks = -(-group_max // block_size)
        ids = tables[start:end, :num_blocks].reshape(-1)
        length = num_blocks * block_size
        keep = np.arange(length)[None, :] < ctx[start:end, None]
        for row, (prefix, allowed) in (tree_keys or {}).items():
            if start <= row < end:
                keep[row - start, prefix : prefix + len(allowed)] = allowed
        mask = np.where(keep, 0.0, -np.inf).astype(np.float32)[None, :, None, :]
        groups.append(_HostDecodeGroup(start, end, ids.copy(), num_blocks, mask))
        start = end
    return groups


def _prefill_segments(
    tables: np.ndarray,
    ctx: np.ndarray,
    qlen: np.ndarray,
    qstart: np.ndarray,
    num_decode: int,
    block_size: int,
    tree_keys: dict[int, tuple[int, np.ndarray]] | None = None,
) -> list[_HostSegment]:
    segments = []
    for i in range(num_decode, len(ctx)):
        n, c = int(qlen[i]), int(ctx[i])
        if n == c:
            segments.append(_HostSegment(int(qstart[i]), int(qstart[i + 1]), None, None))
            continue
        pos = np.arange(c)
        key_slots = tables[i, pos // block_size] * block_size + pos % block_size
        # query row r sits at position c - n + r and sees keys 0 .. c - n + r
        mask = pos[None, :] <= (c - n + np.arange(n))[:, None]
        for r in range(n):
            if (row := int(qstart[i]) + r) in (tree_keys or {}):
                prefix, allowed = tree_keys[row]
                mask[r, prefix : prefix + len(allowed)] = allowed
        segments.append(_HostSegment(int(qstart[i]), int(qstart[i + 1]), key_slots, mask))
    return segments
