"""Loss on a reliable stream: a lost segment costs a retransmission stall, not lost bytes.

The stream is cut into loss units of `loss_unit` bytes (one MSS by default);
each unit is lost with probability `loss`, independently. Every lost unit adds
one `loss_stall` (an RTO) to the chunk holding it, and through InOrder to all
that follow on the connection (docs/netem.md, "Loss").

The gap to the next loss is drawn from the geometric distribution, so the
outcome depends only on byte positions in the stream, not on how reads split it.
"""

from __future__ import annotations

import math
import random

from netem.config import DirectionConfig
from netem.stages.base import Chunk


class LossStall:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.probability = 0.0
        self.unit_bytes = 1
        self.stall = 0.0
        self._bytes_to_loss: int | None = None
        self.stalls = 0  # lost units so far on this connection

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        if (config.loss, config.loss_unit_bytes) != (self.probability, self.unit_bytes):
            self._bytes_to_loss = None  # the old gap was drawn for other odds
        self.probability = config.loss
        self.unit_bytes = config.loss_unit_bytes
        self.stall = config.loss_stall_s

    def _draw_gap(self) -> int:
        """Bytes up to and including the next lost unit."""
        if self.probability >= 1.0:
            units = 1
        else:
            u = 1.0 - self._rng.random()  # in (0, 1]
            units = 1 + int(math.log(u) / math.log1p(-self.probability))
        return units * self.unit_bytes

    def pipe(self, chunk: Chunk) -> None:
        if self.probability <= 0.0 or chunk.size == 0:
            return
        if self._bytes_to_loss is None:
            self._bytes_to_loss = self._draw_gap()
        remaining, lost = chunk.size, 0
        while remaining >= self._bytes_to_loss:
            remaining -= self._bytes_to_loss
            lost += 1
            self._bytes_to_loss = self._draw_gap()
        self._bytes_to_loss -= remaining
        if lost:
            self.stalls += lost
            chunk.deadline += lost * self.stall
