"""Stream order: a chunk never leaves before the chunk ahead of it on the same connection.

TCP delivers bytes in order, so a jitter draw that would let a later chunk
overtake an earlier one instead holds it until the earlier one is out
(docs/netem.md, "Delay line"). This is the last stage of every chain.
"""

from __future__ import annotations

from netem.config import DirectionConfig
from netem.stages.base import Chunk


class InOrder:
    def __init__(self) -> None:
        self.last_deadline = float("-inf")

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        pass

    def pipe(self, chunk: Chunk) -> None:
        if chunk.deadline < self.last_deadline:
            chunk.deadline = self.last_deadline
        else:
            self.last_deadline = chunk.deadline
