"""Published blocks' slots: counts, the least-recently-released order, and the queue that keeps it."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from services.engine.block_slots import BlockSlots


def _slots(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_eviction_takes_the_oldest_release_first_and_a_release_tail_first():
    blocks = BlockSlots()
    first, second = blocks.take([10, 11, 12]), blocks.take([20, 21])
    blocks.unref(first[::-1])  # a chain is released tail first
    blocks.unref(second[::-1])
    assert blocks.evictable == 5
    assert blocks.evict(4) == [12, 11, 10, 21]
    assert blocks.evictable == 1


def test_a_block_used_again_leaves_the_order_and_rejoins_it_at_its_next_release():
    blocks = BlockSlots()
    a, b = blocks.take([1]), blocks.take([2])
    blocks.unref(a)
    blocks.unref(b)
    blocks.ref(a)  # admitted again: not evictable while referenced
    assert blocks.evictable == 1
    assert blocks.evict(1) == [2]
    blocks.unref(a)
    assert blocks.evict(1) == [1]
    with pytest.raises(ValueError, match="cannot evict 1 blocks, 0 are unreferenced"):
        blocks.evict(1)


def test_evicted_slots_are_reused_for_the_next_blocks():
    blocks = BlockSlots()
    old = blocks.take([1, 2])
    blocks.unref(old)
    blocks.evict(2)
    new = blocks.take([3, 4, 5])
    assert set(old.tolist()) < set(new.tolist())
    assert blocks.hashes[new].tolist() == [3, 4, 5]
    assert blocks.refs[new].tolist() == [1, 1, 1]


def test_a_slot_listed_twice_is_counted_twice_and_queued_once():
    blocks = BlockSlots()
    (slot,) = blocks.take([7]).tolist()
    blocks.ref(_slots(slot, slot))
    assert blocks.refs[slot] == 3
    blocks.unref(_slots(slot, slot, slot))
    assert blocks.evictable == 1
    assert blocks.in_eviction_order() == [slot]


def test_the_queue_sheds_superseded_entries_and_keeps_the_order():
    blocks = BlockSlots()
    kept, churned = blocks.take([1, 2, 3, 4]), blocks.take(list(range(100, 200)))
    blocks.unref(kept[::-1])
    assert blocks.evict(1) == [4]  # the front batch is read in part before the queue is compacted
    for _ in range(60):  # 6000 entries superseded by the next use: more than the queue keeps
        blocks.unref(churned)
        blocks.ref(churned)
    assert blocks._queued < 4096
    assert blocks.evict(3) == [3, 2, 1]


operations = st.lists(st.tuples(st.sampled_from(["take", "ref", "unref", "evict"]), st.integers(0, 30),
                                st.integers(1, 6)), max_size=80)


@settings(max_examples=200, deadline=None)
@given(operations, st.sampled_from([0, 64]))
def test_slots_behave_as_counts_in_a_dict_and_an_lru_of_unreferenced_hashes(ops, window_slack):
    blocks, refs, lru = BlockSlots(), {}, OrderedDict()
    blocks.window_slack = window_slack  # 0: an eviction reads the front batch a few entries at a time
    slot_of: dict[int, int] = {}
    next_hash = 0
    for op, pick, size in ops:
        if op == "take":
            new = list(range(next_hash, next_hash + size))
            next_hash += size
            slot_of.update(zip(new, blocks.take(new).tolist()))
            refs.update(dict.fromkeys(new, 1))
            continue
        if op == "evict":
            count = min(size, len(lru))
            victims = [lru.popitem(last=False)[0] for _ in range(count)]
            assert blocks.evict(count) == victims
            for h in victims:
                del refs[h], slot_of[h]
            continue
        chosen = sorted(refs)[pick % len(refs):][:size] if refs else []
        if op == "ref":
            for h in chosen:
                if refs[h] == 0:
                    del lru[h]
                refs[h] += 1
        else:
            chosen = [h for h in chosen if refs[h] > 0]
            for h in reversed(chosen):
                refs[h] -= 1
                if refs[h] == 0:
                    lru[h] = None
        slots = np.array([slot_of[h] for h in chosen], np.int64)
        blocks.ref(slots) if op == "ref" else blocks.unref(slots[::-1])
        assert blocks.evictable == len(lru)
        assert [int(blocks.hashes[s]) for s in blocks.in_eviction_order()] == list(lru)


def test_an_eviction_reads_only_the_front_of_a_large_batch():
    blocks = BlockSlots()
    blocks.unref(blocks.take(list(range(100_000)))[::-1])
    assert blocks.evict(3) == [99_999, 99_998, 99_997]
    assert blocks._front == 3  # the rest of the batch was not read, nor copied
    assert blocks.evict(2) == [99_996, 99_995]
    assert blocks.evictable == len(blocks.in_eviction_order()) == 99_995
