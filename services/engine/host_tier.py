"""The host-memory prefix tier of one instance: which evicted blocks its DRAM still holds."""

from __future__ import annotations

from collections import OrderedDict


class HostTier:
    """Block hashes kept in host memory, least recently used first (docs/engine.md, "Host tier")."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0

    def touch(self, block_hash: int) -> None:
        """Store (written back on eviction from the device) or refresh a block; drop the oldest beyond capacity."""
        if not self.capacity_blocks:
            return
        self.blocks[block_hash] = None
        self.blocks.move_to_end(block_hash)
        if len(self.blocks) > self.capacity_blocks:
            self.blocks.popitem(last=False)
            self.evictions += 1
