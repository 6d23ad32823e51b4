"""One direction of a link: its shared stages, its byte budget and its counters.

Connections come and go; what they share lives here: the serializer (one line),
the latency stage (one jitter source, as netem keeps one per qdisc), the
partition, and the queue bound. When the bytes held across all connections
reach `queue`, every connection stops reading from its sender until the held
bytes fall to LOW_WATER of the bound, so senders feel backpressure.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any, Callable

from netem.config import Direction, DirectionConfig
from netem.stages.latency import Latency
from netem.stages.partition import Partition, PartitionMode
from netem.stages.serialize import Line, piece_bytes

if TYPE_CHECKING:
    from netem.flow import Flow
    from netem.timers import Timers

LOW_WATER = 0.75  # resume reading below this share of the queue bound
QUEUE_PIECES = 4  # a sender puts at most a quarter of the bound in at a time, so the low water lets it go on


class DirectionState:
    def __init__(self, name: Direction, config: DirectionConfig, rtt: float, rng: random.Random) -> None:
        self.name = name
        self.rng = rng  # seeds each connection's own draws (loss), in accept order
        self.line = Line()
        self.latency = Latency(random.Random(rng.getrandbits(64)))
        self.partition = Partition()
        self.flows: set[Flow] = set()
        self.held_bytes = 0
        self.peak_held_bytes = 0
        self.over_limit = False
        self.counters = dict.fromkeys(
            ("bytes", "chunks", "bytes_in", "loss_stalls", "resets", "connections_total"), 0
        )
        self.error_sum = 0.0
        self.error_max = 0.0
        self.late_sum = 0.0
        self.late_max = 0.0
        self.config = config
        self.rtt = rtt
        self.piece_bytes: int | None = None
        self.configure(config, rtt)

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        self.config, self.rtt = config, rtt
        self.piece_bytes = piece_bytes(config.rate_bps)
        self.line.configure(config, rtt)
        self.latency.configure(config, rtt)
        for flow in list(self.flows):
            flow.configure(config, rtt)
        self.update_limit()
        if self.over_limit:
            self._drain_at_new_settings()

    def _drain_at_new_settings(self) -> None:
        """A full queue must not stay full on the old settings (docs/netem.md, "Delay line").

        Held bytes keep their deadlines on a reconfiguration, except when the direction is over its
        bound afterwards: reading is paused then, and bytes stamped under a long delay or a slow rate
        would keep it paused for as long as those settings said. Each held deadline is capped at the
        one a byte entering now would get behind all of them, so the queue drains at the settings in
        force. Deadlines only move earlier and stay in order; nothing is dropped.
        """
        now = self.line.now()
        if now is None:
            return
        line_free = now + (self.held_bytes * 8.0 / self.config.rate_bps if self.config.rate_bps else 0.0)
        self.line.cap_free_at(line_free)
        for flow in list(self.flows):
            flow.cap_deadlines(line_free + self.config.delay_s)

    def bind(self, clock: Callable[[], float], timers: Timers) -> None:
        """Attach the running loop's clock and timers (the link does this when it starts)."""
        self.line.bind(clock, timers)

    def close(self) -> None:
        self.line.close()

    # -- the byte budget -------------------------------------------------
    def add_held(self, size: int) -> None:
        self.held_bytes += size
        if self.held_bytes > self.peak_held_bytes:
            self.peak_held_bytes = self.held_bytes
        if not self.over_limit and self.held_bytes >= self.config.queue_bytes:
            self.over_limit = True
            for flow in list(self.flows):
                flow.update_reading()

    def release_held(self, size: int) -> None:
        self.held_bytes -= size
        if self.over_limit and self.held_bytes <= self.config.queue_bytes * LOW_WATER:
            self.over_limit = False
            for flow in list(self.flows):
                flow.update_reading()

    def update_limit(self) -> None:
        """Re-check the bound after the queue size changed."""
        was = self.over_limit
        if self.held_bytes >= self.config.queue_bytes:
            self.over_limit = True
        elif self.held_bytes <= self.config.queue_bytes * LOW_WATER:
            self.over_limit = False
        if was != self.over_limit:
            for flow in list(self.flows):
                flow.update_reading()

    # -- partitions ------------------------------------------------------
    def start_partition(self, mode: PartitionMode, now: float, duration: float | None) -> None:
        self.partition.start(mode, now, duration)
        self.kick()

    def heal(self) -> None:
        self.partition.heal()
        self.kick()

    def kick(self) -> None:
        """Let every connection re-check what it may deliver now."""
        for flow in list(self.flows):
            flow.release()

    # -- reporting -------------------------------------------------------
    def record_delivery(self, size: int, error: float) -> None:
        """Count a write; `error` is its time minus its deadline (negative: early)."""
        self.counters["bytes"] += size
        self.counters["chunks"] += 1
        self.error_sum += error
        if abs(error) > abs(self.error_max):
            self.error_max = error
        if error > 0.0:
            self.late_sum += error
            self.late_max = max(self.late_max, error)

    def stats(self, now: float) -> dict[str, Any]:
        chunks = self.counters["chunks"]
        return {
            **self.counters,
            "loss_stalls": self.counters["loss_stalls"] + sum(f.loss.stalls for f in self.flows),
            "queue_bytes": self.held_bytes,
            "queue_peak_bytes": self.peak_held_bytes,
            "queue_limit_bytes": self.config.queue_bytes,
            "connections": len(self.flows),
            "reading_paused": sum(1 for f in self.flows if f.reading_paused),
            "line_backlog_s": self.line.backlog(now),
            "partition": self.partition.active(now),
            "partition_left_s": _finite(self.partition.remaining(now)),
            "late_mean_s": self.late_sum / chunks if chunks else 0.0,
            "late_max_s": self.late_max,
            "timing_error_mean_s": self.error_sum / chunks if chunks else 0.0,
            "timing_error_max_s": self.error_max,
        }


def _finite(seconds: float | None) -> float | None:
    """None for "no end" (JSON has no infinity)."""
    return None if seconds is None or math.isinf(seconds) else seconds
