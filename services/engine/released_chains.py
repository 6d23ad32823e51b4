"""Released chains: where a released sequence's blocks sit, so that the next admission of the same
prefix finds their slots without a dict probe per block.

An admission references every block of its hit, so it needs each block's slot. Found one block at a
time in the hash -> slot dict, that is thousands of probes into a dict of millions for a 64K-token
prompt: after the hit's own search, the largest cost of a report-scale simulation (docs/simulate.md
"Speed"). Most hits are the prefix of a chain a sequence released a little earlier (the previous
turn of the same conversation). So each release notes its slots in prefix order, and an admission
whose deepest hit block sits at the same depth of a noted chain takes that chain's slots once a few
array operations have checked that every one still holds the hit's block. Anything else is looked up
block by block, so the slots an admission gets are the same either way (docs/engine.md "Prefix
cache").
"""

from __future__ import annotations

import numpy as np

from services.engine.block_slots import BlockSlots


class ReleasedChains:
    """The slots of recently released chains, in prefix order, kept up to twice the slots' number."""

    def __init__(self, blocks: BlockSlots) -> None:
        self._blocks = blocks
        self._chain_of = np.full(0, -1, np.int64)  # per slot: the last chain noted with it
        self._depth = np.zeros(0, np.int64)  # per slot: its place in that chain
        self._chains: dict[int, np.ndarray] = {}  # oldest first
        self._kept = 0  # slots over all kept chains
        self._next = 0

    def note(self, slots: np.ndarray) -> None:
        """Remember a released sequence's slots, its chain's head first."""
        if not slots.size:
            return
        self._fit(self._blocks.refs.size)
        chain, self._next = self._next, self._next + 1
        self._chain_of[slots] = chain
        self._depth[slots] = np.arange(slots.size)
        self._chains[chain] = slots
        self._kept += slots.size
        while self._kept > 2 * self._chain_of.size:  # the oldest are the least likely to be hit again
            self._kept -= self._chains.pop(next(iter(self._chains))).size

    def recall(self, last_slot: int, prefix: list[int]) -> np.ndarray | None:
        """The slots of `prefix` (a chain of block hashes whose last one is in `last_slot`), or None
        unless a noted chain has every one of them published in order."""
        depth = len(prefix) - 1
        if last_slot >= self._depth.size or self._depth[last_slot] != depth:
            return None
        chain = self._chains.get(int(self._chain_of[last_slot]))
        if chain is None:
            return None
        candidate, blocks = chain[: depth + 1], self._blocks
        # An evicted slot keeps its old hash until it is reused: published means referenced or queued.
        if not ((blocks.refs[candidate] > 0) | (blocks.stamps[candidate] >= 0)).all():
            return None
        return candidate if blocks.hashes[candidate].tolist() == prefix else None

    def _fit(self, size: int) -> None:
        if size > self._chain_of.size:
            grown = size - self._chain_of.size
            self._chain_of = np.concatenate([self._chain_of, np.full(grown, -1, np.int64)])
            self._depth = np.concatenate([self._depth, np.full(grown, -1, np.int64)])
