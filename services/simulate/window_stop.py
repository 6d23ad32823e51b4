"""When a simulated run stops sending: its measured window's request budget, or a verdict that cannot change.

A load point of the economics experiment measures the requests sent in a window
from `start_s` on (services/experiments/economics/simpoint.py). Sending stops
with the request after the window's `requests`-th, so the window [start_s, that
request's send) holds `requests`. Given an SLA, sending also stops once so many
of the window's requests have missed it that the window's attainment must end
below `threshold` however the others fare: the window holds at most `requests`,
and a miss, once answered, stays one. Past its knee a point's verdict is then
reached in a few hundred requests rather than thousands (docs/results.md,
"Economics: method", "A failing point stops at its verdict").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from loadgen.bench.records import RequestRecord
from loadgen.summary import SlaConfig, meets_sla


def decisive_misses(requests: int, threshold: float) -> int:
    """The fewest misses among `requests` that leave the attainment (within SLA / counted, as loadgen's summary
    computes it) below `threshold`; `requests + 1` where none can."""
    return next((m for m in range(requests + 1) if (requests - m) / requests < threshold), requests + 1)


@dataclass
class WindowStop:
    start_s: float
    requests: int
    sla: SlaConfig | None = None  # None: the budget alone stops sending
    threshold: float = 0.9  # the share a window must hold within SLA: the experiments' goodput.THRESHOLD, passed in
    sent: int = 0  # requests sent from start_s on
    missed: int = 0  # of those, answered and not within the SLA
    stopped_s: float | None = None  # when a miss decided the verdict (run seconds); None: it never did
    _decisive: int = field(init=False)

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"a window needs at least one request, got {self.requests}")
        self._decisive = decisive_misses(self.requests, self.threshold)

    def sending(self, send_s: float) -> bool:
        """Count a send; False for the one after the budget, with which sending stops."""
        if send_s >= self.start_s:
            self.sent += 1
        return self.sent <= self.requests

    def answered(self, record: RequestRecord, now_s: float) -> bool:
        """Count an answer; False when its miss decides that the window fails, and sending stops."""
        if (self.sla is None or self.stopped_s is not None or self.sent > self.requests
                or record.send_s < self.start_s or meets_sla(record.row(), self.sla)):
            return True
        self.missed += 1
        if self.missed < self._decisive:
            return True
        self.stopped_s = now_s
        return False

    def window_end(self, full_end_s: float) -> float:
        """The window's end: just past the decisive moment if a miss stopped sending, else `full_end_s`
        (the budget's last request's successor, or the run's measured time)."""
        return full_end_s if self.stopped_s is None else math.nextafter(self.stopped_s, math.inf)
