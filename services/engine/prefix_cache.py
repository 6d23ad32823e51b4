"""Block prefix cache: chained block hashes, reference counts, LRU eviction.

KV memory is counted in blocks of `block_size` tokens. A block is either free,
held privately by one sequence (being filled), or published under its chain
hash so later sequences with the same prefix reuse it. Published blocks that no
sequence references are evictable, least recently released first. The policy
are in docs/engine.md ("Prefix cache"); the capacity formula, kv_capacity_blocks, is in
services/engine/sizing.py ("Capacity"). A published block's count and place in the eviction order
live in a slot of services/engine/block_slots.py, so a prompt's blocks move together.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from itertools import compress

import numpy as np

from services.engine.block_hashes import DEFAULT_BLOCK_SIZE, block_hashes, extend_block_hashes
from services.engine.block_slots import BlockSlots, Holding
from services.engine.host_tier import HostTier
from services.engine.released_chains import ReleasedChains
from services.types import TokenId

__all__ = ["DEFAULT_BLOCK_SIZE", "PrefixCache", "block_hashes", "extend_block_hashes"]


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
        self._slot: dict[int, int] = {}  # published hash -> its slot in _blocks
        self._blocks = BlockSlots()  # each published block's reference count and eviction order
        self._released = ReleasedChains(self._blocks)  # where released prefixes' blocks are, for admissions
        self._holdings: dict[str, Holding] = {}
        self._private_blocks = 0
        self.evictions = 0

    @property
    def cached_blocks(self) -> int:
        """Published blocks a later sequence can hit, referenced or not."""
        return len(self._slot)

    @property
    def evictable_blocks(self) -> int:
        return self._blocks.evictable

    @property
    def used_blocks(self) -> int:
        return len(self._slot) - self._blocks.evictable + self._private_blocks

    @property
    def free_blocks(self) -> int:
        """Blocks holding nothing; `available_blocks` adds the evictable ones."""
        return self.capacity_blocks - len(self._slot) - self._private_blocks

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
        """Leading blocks of `hashes` held in device memory or in the host tier.

        A binary search, not a walk: what is held is closed under prefixes (a held block's parent
        is held too), so the held blocks of a chain are exactly its first ones (docs/engine.md,
        "Prefix cache": why the rules keep it so). A 64K-token prompt is 4096 blocks, met by
        every engine that sizes it up; the search probes 13 of them.
        """
        device, host = self._slot, self.host.blocks
        return bisect_left(range(len(hashes)), True, key=lambda i: hashes[i] not in device and hashes[i] not in host)

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
        limit = total_blocks if max_hit_blocks is None else max(0, min(max_hit_blocks, total_blocks))
        hit = min(self.held_prefix_blocks(hashes), limit)
        prefix = hashes[:hit]
        last = self._slot.get(prefix[-1]) if hit > 0 else None
        on_device = None if last is None else self._released.recall(last, prefix)
        if on_device is None:
            found = list(map(self._slot.get, prefix))
            loaded = found.count(None)  # host-tier hits need device blocks to load into
            on_device = np.array([slot for slot in found if slot is not None] if loaded else found, np.int64)
        else:
            loaded = 0
        private = total_blocks - hit
        if private + loaded > self.free_blocks + self.evictable_blocks - self._blocks.unreferenced(on_device):
            return None
        self._blocks.ref(on_device)  # protects them from the eviction _reserve may do below
        self._reserve(private + loaded)
        self._private_blocks -= loaded
        holding = self._holdings[seq_id] = Holding(private=private, loaded=loaded)
        if loaded:
            # Loaded back, referenced once, the host copy kept (HiCache keeps both).
            # `slot is None`, not a truth test: slot 0 is a slot.
            from_host = list(compress(prefix, [slot is None for slot in found]))
            missing = list(dict.fromkeys(from_host))
            self._slot.update(zip(missing, self._blocks.take(missing).tolist()))
            if len(missing) < len(from_host):  # a block listed twice (a hash collision) is referenced twice
                for block_hash, times in Counter(from_host).items():
                    for _ in range(times - 1):
                        self._blocks.ref_one(self._slot[block_hash])
            self.host.touch_all(from_host)
            on_device = np.fromiter(map(self._slot.__getitem__, prefix), np.int64, hit)
        holding.add_chunk(on_device)
        return hit

    def held_blocks(self, seq_id: str) -> int:
        """Device blocks a sequence holds: its published prefix plus its private reservation."""
        holding = self._holdings[seq_id]
        return holding.published + holding.private

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
        start = holding.published
        if upto_blocks <= start:
            return
        count = min(upto_blocks - start, holding.private)
        new = hashes[start : start + count]
        slot_of, blocks = self._slot, self._blocks
        if len(new) == 1 and new[0] not in slot_of:  # a decode step's block: no numpy for one slot
            slot = slot_of[new[0]] = blocks.take_one(new[0])
            holding.add_single(slot)
        elif len(dict.fromkeys(new)) == len(new) and slot_of.keys().isdisjoint(new):
            # A 64K-token prompt commits thousands of blocks at once; unshared ones (the usual case) together.
            slots = blocks.take(new)
            slot_of.update(zip(new, slots.tolist()))
            holding.add_chunk(slots)
        else:  # a block another sequence computed meanwhile is shared (ours freed), in order
            for block_hash in new:
                slot = slot_of.get(block_hash)
                if slot is None:
                    slot = slot_of[block_hash] = blocks.take_one(block_hash)
                else:
                    blocks.ref_one(slot)
                holding.add_single(slot)
        holding.private -= len(new)
        self._private_blocks -= len(new)
        if holding.published < upto_blocks:
            raise ValueError(f"sequence {seq_id!r} commits block {holding.published} it never reserved")

    def published_blocks(self, seq_id: str) -> int:
        return self._holdings[seq_id].published

    def release(self, seq_id: str) -> None:
        """Drop a sequence's blocks: private ones become free, published ones evictable once unreferenced."""
        holding = self._holdings.pop(seq_id, None)
        if holding is None:
            return
        self._private_blocks -= holding.private
        slots = holding.slots()
        self._released.note(slots)
        # Tail first, so that eviction (oldest first) drops a chain's tail before its head.
        self._blocks.unref(slots[::-1])

    def contents(self) -> tuple[dict[int, int], list[int], dict[str, tuple[list[int], int, int]]]:
        """(reference count of each published hash, evictable hashes oldest first, each holding's
        published hashes, private and loaded blocks): an inspection, for tests."""
        blocks = self._blocks
        refs = {h: int(blocks.refs[s]) for h, s in self._slot.items()}
        evictable = [int(blocks.hashes[s]) for s in blocks.in_eviction_order()]
        holdings = {seq: ([int(blocks.hashes[s]) for s in h.slots().tolist()], h.private, h.loaded)
                    for seq, h in self._holdings.items()}
        return refs, evictable, holdings

    def _reserve(self, blocks: int) -> None:
        shortfall = blocks - self.free_blocks
        if shortfall > 0:
            victims = self._blocks.evict(shortfall)
            deque(map(self._slot.__delitem__, victims), maxlen=0)
            self.host.touch_all(victims)  # demoted, not lost, when there is a host tier
            self.evictions += shortfall
        self._private_blocks += blocks

