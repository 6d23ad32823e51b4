"""Arrival processes for open-loop clients: send times as offsets in seconds from the start.

Poisson arrivals have exponential gaps (mean 1/rate). Gamma gaps keep the mean
and set the burstiness: shape k = 1/cv^2, scale 1/(rate k); cv = 1 is Poisson,
cv > 1 is burstier (docs/loadgen.md).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from loadgen.plan import ArrivalShape


def arrival_offsets(
    rate: float, rng: random.Random, shape: ArrivalShape = "poisson", cv: float = 1.0
) -> Iterator[float]:
    """An endless, increasing sequence of send times for `rate` requests per second."""
    if rate <= 0:
        raise ValueError(f"arrival rate {rate!r} must be positive")
    if cv <= 0:
        raise ValueError(f"coefficient of variation {cv!r} must be positive")
    now = 0.0
    if shape == "poisson":
        while True:
            now += rng.expovariate(rate)
            yield now
    elif shape == "gamma":
        k = 1.0 / (cv * cv)
        scale = 1.0 / (rate * k)
        while True:
            now += rng.gammavariate(k, scale)
            yield now
    else:
        raise ValueError(f"unknown arrival shape {shape!r}; use poisson or gamma")
