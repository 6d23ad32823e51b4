"""Published KV blocks as slots of numpy arrays: reference counts, the least-recently-released order,
and each sequence's holding of slots in prefix order.

A 64K-token prompt is about 4000 blocks, and its admission and its release each touch every one
of them in every engine it meets. Kept as dict entries, that per-block work was a fifth of a
report-scale simulation (docs/simulate.md "Speed"). Here a published block is a slot: its count,
its hash and the stamp of its last release are array entries, so a whole prompt's references move
in a few numpy operations.

The eviction order (docs/engine.md "Prefix cache": least recently released first, a chain's tail
before its head) is a queue of released batches, oldest first. A queued entry is live while its
slot is unreferenced and still carries the stamp it was queued with: a later use, release or
eviction supersedes it, so nothing is ever looked for or removed from the middle of the queue.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

_FIRST_SLOTS = 1024  # arrays double as blocks are published; a report-scale instance reaches millions


class BlockSlots:
    """Reference counts, hashes and release stamps of published blocks, one slot each."""

    window_slack = 64  # entries an eviction looks at beyond twice its count (a window of the front batch)

    def __init__(self) -> None:
        self.refs = np.zeros(_FIRST_SLOTS, np.int64)
        self.hashes = np.zeros(_FIRST_SLOTS, np.uint64)
        self.stamps = np.full(_FIRST_SLOTS, -1, np.int64)  # -1: not queued for eviction
        self._marks = np.zeros(_FIRST_SLOTS, np.int64)  # scratch for _distinct
        self._free: list[int] = []  # evicted slots, reused first
        self._next = 0  # slots below this have been handed out
        self._clock = 0  # the next release stamp
        self._queue: deque[tuple[np.ndarray, np.ndarray]] = deque()  # (slots, stamps), oldest first
        self._queued = 0  # entries in the queue, live or not
        self._front = 0  # entries of the queue's first batch before this one are gone
        self.evictable = 0  # published, unreferenced slots

    def take(self, hashes: list[int]) -> np.ndarray:
        """Slots for newly published blocks, each referenced once."""
        reuse = min(len(hashes), len(self._free))
        reused = np.array(self._free[len(self._free) - reuse:], np.int64)
        del self._free[len(self._free) - reuse:]
        fresh = len(hashes) - reuse
        self._grow(self._next + fresh)
        slots = np.concatenate([reused, np.arange(self._next, self._next + fresh, dtype=np.int64)])
        self._next += fresh
        self.refs[slots] = 1
        self.hashes[slots] = np.array(hashes, np.uint64)
        return slots

    def take_one(self, block_hash: int) -> int:
        """A slot for one newly published block (a decode step's), without numpy's per-call cost."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = self._next
            self._grow(slot + 1)
            self._next += 1
        self.refs[slot] = 1
        self.hashes[slot] = block_hash
        return slot

    def unreferenced(self, slots: np.ndarray) -> int:
        """How many entries of `slots` are evictable now (a slot listed twice counts twice)."""
        return int(np.count_nonzero(self.refs[slots] == 0))

    def ref(self, slots: np.ndarray) -> None:
        refs = self.refs
        if self._distinct(slots):
            before = refs[slots]
            refs[slots] = before + 1
            self.evictable -= int(np.count_nonzero(before == 0))
        else:
            for slot in slots.tolist():
                self.ref_one(slot)

    def ref_one(self, slot: int) -> None:
        if self.refs[slot] == 0:
            self.evictable -= 1
        self.refs[slot] += 1

    def unref(self, slots: np.ndarray) -> None:
        """Drop one reference from each of `slots`, in order; those left unreferenced queue for eviction."""
        refs = self.refs
        if self._distinct(slots):
            after = refs[slots] - 1
            refs[slots] = after
            zero = slots[after == 0]
        else:  # a slot listed twice reaches zero at its last listing, as one block at a time would
            reached = []
            for slot in slots.tolist():
                refs[slot] -= 1
                if refs[slot] == 0:
                    reached.append(slot)
            zero = np.array(reached, np.int64)
        if zero.size:
            stamps = np.arange(self._clock, self._clock + zero.size, dtype=np.int64)
            self._clock += zero.size
            self.stamps[zero] = stamps
            self._queue.append((zero, stamps))
            self._queued += zero.size
            self.evictable += zero.size
            if self._queued > 2 * self.evictable + 4096:  # superseded entries: keep the queue near its live size
                self._compact()

    def evict(self, count: int) -> list[int]:
        """The hashes of the `count` least recently released unreferenced blocks, in order; their slots are freed."""
        if count > self.evictable:
            raise ValueError(f"cannot evict {count} blocks, {self.evictable} are unreferenced")
        taken: list[np.ndarray] = [np.zeros(0, np.int64)]
        need = count
        while need:
            slots, stamps = self._queue[0]
            # A window of the front batch, not all of it: after a compaction the front batch holds
            # every evictable block (millions at the report's scale), and a decode step evicts a few.
            start = self._front
            end = min(slots.size, start + 2 * need + self.window_slack)
            window = slots[start:end]
            live = np.flatnonzero((self.stamps[window] == stamps[start:end]) & (self.refs[window] == 0))
            if live.size >= need:
                taken.append(window[live[:need]])
                end = start + int(live[need - 1]) + 1
                need = 0
            else:
                taken.append(window[live])
                need -= live.size
            self._queued -= end - start
            if end == slots.size:
                self._queue.popleft()
                end = 0
            self._front = end
        victims = np.concatenate(taken)
        self.stamps[victims] = -1
        self.evictable -= count
        self._free.extend(victims.tolist())
        return self.hashes[victims].tolist()

    def in_eviction_order(self) -> list[int]:
        """Slots that would be evicted, first to last (an inspection: tests compare states with it)."""
        return [s for slots, stamps in self._batches() for s, t in zip(slots.tolist(), stamps.tolist())
                if self.stamps[s] == t and self.refs[s] == 0]

    def _batches(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The queue's batches with the first one's gone entries cut off."""
        batches = list(self._queue)
        if batches:
            slots, stamps = batches[0]
            batches[0] = (slots[self._front:], stamps[self._front:])
        return batches

    def _compact(self) -> None:
        batches = self._batches()
        slots = np.concatenate([s for s, _ in batches])
        stamps = np.concatenate([t for _, t in batches])
        live = (self.stamps[slots] == stamps) & (self.refs[slots] == 0)
        self._queue = deque([(slots[live], stamps[live])])
        self._front = 0
        self._queued = int(np.count_nonzero(live))

    def _grow(self, size: int) -> None:
        if size <= self.refs.size:
            return
        new = max(size, 2 * self.refs.size)
        self.refs = np.concatenate([self.refs, np.zeros(new - self.refs.size, np.int64)])
        self.hashes = np.concatenate([self.hashes, np.zeros(new - self.hashes.size, np.uint64)])
        self.stamps = np.concatenate([self.stamps, np.full(new - self.stamps.size, -1, np.int64)])
        self._marks = np.zeros(new, np.int64)

    def _distinct(self, slots: np.ndarray) -> bool:
        """Whether no slot is listed twice (chain hashes are distinct, so a repeat is a hash collision)."""
        if slots.size < 2:
            return True
        order = np.arange(slots.size)
        self._marks[slots] = order
        return bool((self._marks[slots] == order).all())


@dataclass(slots=True)
class Holding:
    """The blocks one sequence holds; its published ones as slots, in prefix order."""

    chunks: list[np.ndarray] = field(default_factory=list)  # slots of the admitted prefix and of multi-block commits
    singles: list[int] = field(default_factory=list)  # slots committed one at a time since the last chunk
    published: int = 0
    private: int = 0  # blocks reserved for this sequence that are not published (yet)
    loaded: int = 0  # of the published ones, blocks its admission loaded from the host tier

    def add_chunk(self, slots: np.ndarray) -> None:
        self._flush()
        self.chunks.append(slots)
        self.published += slots.size

    def add_single(self, slot: int) -> None:
        self.singles.append(slot)
        self.published += 1

    def slots(self) -> np.ndarray:
        self._flush()
        return np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.int64)

    def _flush(self) -> None:
        if self.singles:
            self.chunks.append(np.array(self.singles, np.int64))
            self.singles = []
