"""The host-memory prefix tier of one instance: which evicted blocks its DRAM still holds."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable


class HostTier:
    """Block hashes kept in host memory, least recently used first (docs/engine.md, "Host tier")."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0

    def touch(self, block_hash: int) -> None:
        """Store (written back on eviction from the device) or refresh a block; drop the oldest beyond capacity."""
        self.touch_all((block_hash,))

    def touch_all(self, block_hashes: Iterable[int]) -> None:
        """`touch` each, in order: one call for the hundreds of blocks one admission evicts or loads back."""
        capacity, blocks = self.capacity_blocks, self.blocks
        if not capacity:
            return
        move_to_end = blocks.move_to_end
        for block_hash in block_hashes:
            if block_hash in blocks:
                move_to_end(block_hash)
                continue
            blocks[block_hash] = None
            if len(blocks) > capacity:
                blocks.popitem(last=False)
                self.evictions += 1
