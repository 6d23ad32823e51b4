"""Propagation delay plus jitter: `deadline += max(0, delay + jitter)`.

The sum is floored at zero because a packet cannot arrive before it is sent;
any reordering a draw would cause is undone by the InOrder stage that follows.
"""

from __future__ import annotations

import random

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.jitter import JitterSource


class Latency:
    def __init__(self, rng: random.Random) -> None:
        self.delay = 0.0
        self.jitter = JitterSource(rng)

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        self.delay = config.delay_s
        self.jitter.configure(config.jitter_dist, config.jitter_s, config.correlation)

    def pipe(self, chunk: Chunk) -> None:
        added = self.delay + self.jitter.sample()
        if added > 0.0:
            chunk.deadline += added
