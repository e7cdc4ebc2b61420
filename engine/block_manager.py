"""BlockManager: the paged KV cache's blocks, reference counts, copy-on-write and prefix cache.

Invariants (checked by ``check_invariants``):

- a block is in the free list if and only if its reference count is zero;
- every reference is a slot in some sequence's block table;
- a block with a hash holds a full block of KV whose token ids (and the hash of the prefix
  before them) are stored on the block, so a hit is verified by comparing token ids.

Prefix cache: the hash of block ``i`` of a sequence is ``hash((hash of block i-1, tokens of
block i))``, a chain, so equal hashes mean equal prefixes (verified on hit). A block whose
count drops to zero keeps its hash and KV and stays findable until it is reallocated: lazy
eviction. The free list is ordered for LRU: blocks without a hash are reused first, then
cached blocks in the order they were freed (a sequence frees its tail first, so shared
prefixes outlive their extensions).

Copy-on-write: a sequence about to write into a partly filled block it shares (after
``fork``) gets a private copy; the copy is queued in ``pending_copies`` for the model runner.
"""

from __future__ import annotations

from collections import OrderedDict

from formcast.engine.sequence import Sequence
from formcast.errors import EngineError


class Block:
    """One KV block: id, reference count, and (when full and cached) its prefix hash."""

    __slots__ = ("block_id", "ref_count", "hash", "parent_hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None
        self.parent_hash: int | None = None
        self.token_ids: tuple[int, ...] = ()


class BlockManager:
    """Allocates KV blocks to sequences.

    Parameters
    ----------
    num_blocks : int
        Blocks in the cache.
    block_size : int
        Tokens per block.
    enable_prefix_caching : bool
        Register full blocks by hash and reuse them for equal prefixes.
    watermark : float
        Fraction of blocks that admitting a new sequence must leave free.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        watermark: float = 0.0,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.watermark_blocks = int(watermark * num_blocks)
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_block_ids: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.hash_to_block_id: dict[int, int] = {}
        self.pending_copies: list[tuple[int, int]] = []  # (src, dst) block copies for the runner
        self.num_prefix_hit_tokens = 0

    @property
    def num_free_blocks(self) -> int:
        """Blocks with no reference (including evictable cached ones)."""
        return len(self.free_block_ids)

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold ``num_tokens`` tokens."""
        return -(-num_tokens // self.block_size)

    # -- allocation primitives -------------------------------------------------------------

    def _allocate_block(self) -> int:
        if not self.free_block_ids:
            raise EngineError("out of KV cache blocks (the scheduler should have prevented this)")
        block_id, _ = self.free_block_ids.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None:  # evict lazily: the cached content is overwritten now
            if self.hash_to_block_id.get(block.hash) == block_id:
                del self.hash_to_block_id[block.hash]
            block.hash, block.parent_hash, block.token_ids = None, None, ()
        block.ref_count = 1
        return block_id

    def _incref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_block_ids[block_id]
        block.ref_count += 1

    def _decref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count <= 0:
            raise EngineError(f"block {block_id} freed more often than referenced")
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_block_ids[block_id] = None
            if block.hash is None:  # worthless content: reuse first
                self.free_block_ids.move_to_end(block_id, last=False)

    # -- prefix cache ------------------------------------------------------------------------

    @staticmethod
    def chain_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
        """Hash of a full block given the hash of the blocks before it."""
        return hash((parent_hash, token_ids))

    def reset_prefix_cache(self) -> int:
        """Forget the cached content of every free block (blocks in use keep theirs: their
        sequences still read them); return how many blocks were forgotten."""
        num_forgotten = 0
        for block_id in self.free_block_ids:
            block = self.blocks[block_id]
            if block.hash is None:
                continue
            if self.hash_to_block_id.get(block.hash) == block_id:
                del self.hash_to_block_id[block.hash]
            block.hash, block.parent_hash, block.token_ids = None, None, ()
            num_forgotten += 1
        return num_forgotten

    def match_prefix(self, seq: Sequence) -> list[int]:
        """Cached blocks holding ``seq``'s leading full blocks, verified by token ids.

        At most ``num_tokens - 1`` tokens are matched: the last token is always computed so
        the step yields its logits.
        """
        if not self.enable_prefix_caching:
            return []
        matched: list[int] = []
        parent: int | None = None
        for i in range((seq.num_tokens - 1) // self.block_size):
            token_ids = seq.block_token_ids(i, self.block_size)
            h = self.chain_hash(parent, token_ids)
            block_id = self.hash_to_block_id.get(h)
            if block_id is None:
                break
            block = self.blocks[block_id]
            if block.token_ids != token_ids or block.parent_hash != parent:
                break
            matched.append(block_id)
            parent = h
        return matched

    def commit_inplace(self, seq: Sequence) -> None:
        """Register ``seq``'s blocks that became full and computed since the last commit."""
        num_full = seq.num_cached_tokens // self.block_size
        for i in range(len(seq.block_hashes), num_full):
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            token_ids = seq.block_token_ids(i, self.block_size)
            h = self.chain_hash(parent, token_ids)
            seq.block_hashes.append(h)
            if not self.enable_prefix_caching:
                continue
            block = self.blocks[seq.block_table[i]]
            if block.hash is None and h not in self.hash_to_block_id:
                block.hash, block.parent_hash, block.token_ids = h, parent, token_ids
                self.hash_to_block_id[h] = block.block_id

    # -- sequence operations ---------------------------------------------------------------

    def num_blocks_to_admit(self, seq: Sequence, hit_ids: list[int], num_new_tokens: int) -> int:
        """Free blocks admitting ``seq`` consumes: new blocks plus hits taken off the free list."""
        revived = sum(1 for b in hit_ids if self.blocks[b].ref_count == 0)
        num_cached = len(hit_ids) * self.block_size
        return revived + self.blocks_for(num_cached + num_new_tokens) - len(hit_ids)

    def can_admit(self, seq: Sequence, hit_ids: list[int], num_new_tokens: int) -> bool:
        """True if admitting leaves at least the watermark free."""
        needed = self.num_blocks_to_admit(seq, hit_ids, num_new_tokens)
        return self.num_free_blocks - needed >= self.watermark_blocks

    def admit_inplace(self, seq: Sequence, hit_ids: list[int]) -> None:
        """Give a waiting sequence its prefix-cache hits (its KV for those tokens)."""
        if seq.block_table:
            raise EngineError(f"sequence {seq.seq_id} is admitted twice")
        for block_id in hit_ids:
            self._incref(block_id)
        seq.block_table = list(hit_ids)
        seq.block_hashes = [self.blocks[b].hash for b in hit_ids]
        seq.num_cached_tokens = len(hit_ids) * self.block_size
        self.num_prefix_hit_tokens += seq.num_cached_tokens
        if seq.num_preemptions == 0:
            seq.num_prompt_hit_tokens = seq.num_cached_tokens

    def num_blocks_to_grow(self, seq: Sequence, num_new_tokens: int) -> int:
        """Blocks needed to write ``num_new_tokens`` more tokens (incl. a copy-on-write)."""
        needed = self.blocks_for(seq.num_cached_tokens + num_new_tokens) - len(seq.block_table)
        return needed + int(self._needs_copy_on_write(seq))

    def can_grow(self, seq: Sequence, num_new_tokens: int) -> bool:
        """True if the free list covers ``num_blocks_to_grow``."""
        return self.num_free_blocks >= self.num_blocks_to_grow(seq, num_new_tokens)

    def _needs_copy_on_write(self, seq: Sequence) -> bool:
        # the next write lands in a partly filled block that another sequence also reads
        offset = seq.num_cached_tokens % self.block_size
        index = seq.num_cached_tokens // self.block_size
        return offset != 0 and self.blocks[seq.block_table[index]].ref_count > 1

    def grow_inplace(self, seq: Sequence, num_new_tokens: int) -> None:
        """Make ``seq``'s block table cover its next ``num_new_tokens`` tokens."""
        if self._needs_copy_on_write(seq):
            index = seq.num_cached_tokens // self.block_size
            src = seq.block_table[index]
            dst = self._allocate_block()
            self.pending_copies.append((src, dst))
            self._decref(src)
            seq.block_table[index] = dst
        for _ in range(
            self.blocks_for(seq.num_cached_tokens + num_new_tokens) - len(seq.block_table)
        ):
            seq.block_table.append(self._allocate_block())

    def fork_inplace(self, parent: Sequence, child: Sequence) -> None:
        """Share ``parent``'s blocks with ``child`` (copy-on-write on the next divergent write)."""
        if child.block_table:
            raise EngineError(f"fork target {child.seq_id} already owns blocks")
        for block_id in parent.block_table:
            self._incref(block_id)
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.num_cached_tokens = parent.num_cached_tokens

    def free_inplace(self, seq: Sequence) -> None:
        """Drop ``seq``'s references (tail first) and reset its cache state."""
        for block_id in reversed(seq.block_table):
            self._decref(block_id)
        seq.block_table = []
        seq.block_hashes = []
        seq.num_cached_tokens = 0

    def truncate_inplace(self, seq: Sequence, num_tokens: int) -> None:
        """Roll ``seq``'s cache back to its first ``num_tokens`` tokens (rejected drafts).

        Blocks past ``ceil(num_tokens / block_size)`` are released (tail first). A kept block
        that is no longer full loses its prefix-cache entry when only ``seq`` holds it (its
        free slots are about to be overwritten by other tokens), so rejected tokens never
        serve a hit for different content. ``seq.token_ids`` is the caller's to shorten.
        """
        if not 0 <= num_tokens <= seq.num_cached_tokens:
            raise EngineError(
                f"sequence {seq.seq_id}: cannot truncate its cache to {num_tokens} tokens "
                f"(it holds {seq.num_cached_tokens})"
            )
        num_full = num_tokens // self.block_size
        for i in range(num_full, len(seq.block_hashes)):
            block = self.blocks[seq.block_table[i]]
            if block.ref_count == 1 and block.hash == seq.block_hashes[i]:
                if self.hash_to_block_id.get(block.hash) == block.block_id:
                    del self.hash_to_block_id[block.hash]
                block.hash, block.parent_hash, block.token_ids = None, None, ()
        del seq.block_hashes[num_full:]
        num_kept = self.blocks_for(num_tokens)
        for block_id in reversed(seq.block_table[num_kept:]):
            self._decref(block_id)
        del seq.block_table[num_kept:]
        seq.num_cached_tokens = num_tokens

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """Return and clear the queued copy-on-write block copies."""
        copies, self.pending_copies = self.pending_copies, []
        return copies

    def check_invariants(self, live_seqs: list[Sequence]) -> None:
        """Raise ``EngineError`` if counts, free list and block tables disagree."""
        counts = [0] * self.num_blocks
        for seq in live_seqs:
            for block_id in seq.block_table:
                counts[block_id] += 1
        for block in self.blocks:
            if block.ref_count != counts[block.block_id]:
                raise EngineError(
                    f"block {block.block_id}: ref_count {block.ref_count}, "
                    f"referenced {counts[block.block_id]} times"
                )
            if (block.ref_count == 0) != (block.block_id in self.free_block_ids):
                raise EngineError(f"block {block.block_id}: free list disagrees with ref_count")
        for h, block_id in self.hash_to_block_id.items():
            if self.blocks[block_id].hash != h:
                raise EngineError(f"prefix cache entry {h} points at a block with another hash")
