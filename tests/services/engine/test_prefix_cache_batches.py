"""The prefix cache's batch paths (whole prompts admitted, committed and released at once) against
the same operations done one block at a time: equal state, equal eviction order, under any mix."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from services.engine.prefix_cache import PrefixCache, _Holding


class OneBlockAtATime:
    """The cache's rules written block by block: the reference for the batch paths."""

    def __init__(self, capacity: int, host: int) -> None:
        self.cache = PrefixCache(capacity, 4, host)

    def held(self, hashes: list[int]) -> int:
        held, c = 0, self.cache
        for h in hashes:
            if h not in c._refs and h not in c.host.blocks:
                break
            held += 1
        return held

    def admit(self, seq: str, hashes: list[int], total: int) -> int | None:
        c = self.cache
        hit = self.held(hashes[:total])
        on_device = [h in c._refs for h in hashes[:hit]]
        loaded = on_device.count(False)
        if total - hit + loaded > c.free_blocks + c.evictable_blocks - sum(h in c._evictable for h in hashes[:hit]):
            return None
        for h, present in zip(hashes[:hit], on_device):
            if present:
                c._ref(h)
        c._reserve(total - hit + loaded)
        c._private_blocks -= loaded
        for h, present in zip(hashes[:hit], on_device):
            if not present:
                c._refs[h] = 1
                c.host.touch(h)
        c._holdings[seq] = _Holding(list(hashes[:hit]), total - hit, loaded)
        return hit

    def commit(self, seq: str, hashes: list[int], upto: int) -> None:
        c = self.cache
        holding = c._holdings[seq]
        while len(holding.published) < upto:
            h = hashes[len(holding.published)]
            holding.private -= 1
            c._private_blocks -= 1
            if h in c._refs:
                c._ref(h)
            else:
                c._refs[h] = 1
            holding.published.append(h)

    def release(self, seq: str) -> None:
        c = self.cache
        holding = c._holdings.pop(seq)
        c._private_blocks -= holding.private
        for h in reversed(holding.published):
            c._refs[h] -= 1
            if c._refs[h] == 0:
                c._evictable[h] = None


def _state(cache: PrefixCache):
    return (dict(cache._refs), list(cache._evictable), list(cache.host.blocks), cache._private_blocks,
            cache.evictions, {k: (v.published, v.private, v.loaded) for k, v in cache._holdings.items()})


# A sequence's blocks: a shared stem (chain hashes 0..7, shared between sequences) then its own,
# sometimes a block twice (a hash collision) to reach the one-at-a-time fallbacks.
prompts = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 6), st.booleans()), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(prompts, st.integers(6, 40), st.sampled_from([0, 8]))
def test_batch_paths_leave_the_state_one_block_at_a_time_leaves(plan, capacity, host):
    batch, reference = PrefixCache(capacity, 4, host), OneBlockAtATime(capacity, host)
    live: list[tuple[str, list[int]]] = []
    for n, (stem, own, twice) in enumerate(plan):
        seq = f"s{n}"
        hashes = list(range(stem)) + [1000 * (n + 1) + i for i in range(own)]
        if twice and hashes:
            hashes.append(hashes[-1])
        total = len(hashes) + 1
        assert batch.held_prefix_blocks(hashes) == reference.held(hashes)
        hit = batch.admit(seq, hashes, total)
        assert hit == reference.admit(seq, hashes, total)
        if hit is not None:
            batch.commit(seq, hashes, len(hashes))
            reference.commit(seq, hashes, len(hashes))
            live.append((seq, hashes))
        if len(live) > 2 or (n % 3 == 2 and live):
            gone, _ = live.pop(0)
            batch.release(gone)
            reference.release(gone)
        assert _state(batch) == _state(reference.cache)
