"""TCP-like sender limits for one connection (off by default).

Two effects, both counted in rounds of one RTT (docs/netem.md, "Window"):

- a window cap: at most `window` bytes per round, so one flow cannot exceed
  window / RTT however fast the line is;
- slow start after idle: a connection idle for longer than one RTO (taken as
  max(200 ms, RTT), as Linux's minimum RTO) restarts at `initial_window` bytes
  per round and doubles every round, up to the cap.

A chunk leaves at the start of the round in which its last byte fits.
"""

from __future__ import annotations

import math

from netem.config import DirectionConfig
from netem.stages.base import Chunk

MIN_RTO = 0.2


class Window:
    def __init__(self) -> None:
        self.cap: int | None = None
        self.slow_start = False
        self.initial = 1
        self.rtt = 0.0
        self._cwnd = 0
        self._credit = 0
        self._round_start: float | None = None
        self._last_send = float("-inf")

    @property
    def round_bytes(self) -> int:
        """Bytes the current round lets through (0 while the model is off or before the first round)."""
        return self._cwnd if self.active else 0

    @property
    def active(self) -> bool:
        return self.rtt > 0.0 and (self.cap is not None or self.slow_start)

    def configure(self, config: DirectionConfig, rtt: float) -> None:
        self.cap = config.window_bytes
        self.slow_start = config.slow_start
        self.initial = config.initial_window_bytes
        self.rtt = rtt
        self._round_start = None  # start afresh under the new parameters

    def _limit(self, cwnd: float) -> int:
        return int(min(cwnd, self.cap if self.cap is not None else math.inf))

    def _grow(self) -> int:
        return self._limit(self._cwnd * 2) if self.slow_start else self._cwnd

    def _restart(self, t: float) -> None:
        self._cwnd = self._limit(self.initial) if self.slow_start else int(self.cap or 0)
        self._round_start = t
        self._credit = self._cwnd

    def pipe(self, chunk: Chunk) -> None:
        if not self.active:
            return
        t = chunk.deadline
        if self._round_start is None or (self.slow_start and t - self._last_send > max(MIN_RTO, self.rtt)):
            self._restart(t)
        elif t >= self._round_start + self.rtt:
            # Whole rounds passed with the window not used up: the ACK clock
            # went on ticking, so open a fresh round aligned to the old ones.
            rounds = int((t - self._round_start) / self.rtt)
            self._round_start += rounds * self.rtt
            for _ in range(min(rounds, 64)):
                self._cwnd = self._grow()
            self._credit = self._cwnd
        remaining = chunk.size
        while remaining > self._credit:
            remaining -= self._credit
            self._round_start += self.rtt
            self._cwnd = self._grow()
            self._credit = self._cwnd
        self._credit -= remaining
        chunk.deadline = max(t, self._round_start)
        self._last_send = chunk.deadline
