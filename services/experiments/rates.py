"""Offered rate over time: linear ramps and holds, and the Poisson arrivals that follow it.

A non-homogeneous Poisson process with rate lambda(t) is a unit-rate Poisson
process seen through the cumulative rate L(t) = integral of lambda from 0 to t:
event e happens at L^-1(e). On a segment where lambda goes linearly from a to
b over d seconds, L grows by a x + (b - a) x^2 / (2 d) after x seconds, so x is
the root of that quadratic (docs/results.md §Steady state).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """Ramp to `rate` over `ramp_s`, hold it for `settle_s`, then measure for `measure_s` (emulated seconds)."""

    rate: float
    ramp_s: float
    settle_s: float
    measure_s: float

    def __post_init__(self) -> None:
        if self.rate <= 0 or min(self.ramp_s, self.settle_s) < 0 or self.measure_s <= 0:
            raise ValueError(f"a step needs a positive rate and window and non-negative ramp and settle: {self}")


@dataclass(frozen=True)
class Window:
    rate: float
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Segment:
    start_s: float
    duration_s: float
    rate_from: float
    rate_to: float

    @property
    def events(self) -> float:
        return (self.rate_from + self.rate_to) / 2 * self.duration_s

    def offset_of(self, events: float) -> float:
        """Seconds into the segment at which the cumulative rate has grown by `events`."""
        a, slope = self.rate_from, (self.rate_to - self.rate_from) / self.duration_s if self.duration_s else 0.0
        if abs(slope) < 1e-12:
            return events / a
        # slope/2 x^2 + a x - events = 0, the root that grows from 0
        return (-a + math.sqrt(a * a + 2 * slope * events)) / slope


@dataclass(frozen=True)
class RateProfile:
    segments: tuple[Segment, ...]
    windows: tuple[Window, ...]

    @property
    def end_s(self) -> float:
        last = self.segments[-1]
        return last.start_s + last.duration_s

    def arrivals(self, rng: random.Random) -> Iterator[float]:
        """Send times (emulated seconds) until the profile ends."""
        target = rng.expovariate(1.0)
        passed = 0.0  # cumulative rate at the start of the current segment
        for segment in self.segments:
            while target <= passed + segment.events:
                yield segment.start_s + segment.offset_of(target - passed)
                target += rng.expovariate(1.0)
            passed += segment.events


def staircase_profile(steps: tuple[Step, ...] | list[Step]) -> RateProfile:
    segments, windows = [], []
    now, rate = 0.0, 0.0
    for step in steps:
        if step.ramp_s > 0:
            segments.append(Segment(now, step.ramp_s, rate, step.rate))
            now += step.ramp_s
        hold = step.settle_s + step.measure_s
        segments.append(Segment(now, hold, step.rate, step.rate))
        windows.append(Window(step.rate, now + step.settle_s, now + hold))
        now += hold
        rate = step.rate
    if not segments:
        raise ValueError("a staircase needs at least one step")
    return RateProfile(tuple(segments), tuple(windows))
