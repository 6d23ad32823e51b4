import math

import pytest
from hypothesis import given, settings, strategies as st

from services.engine.prefix_cache import PrefixCache, block_hashes
from services.engine.sizing import kv_capacity_blocks

BS = 4  # small blocks keep the token lists readable


def store(cache: PrefixCache, seq_id: str, ids: list[int]) -> list[int]:
    """Admit a sequence, compute all of it, publish its full blocks and release it."""
    hashes = block_hashes(ids, cache.block_size)
    assert cache.admit(seq_id, hashes, math.ceil(len(ids) / cache.block_size)) is not None
    cache.commit(seq_id, hashes, len(hashes))
    cache.release(seq_id)
    return hashes


def test_hit_counts_full_blocks_of_the_common_prefix_only():
    cache = PrefixCache(64, BS)
    store(cache, "a", list(range(10)))  # blocks [0..3], [4..7]; the tail 8, 9 is not a full block
    assert cache.match(list(range(10))) == 8
    assert cache.match(list(range(6)) + [99, 99, 99]) == 4
    assert cache.match([1, 0, 2, 3, 4, 5, 6, 7]) == 0
    assert cache.match(list(range(3))) == 0
    assert cache.cached_blocks == 2


def test_the_same_block_at_another_position_does_not_hit():
    cache = PrefixCache(64, BS)
    store(cache, "a", [1, 1, 1, 1, 2, 2, 2, 2])
    assert cache.match([2, 2, 2, 2]) == 0
    assert cache.match([1, 1, 1, 1, 2, 2, 2, 2]) == 8


def test_match_and_held_prefix_have_no_side_effects():
    cache = PrefixCache(4, BS)
    first = store(cache, "a", list(range(8)))
    store(cache, "b", list(range(100, 108)))
    assert cache.held_prefix_tokens(first) == 8  # a lookup must not refresh "a" in the LRU order
    assert cache.admit("c", block_hashes(list(range(200, 208)), BS), 2) == 0
    assert cache.match(list(range(8))) == 0  # "a" was the least recently released, so it went
    assert cache.match(list(range(100, 108))) == 8


def test_eviction_takes_the_least_recently_released_first():
    cache = PrefixCache(6, BS)
    store(cache, "a", list(range(8)))
    store(cache, "b", list(range(100, 108)))
    store(cache, "c", list(range(200, 208)))
    store(cache, "a2", list(range(8)))  # reusing "a" makes it recent again
    assert cache.admit("d", block_hashes(list(range(300, 308)), BS), 2) == 0
    assert cache.match(list(range(100, 108))) == 0
    assert cache.match(list(range(8))) == 8
    assert cache.match(list(range(200, 208))) == 8
    assert cache.evictions == 2


def test_a_chain_loses_its_tail_before_its_head():
    cache = PrefixCache(3, BS)
    store(cache, "a", list(range(12)))
    assert cache.admit("b", [], 1) == 0
    assert cache.match(list(range(12))) == 8


def test_referenced_blocks_are_never_evicted():
    cache = PrefixCache(4, BS)
    hashes = block_hashes(list(range(12)), BS)
    cache.admit("a", hashes, 3)
    cache.commit("a", hashes, 3)
    assert cache.admit("b", [], 2) is None  # would need one of a's blocks
    assert (cache.used_blocks, cache.free_blocks, cache.cached_blocks) == (3, 1, 3)
    assert cache.admit("b", [], 1) == 0
    assert cache.match(list(range(12))) == 12


def test_a_hit_reuses_blocks_and_reserves_only_the_rest():
    cache = PrefixCache(10, BS)
    store(cache, "a", list(range(8)))
    hashes = block_hashes(list(range(16)), BS)
    assert cache.admit("b", hashes, 4) == 2
    assert (cache.used_blocks, cache.evictable_blocks, cache.free_blocks) == (4, 0, 6)
    cache.commit("b", hashes, 4)
    cache.release("b")
    assert (cache.used_blocks, cache.evictable_blocks, cache.cached_blocks) == (0, 4, 4)


def test_the_same_blocks_computed_twice_are_stored_once():
    cache = PrefixCache(10, BS)
    hashes = block_hashes(list(range(8)), BS)
    cache.admit("a", hashes, 2)
    cache.admit("b", hashes, 2)  # nothing published yet: both compute the prefix
    cache.commit("a", hashes, 2)
    cache.commit("b", hashes, 2)
    assert (cache.cached_blocks, cache.used_blocks) == (2, 2)
    cache.release("a")
    cache.release("b")
    assert (cache.evictable_blocks, cache.free_blocks) == (2, 8)


def test_commit_beyond_the_reservation_is_refused():
    cache = PrefixCache(10, BS)
    hashes = block_hashes(list(range(12)), BS)
    cache.admit("a", hashes, 2)
    with pytest.raises(ValueError, match="never reserved"):
        cache.commit("a", hashes, 3)


def test_capacity_from_memory_weights_and_kv_size():
    hbm = 80 * 2**30
    assert kv_capacity_blocks(hbm, 0.9, 16e9, 131072, 16) == 29234
    assert kv_capacity_blocks(hbm, 0.9, 16e9, 131072, 16, tp=2) == 66098
    with pytest.raises(ValueError, match="no room for KV"):
        kv_capacity_blocks(hbm, 0.9, 80e9, 131072, 16)
    with pytest.raises(ValueError, match="utilisation"):
        kv_capacity_blocks(hbm, 1.5, 16e9, 131072, 16)


_prefixes = st.lists(st.integers(0, 2), min_size=0, max_size=16)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["admit", "commit", "release"]), st.integers(0, 3), _prefixes), max_size=40))
def test_block_accounting_invariants(operations):
    cache = PrefixCache(12, 2)
    contexts: dict[str, list[int]] = {}
    for op, who, ids in operations:
        seq_id = f"s{who}"
        if op == "admit" and seq_id not in contexts and ids:
            hashes = block_hashes(ids, 2)
            hit = cache.admit(seq_id, hashes, math.ceil(len(ids) / 2))
            if hit is not None:
                contexts[seq_id] = ids
                assert hit * 2 <= len(ids)
        elif op == "commit" and seq_id in contexts:
            hashes = block_hashes(contexts[seq_id], 2)
            cache.commit(seq_id, hashes, len(hashes))
        elif op == "release":
            cache.release(seq_id)
            contexts.pop(seq_id, None)
        assert cache.used_blocks + cache.evictable_blocks + cache.free_blocks == cache.capacity_blocks
        assert min(cache.used_blocks, cache.evictable_blocks, cache.free_blocks) >= 0
        # Every block a live sequence has published is still cached: references pin blocks.
        for held_id, held_ids in contexts.items():
            published = cache.published_blocks(held_id)
            assert cache.held_prefix_blocks(block_hashes(held_ids, 2)) >= published


def walked_prefix_blocks(cache: PrefixCache, hashes: list[int]) -> int:
    """The hit by its definition: leading blocks held on the device or in the host tier, one at a time."""
    device, host = cache.contents()[0], cache.host.blocks
    return next((i for i, h in enumerate(hashes) if h not in device and h not in host), len(hashes))


# Each request: how much of an earlier chain it shares, its own blocks, how many requests stay live,
# and how far short of its prompt its hit limit and its commit stop.
requests = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(0, 3), st.integers(0, 3)),
                    min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(requests, st.integers(4, 40), st.sampled_from([0, 1, 2, 8, 30]))
def test_held_blocks_are_a_prefix_of_every_chain_so_a_binary_search_finds_the_hit(plan, capacity, host):
    """The search relies on a held block's parent being held (docs/engine.md "Prefix cache"): under any
    mix of shared chains, hit limits, partial commits, releases, evictions and host tiers, it agrees
    with the walk."""
    cache, live, chains = PrefixCache(capacity, BS, host), [], []
    for n, (shared, own, keep, short) in enumerate(plan):
        stem = chains[n % len(chains)] if chains and n % 2 else list(range(shared))
        hashes = stem[:shared] + [1000 * (n + 1) + i for i in range(own)]
        chains.append(hashes)
        if cache.admit(f"s{n}", hashes, len(hashes) + 1, max(0, len(hashes) - short) if short else None) is not None:
            cache.commit(f"s{n}", hashes, len(hashes) - short % 2)
            live.append(f"s{n}")
        while len(live) > keep:
            cache.release(live.pop(0))
        assert [cache.held_prefix_blocks(h) for h in chains] == [walked_prefix_blocks(cache, h) for h in chains]
