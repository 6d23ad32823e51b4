"""A synthetic backend with a known knee: attainment a(x) = 1 / (1 + exp((x - k) / w)), goodput r x a(x)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from services.experiments.economics.loadpoint import PointResult, PointStats, Quantiles


@dataclass
class AnalyticCurve:
    knee: float  # the load where attainment is one half
    width: float
    rps_per_load: float = 0.1
    calls: list[float] = field(default_factory=list)

    def attainment(self, load: float) -> float:
        return 1 / (1 + math.exp((load - self.knee) / self.width))

    @property
    def crossing(self) -> float:
        """Where attainment is 0.9: k + w ln(1/9)."""
        return self.knee + self.width * math.log(1 / 9)

    def goodput(self, load: float) -> float:
        return self.rps_per_load * load * self.attainment(load)

    async def __call__(self, load: float) -> PointResult:
        self.calls.append(load)
        a = self.attainment(load)
        ttft = Quantiles(1.0, 2.0, 2.0 + 10 * (1 - a))
        return PointResult(load, 0, 100, a, self.goodput(load), self.rps_per_load * load, ttft, ttft, ttft,
                           PointStats(), (1.0, 2.0))
