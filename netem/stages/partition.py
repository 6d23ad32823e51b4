"""Partitions: the line stops for a while, in one of two ways.

- blackhole: bytes are held, neither lost nor delivered, until the partition
  ends; senders see silence and their own timeouts fire.
- reject: every connection is reset and new ones are refused, as a firewall
  answering with RST would.

Unlike the other stages a partition acts at delivery time, not at stamping, so
it also holds chunks that were already in flight when it began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

PartitionMode = Literal["blackhole", "reject"]


@dataclass
class Partition:
    mode: PartitionMode | None = None
    until: float = 0.0  # loop time the partition ends; math.inf until healed

    def start(self, mode: PartitionMode, now: float, duration: float | None) -> None:
        self.mode = mode
        self.until = math.inf if duration is None else now + duration

    def heal(self) -> None:
        self.mode = None
        self.until = 0.0

    def active(self, now: float) -> PartitionMode | None:
        if self.mode is not None and now >= self.until:
            self.heal()
        return self.mode

    def held_until(self, now: float) -> float | None:
        """When held bytes may move again, or None if nothing holds them."""
        return self.until if self.active(now) == "blackhole" else None

    def remaining(self, now: float) -> float | None:
        return None if self.active(now) is None else self.until - now
