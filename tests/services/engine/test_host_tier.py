"""The host-memory prefix tier (docs/engine.md, "Host tier"): demotion, hits, loads and their cost."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings, strategies as st

from services.engine.batch import Chunk, StepBatch
from services.engine.host_tier import HostTier
from services.engine.prefix_cache import PrefixCache, block_hashes
from services.engine.roofline import RooflineClock
from tests.services.engine.conftest import RecordingClock, collect, fresh, prompt

BS = 4


def fill(cache: PrefixCache, seq_id: str, ids: list[int]) -> list[int]:
    hashes = block_hashes(ids, BS)
    assert cache.admit(seq_id, hashes, -(-len(ids) // BS)) is not None
    cache.commit(seq_id, hashes, len(hashes))
    cache.release(seq_id)
    return hashes


def test_evicted_blocks_stay_in_host_memory_and_hit_there():
    cache = PrefixCache(4, BS, host_blocks=8)
    old = fill(cache, "old", list(range(16)))  # 4 blocks: the whole device
    fill(cache, "new", list(range(100, 116)))  # evicts all of "old" from the device
    assert cache.evictions == 4 and cache.host_cached_blocks == 4
    assert cache.held_prefix_blocks(old) == 4  # still held: in host memory
    assert cache.admit("again", old, 4) == 4
    assert cache.loaded_blocks("again") == 4  # each came back over PCIe
    assert cache.used_blocks == 4


def test_without_a_host_tier_eviction_loses_the_prefix():
    cache = PrefixCache(4, BS)
    old = fill(cache, "old", list(range(16)))
    fill(cache, "new", list(range(100, 116)))
    assert cache.held_prefix_blocks(old) == 0


def test_the_host_tier_is_bounded_and_least_recent_goes_first():
    cache = PrefixCache(2, BS, host_blocks=2)
    first = fill(cache, "a", list(range(8)))
    second = fill(cache, "b", list(range(100, 108)))
    fill(cache, "c", list(range(200, 208)))  # pushes "a" down to host, "b" to host, "a" out
    assert cache.held_prefix_blocks(second) == 2 and cache.held_prefix_blocks(first) == 0
    assert cache.host_evictions == 2


async def test_a_host_hit_is_loaded_inside_the_first_step_and_counted(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock, kv_capacity_blocks=8, block_size=16, host_cache_blocks=64)
    ids = prompt(96)
    await collect(engine.submit(fresh("a", ids, generate=1)))
    await collect(engine.submit(fresh("b", prompt(96, salt=3), generate=1)))  # pushes "a" to host memory
    clock.batches.clear()
    _, finished = await collect(engine.submit(fresh("a2", ids, generate=1)))
    assert finished.stats.cache_hit_tokens == 80 and finished.stats.host_hit_tokens > 0
    assert clock.batches[0].host_load_tokens == finished.stats.host_hit_tokens
    assert engine.stats().host_cache_hit_tokens == finished.stats.host_hit_tokens


def test_a_host_load_costs_its_pcie_time_overlapped_with_the_step():
    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    plain = clock.step_seconds(StepBatch(chunks=(Chunk(512, 8192),)))
    tokens = 60000
    loaded = clock.step_seconds(StepBatch(chunks=(Chunk(512, 8192),), host_load_tokens=tokens))
    load_s = tokens * clock.model.kv_bytes_per_token / clock.gpu.pcie_bandwidth_Bps  # 7.9 GB at 64 GB/s
    assert loaded == max(plain, load_s) + load_s / clock.model.num_layers
    assert loaded < plain + load_s  # overlapped, not added


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6), st.lists(st.lists(st.integers(0, 12), max_size=10), max_size=8))
def test_touching_a_batch_leaves_what_touching_each_block_in_turn_leaves(capacity, batches):
    """Including a block dropped for room earlier in the same batch and then touched again."""
    tier, reference, dropped = HostTier(capacity), OrderedDict(), 0
    for batch in batches:
        tier.touch_all(batch)
        for block_hash in batch if capacity else ():  # the rule, one block at a time
            reference[block_hash] = None
            reference.move_to_end(block_hash)
            if len(reference) > capacity:
                reference.popitem(last=False)
                dropped += 1
        assert list(tier.blocks) == list(reference)
        assert tier.evictions == dropped
