"""Block hashes of the prompts a process met lately, so a prompt that comes back is not hashed again.

A prompt's block hashes cost one vectorised pass over its ids (about 1.5 ms for 64K tokens;
docs/engine.md, "Block hashes"). In the mesh each role is its own process and hashes what it
receives. A simulation runs every role in one process, where the prefill, relay and main
decode services all receive the same prompt within milliseconds of one another; they share
one memo there (services/simulate/wiring.py), and each prompt is hashed once, not once per
service. An entry is found by the prompt's fingerprint and length and is used only if its ids
equal the prompt's, so a fingerprint collision costs a hashing, never a wrong hash.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from services.engine.block_hashes import block_hashes

# The services that look a prompt up together meet it within milliseconds of one another; 256
# prompts is seconds of arrivals at tens of requests a second. At 64K tokens an entry holds 256 KiB
# of uint32 ids (the received buffer itself, not a copy) and about 150 KiB of hashes.
RECENT_PROMPTS = 256


class RecentPrompts:
    """Least recently used prompts and their block hashes; the hash lists are shared, never to be changed."""

    def __init__(self, size: int = RECENT_PROMPTS) -> None:
        if size < 1:
            raise ValueError(f"a memo of recent prompts holds at least one, got {size}")
        self.size = size
        self._entries: OrderedDict[tuple[int, int, int], tuple[np.ndarray, list[int]]] = OrderedDict()
        self.hits = self.misses = 0

    def hashes(self, ids: np.ndarray, fingerprint: int, block_size: int) -> list[int]:
        """block_hashes(ids, block_size), from the memo when these very ids were hashed lately."""
        key = (fingerprint, len(ids), block_size)
        entry = self._entries.get(key)
        if entry is not None and np.array_equal(entry[0], ids):
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]
        self.misses += 1
        hashes = block_hashes(ids, block_size)
        self._entries[key] = (ids, hashes)
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return hashes
