"""Released chains: an admission takes a released prefix's slots only while each still holds its block."""

from __future__ import annotations

from services.engine.block_slots import BlockSlots
from services.engine.released_chains import ReleasedChains


def released(hashes: list[int]) -> tuple[BlockSlots, ReleasedChains, list[int]]:
    blocks = BlockSlots()
    chains = ReleasedChains(blocks)
    slots = blocks.take(hashes)
    chains.note(slots)
    blocks.unref(slots[::-1])
    return blocks, chains, slots.tolist()


def test_a_released_prefix_is_recalled_at_its_own_depth_only():
    _, chains, slots = released([11, 12, 13])
    assert chains.recall(slots[2], [11, 12, 13]).tolist() == slots
    assert chains.recall(slots[1], [11, 12]).tolist() == slots[:2]
    assert chains.recall(slots[2], [11, 12]) is None  # the last block is not at the prefix's depth
    assert chains.recall(slots[2], [11, 99, 13]) is None  # another chain through the same block


def test_an_evicted_or_reused_slot_is_not_recalled():
    blocks, chains, slots = released([11, 12, 13])
    blocks.evict(1)  # the tail goes first; its slot keeps the old hash until it is reused
    assert chains.recall(slots[2], [11, 12, 13]) is None
    assert chains.recall(slots[1], [11, 12]).tolist() == slots[:2]
    blocks.evict(2)
    reused = blocks.take([21, 22, 23]).tolist()
    assert sorted(reused) == sorted(slots)
    assert chains.recall(slots[1], [11, 12]) is None


def test_the_oldest_chains_are_dropped_beyond_twice_the_slots():
    blocks = BlockSlots()
    chains = ReleasedChains(blocks)
    for n in range(3000):  # chains of two blocks, each evicted before the next: slots are reused
        slots = blocks.take([2 * n, 2 * n + 1])
        chains.note(slots)
        blocks.unref(slots[::-1])
        blocks.evict(2)
    assert blocks.refs.size == 1024
    assert chains._kept == 2 * blocks.refs.size  # the memory stays bounded by the slots'
    slots = blocks.take([5, 6])
    chains.note(slots)
    assert chains.recall(int(slots[1]), [5, 6]).tolist() == slots.tolist()
