"""The prefix cache's batch paths (whole prompts admitted, committed and released at once, counts in
numpy slots) against the same operations done one block at a time over dicts: equal state, equal
eviction order, under any mix."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from collections import OrderedDict

from services.engine.host_tier import HostTier
from services.engine.prefix_cache import PrefixCache


class OneBlockAtATime:
    """The cache's rules (docs/engine.md "Prefix cache") written block by block over dicts: the
    reference for the batch paths and their slots."""

    def __init__(self, capacity: int, host: int) -> None:
        self.capacity = capacity
        self.refs: dict[int, int] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()
        self.host = HostTier(host)
        self.holdings: dict[str, tuple[list[int], int, int]] = {}
        self.private = 0
        self.evictions = 0

    @property
    def free(self) -> int:
        return self.capacity - (len(self.refs) - len(self.evictable) + self.private) - len(self.evictable)

    def held(self, hashes: list[int]) -> int:
        held = 0
        for h in hashes:
            if h not in self.refs and h not in self.host.blocks:
                break
            held += 1
        return held

    def _ref(self, h: int) -> None:
        if self.refs[h] == 0:
            del self.evictable[h]
        self.refs[h] += 1

    def _reserve(self, blocks: int) -> None:
        for _ in range(max(0, blocks - self.free)):
            victim, _ = self.evictable.popitem(last=False)
            del self.refs[victim]
            self.evictions += 1
            self.host.touch(victim)
        self.private += blocks

    def admit(self, seq: str, hashes: list[int], total: int) -> int | None:
        hit = self.held(hashes[:total])
        on_device = [h in self.refs for h in hashes[:hit]]
        loaded = on_device.count(False)
        if total - hit + loaded > self.free + len(self.evictable) - sum(h in self.evictable for h in hashes[:hit]):
            return None
        for h, present in zip(hashes[:hit], on_device):
            if present:
                self._ref(h)
        self._reserve(total - hit + loaded)
        self.private -= loaded
        for h, present in zip(hashes[:hit], on_device):
            if not present:
                self.refs[h] = self.refs.get(h, 0) + 1
                self.host.touch(h)
        self.holdings[seq] = (list(hashes[:hit]), total - hit, loaded)
        return hit

    def commit(self, seq: str, hashes: list[int], upto: int) -> None:
        published, private, loaded = self.holdings[seq]
        while len(published) < upto:
            h = hashes[len(published)]
            private -= 1
            self.private -= 1
            if h in self.refs:
                self._ref(h)
            else:
                self.refs[h] = 1
            published.append(h)
        self.holdings[seq] = (published, private, loaded)

    def release(self, seq: str) -> None:
        published, private, _ = self.holdings.pop(seq)
        self.private -= private
        for h in reversed(published):
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.evictable[h] = None

    def state(self):
        return self.refs, list(self.evictable), list(self.host.blocks), self.private, self.evictions, self.holdings


def _state(cache: PrefixCache):
    refs, evictable, holdings = cache.contents()
    return refs, evictable, list(cache.host.blocks), cache._private_blocks, cache.evictions, holdings


# A sequence's blocks: a shared stem (chain hashes 0..7, shared between sequences) then its own,
# sometimes a block twice (a hash collision) to reach the one-at-a-time fallbacks.
prompts = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 6), st.booleans()), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(prompts, st.integers(6, 40), st.sampled_from([0, 8]))
def test_batch_paths_leave_the_state_one_block_at_a_time_leaves(plan, capacity, host):
    batch, reference = PrefixCache(capacity, 4, host), OneBlockAtATime(capacity, host)
    live: list[tuple[str, list[int]]] = []
    seen: list[list[int]] = []
    for n, (stem, own, twice) in enumerate(plan):
        seq = f"s{n}"
        hashes = list(range(stem)) + [1000 * (n + 1) + i for i in range(own)]
        if twice and hashes:
            hashes.append(hashes[-1])
        total = len(hashes) + 1
        seen.append(hashes)
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
        assert _state(batch) == reference.state()
        # The cache finds a hit by binary search; the reference walks block by block.
        assert [batch.held_prefix_blocks(h) for h in seen] == [reference.held(h) for h in seen]
