"""Line rate: a single serializer per direction, shared by every connection on it.

A chunk starts serializing when both it and the line are ready and finishes
size * 8 / rate later: `finish = max(free_at, ready) + size * 8 / rate`
(docs/netem.md, "Serialization"). Sharing one serializer makes concurrent
transfers split the line as they would a real one.
"""

from __future__ import annotations

from netem.config import DirectionConfig
from netem.stages.base import Chunk

# Large reads are cut into pieces of about this much line time, so a slow line
# hands the receiver bytes progressively rather than in one late burst.
PIECE_SECONDS = 0.002
MIN_PIECE_BYTES = 16 * 1024


def piece_bytes(rate_bps: float | None) -> int | None:
    """Largest piece a read is cut into at this rate; None means do not cut."""
    if rate_bps is None:
        return None
    return max(MIN_PIECE_BYTES, int(rate_bps / 8 * PIECE_SECONDS))


class Serializer:
    def __init__(self) -> None:
        self.rate_bps: float | None = None
        self.free_at = float("-inf")

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        # A new rate applies to chunks not yet stamped; free_at carries over so
        # bytes already on the line are neither dropped nor re-timed.
        self.rate_bps = config.rate

    def pipe(self, chunk: Chunk) -> None:
        if self.rate_bps is None:
            return
        start = max(self.free_at, chunk.deadline)
        self.free_at = start + chunk.size * 8.0 / self.rate_bps
        chunk.deadline = self.free_at

    def backlog(self, now: float) -> float:
        """Seconds of line time already promised to stamped chunks."""
        return max(0.0, self.free_at - now)
