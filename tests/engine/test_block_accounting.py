"""BlockManager + Scheduler without a model: block accounting under random workloads."""

from __future__ import annotations

import random

from hypothesis import event, given, settings
from hypothesis import strategies as st

from formcast.engine.block_manager import BlockManager
from formcast.engine.config import EngineConfig
from formcast.engine.scheduler import Scheduler
from formcast.engine.sequence import Sequence, SequenceStatus
from formcast.samplers import SamplingParams

PARAMS = SamplingParams(temperature=0)


def _live(scheduler: Scheduler) -> list[Sequence]:
    return list(scheduler.running) + list(scheduler.waiting)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_blocks=st.integers(6, 24),
    block_size=st.sampled_from([2, 4, 16]),
    budget=st.integers(4, 64),
    prefix_caching=st.booleans(),
)
def test_every_block_returns_to_the_pool(seed, num_blocks, block_size, budget, prefix_caching):
    rng = random.Random(seed)
    config = EngineConfig(
        max_num_seqs=6, max_num_batched_tokens=budget, block_size=block_size, device="cpu"
    )
    bm = BlockManager(num_blocks, block_size, enable_prefix_caching=prefix_caching)
    scheduler = Scheduler(config, bm)
    capacity = num_blocks * block_size
    shared_prefix = [rng.randrange(50) for _ in range(3 * block_size)]
    max_lens: dict[int, int] = {}
    num_arrivals = rng.randint(1, 12)
    for step in range(400):
        if num_arrivals and rng.random() < 0.4:
            num_arrivals -= 1
            length = rng.randint(1, max(1, capacity // 2))
            prompt = (shared_prefix if rng.random() < 0.5 else [])[:length]
            prompt = prompt + [rng.randrange(50) for _ in range(length - len(prompt))]
            seq = Sequence(f"r{step}", prompt, PARAMS)
            max_lens[seq.seq_id] = min(capacity, length + rng.randint(1, 3 * block_size))
            scheduler.add(seq)
        plan = scheduler.schedule()
        for item in plan.scheduled:  # "run the model": the spans' KV is now cached
            seq = item.seq
            seq.num_cached_tokens += item.num_new_tokens
            bm.commit_inplace(seq)
            if seq.num_cached_tokens < seq.num_tokens:
                continue
            if seq.num_tokens >= max_lens[seq.seq_id]:
                scheduler.finish(seq, "length")
                continue
            seq.append_token(rng.randrange(50))
            if rng.random() < 0.05 and len(scheduler.running) < 6:  # parallel-sampling fork
                child = Sequence(seq.request_id, seq.prompt_token_ids, PARAMS)
                child.token_ids = list(seq.token_ids[:-1]) + [rng.randrange(50)]
                bm.fork_inplace(seq, child)
                max_lens[child.seq_id] = max_lens[seq.seq_id]
                scheduler.insert_running_after(seq, [child])
        live = _live(scheduler)
        if live and rng.random() < 0.05:  # abort one, running or waiting
            scheduler.finish(rng.choice(live), "abort")
        bm.take_pending_copies()
        bm.check_invariants(_live(scheduler))
        if not scheduler.has_unfinished and not num_arrivals:
            break
    event(f"preempted: {scheduler.num_preemptions > 0}")
    for seq in _live(scheduler):
        scheduler.finish(seq, "abort")
    assert bm.num_free_blocks == num_blocks
    assert all(block.ref_count == 0 for block in bm.blocks)
    assert sorted(bm.free_block_ids) == list(range(num_blocks))


def test_copy_on_write_fork():
    bm = BlockManager(8, 4, enable_prefix_caching=True)
    parent = Sequence("a", [1, 2, 3, 4, 5, 6], PARAMS)  # 1.5 blocks
    bm.admit_inplace(parent, [])
    bm.grow_inplace(parent, 6)
    parent.num_cached_tokens = 6
    bm.commit_inplace(parent)
    child = Sequence("a", [1, 2, 3, 4, 5, 6], PARAMS)
    bm.fork_inplace(parent, child)
    assert child.block_table == parent.block_table
    assert [bm.blocks[b].ref_count for b in parent.block_table] == [2, 2]
    parent.append_token(7)
    child.append_token(8)
    # the parent writes into the shared half-full block: it gets a private copy
    assert bm.num_blocks_to_grow(parent, 1) == 1
    bm.grow_inplace(parent, 1)
    shared_full, shared_partial = child.block_table
    assert parent.block_table[0] == shared_full  # full block stays shared
    assert parent.block_table[1] != shared_partial
    assert bm.take_pending_copies() == [(shared_partial, parent.block_table[1])]
    # now the child is the partial block's only owner: it writes in place, no copy
    assert bm.num_blocks_to_grow(child, 1) == 0
    bm.grow_inplace(child, 1)
    assert bm.take_pending_copies() == []
    assert child.block_table[1] == shared_partial
    bm.check_invariants([parent, child])
    bm.free_inplace(parent)
    bm.free_inplace(child)
    assert bm.num_free_blocks == 8


def test_prefix_cache_verifies_tokens_and_evicts_lazily():
    bm = BlockManager(4, 2, enable_prefix_caching=True)
    first = Sequence("a", [1, 2, 3, 4, 5], PARAMS)
    bm.admit_inplace(first, [])
    bm.grow_inplace(first, 5)
    first.num_cached_tokens = 5
    bm.commit_inplace(first)
    bm.free_inplace(first)  # blocks keep their hashes while free
    second = Sequence("b", [1, 2, 3, 4, 9], PARAMS)
    hits = bm.match_prefix(second)
    assert len(hits) == 2
    other = Sequence("c", [1, 2, 7, 4, 9], PARAMS)
    assert len(bm.match_prefix(other)) == 1
    # allocating every free block evicts the cached ones (least recently freed last)
    hog = Sequence("d", list(range(8)), PARAMS)
    bm.admit_inplace(hog, [])
    bm.grow_inplace(hog, 8)
    assert bm.match_prefix(second) == []
    assert not bm.hash_to_block_id
    bm.free_inplace(hog)
    assert hog.status is SequenceStatus.WAITING
