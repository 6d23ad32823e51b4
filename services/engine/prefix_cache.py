"""Block prefix cache: chained block hashes, reference counts, LRU eviction.

KV memory is counted in blocks of `block_size` tokens. A block is either free,
held privately by one sequence (being filled), or published under its chain
hash so later sequences with the same prefix reuse it. Published blocks that no
sequence references are evictable, least recently released first. The policy
are in docs/engine.md ("Prefix cache"); the capacity formula, kv_capacity_blocks, is in
services/engine/sizing.py ("Capacity").
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from itertools import compress, islice, takewhile
from dataclasses import dataclass, field

from services.engine.block_hashes import DEFAULT_BLOCK_SIZE, block_hashes, extend_block_hashes
from services.engine.host_tier import HostTier
from services.types import TokenId

__all__ = ["DEFAULT_BLOCK_SIZE", "PrefixCache", "block_hashes", "extend_block_hashes"]


@dataclass(slots=True)
class _Holding:
    published: list[int] = field(default_factory=list)  # block hashes this sequence references, in prefix order
    private: int = 0  # blocks reserved for this sequence that are not published (yet)
    loaded: int = 0  # of the published ones, blocks its admission loaded from the host tier


class PrefixCache:
    """KV block accounting for one instance. Invariant: used + evictable + free == capacity.

    With `host_blocks` > 0, a block evicted from device memory is kept in a host-memory tier
    (LRU, `host_blocks` long) and a later hit there is loaded back (docs/engine.md, "Host tier").
    """

    def __init__(self, capacity_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE, host_blocks: int = 0) -> None:
        if capacity_blocks <= 0 or block_size <= 0 or host_blocks < 0:
            raise ValueError(
                f"capacity ({capacity_blocks}) and block size ({block_size}) must be positive, "
                f"host blocks ({host_blocks}) 0 or more"
            )
        self.host = HostTier(host_blocks)
        self.capacity_blocks = capacity_blocks
        self.block_size = block_size
        self._refs: dict[int, int] = {}  # published hash -> sequences referencing it
        self._evictable: OrderedDict[int, None] = OrderedDict()  # published, unreferenced; oldest first
        self._holdings: dict[str, _Holding] = {}
        self._private_blocks = 0
        self.evictions = 0

    @property
    def cached_blocks(self) -> int:
        """Published blocks a later sequence can hit, referenced or not."""
        return len(self._refs)

    @property
    def evictable_blocks(self) -> int:
        return len(self._evictable)

    @property
    def used_blocks(self) -> int:
        return len(self._refs) - len(self._evictable) + self._private_blocks

    @property
    def free_blocks(self) -> int:
        """Blocks holding nothing; `available_blocks` adds the evictable ones."""
        return self.capacity_blocks - self.used_blocks - len(self._evictable)

    @property
    def available_blocks(self) -> int:
        return self.capacity_blocks - self.used_blocks

    @property
    def host_capacity_blocks(self) -> int:
        return self.host.capacity_blocks

    @property
    def host_cached_blocks(self) -> int:
        return len(self.host.blocks)

    @property
    def host_evictions(self) -> int:
        return self.host.evictions

    def held_prefix_blocks(self, hashes: list[int]) -> int:
        """Leading blocks of `hashes` held in device memory or in the host tier."""
        # Runs of device hits and host hits counted in C: a 64K-token prompt is 4096 blocks.
        held, refs, host, end = 0, self._refs, self.host.blocks, len(hashes)
        while held < end:
            held += _run_length(refs, hashes, held)
            if held == end or hashes[held] not in host:
                break
            held += _run_length(host, hashes, held)
        return held

    def held_prefix_tokens(self, hashes: list[int]) -> int:
        """Tokens of the longest prefix of `hashes` held here (full blocks only). No side effects."""
        return self.held_prefix_blocks(hashes) * self.block_size

    def match(self, token_ids: list[TokenId]) -> int:
        """Cached prefix tokens of `token_ids` (full blocks only). No side effects."""
        return self.held_prefix_tokens(block_hashes(token_ids, self.block_size))

    def holds(self, seq_id: str) -> bool:
        return seq_id in self._holdings

    def admit(self, seq_id: str, hashes: list[int], total_blocks: int, max_hit_blocks: int | None = None) -> int | None:
        """Reference the cached prefix of `hashes` and reserve the rest of `total_blocks` for `seq_id`.

        Returns the number of prefix blocks hit, or None (and changes nothing) when the
        reservation does not fit even after evicting every unreferenced block.
        """
        if seq_id in self._holdings:
            raise ValueError(f"sequence {seq_id!r} already holds KV blocks")
        limit = total_blocks if max_hit_blocks is None else min(max_hit_blocks, total_blocks)
        hit = self.held_prefix_blocks(hashes[:limit])
        prefix = hashes[:hit]
        on_device = list(map(self._refs.__contains__, prefix))
        loaded = on_device.count(False)  # host-tier hits need device blocks to load into
        reclaimed_by_hit = sum(map(self._evictable.__contains__, prefix))
        private = total_blocks - hit
        if private + loaded > self.free_blocks + self.evictable_blocks - reclaimed_by_hit:
            return None
        # Protects them from the eviction _reserve may do below.
        self._ref_all(list(compress(prefix, on_device)) if loaded else prefix)
        self._reserve(private + loaded)
        self._private_blocks -= loaded
        if loaded:
            for block_hash in compress(prefix, map(operator.not_, on_device)):
                self._refs[block_hash] = 1  # loaded back; the host copy stays (HiCache keeps both)
                self.host.touch(block_hash)
        self._holdings[seq_id] = _Holding(list(prefix), private, loaded)
        return hit

    def held_blocks(self, seq_id: str) -> int:
        """Device blocks a sequence holds: its published prefix plus its private reservation."""
        holding = self._holdings[seq_id]
        return len(holding.published) + holding.private

    def loaded_blocks(self, seq_id: str) -> int:
        """Blocks its admission loaded from the host tier."""
        return self._holdings[seq_id].loaded

    def allocate(self, seq_id: str, blocks: int) -> bool:
        """Reserve `blocks` more private blocks for a sequence already admitted; False if they do not fit."""
        holding = self._holdings[seq_id]
        if blocks > self.free_blocks + self.evictable_blocks:
            return False
        self._reserve(blocks)
        holding.private += blocks
        return True

    def commit(self, seq_id: str, hashes: list[int], upto_blocks: int) -> None:
        """Publish the sequence's computed blocks up to `upto_blocks`, turning private blocks into cached ones."""
        holding = self._holdings[seq_id]
        published = holding.published
        start = len(published)
        if upto_blocks <= start:
            return
        count = min(upto_blocks - start, holding.private)
        new = hashes[start : start + count]
        refs = self._refs
        # A 64K-token prompt commits thousands of blocks at once: unshared ones (the usual case) go
        # in as one dict update; a block another sequence computed meanwhile is shared, in order.
        fresh = dict.fromkeys(new, 1)
        if len(fresh) == len(new) and refs.keys().isdisjoint(fresh):
            refs.update(fresh)
        else:
            evictable = self._evictable
            for block_hash in new:
                held = refs.get(block_hash)
                if held is None:
                    refs[block_hash] = 1
                else:  # computed concurrently by another sequence: share it, free ours
                    if held == 0:
                        del evictable[block_hash]
                    refs[block_hash] = held + 1
        published.extend(new)
        holding.private -= len(new)
        self._private_blocks -= len(new)
        if len(published) < upto_blocks:
            raise ValueError(f"sequence {seq_id!r} commits block {len(published)} it never reserved")

    def published_blocks(self, seq_id: str) -> int:
        return len(self._holdings[seq_id].published)

    def release(self, seq_id: str) -> None:
        """Drop a sequence's blocks: private ones become free, published ones evictable once unreferenced."""
        holding = self._holdings.pop(seq_id, None)
        if holding is None:
            return
        self._private_blocks -= holding.private
        refs, evictable = self._refs, self._evictable
        # Tail first, so that eviction (oldest first) drops a chain's tail before its head.
        tail_first = holding.published[::-1]
        if len(set(tail_first)) == len(tail_first):  # each block once (chain hashes): counts in C
            left = [count - 1 for count in map(refs.__getitem__, tail_first)]
            refs.update(zip(tail_first, left))
            for block_hash in compress(tail_first, map(operator.not_, left)):
                evictable[block_hash] = None  # OrderedDict.update is slower than this loop
            return
        for block_hash in tail_first:
            count = refs[block_hash] - 1
            refs[block_hash] = count
            if not count:
                evictable[block_hash] = None

    def _ref_all(self, hashes: list[int]) -> None:
        """`_ref` each of `hashes`, in order."""
        refs, evictable = self._refs, self._evictable
        counts = list(map(refs.__getitem__, hashes))
        after = dict(zip(hashes, [count + 1 for count in counts]))
        if len(after) != len(hashes):  # a block twice: one at a time
            for block_hash in hashes:
                self._ref(block_hash)
            return
        for block_hash in compress(hashes, map(operator.not_, counts)):
            del evictable[block_hash]
        refs.update(after)

    def _ref(self, block_hash: int) -> None:
        count = self._refs[block_hash]
        if count == 0:
            del self._evictable[block_hash]
        self._refs[block_hash] = count + 1

    def _reserve(self, blocks: int) -> None:
        shortfall = blocks - self.free_blocks
        for _ in range(max(shortfall, 0)):
            victim, _ = self._evictable.popitem(last=False)
            del self._refs[victim]
            self.evictions += 1
            self.host.touch(victim)  # demoted, not lost, when there is a host tier
        self._private_blocks += blocks


def _run_length(table, hashes: list[int], start: int) -> int:
    """How many of hashes[start:] in a row are keys of `table`."""
    return len(list(takewhile(table.__contains__, islice(hashes, start, None))))
