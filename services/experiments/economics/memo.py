"""A deterministic backend's points, each run once however many searches ask for it.

The full run asks the simulator for the same point many times over (docs/results.md,
"Economics: method"): three of the four arms are the base deployments unchanged,
the price parameters (GPU-B premium, line price) change what a deployment costs
but nothing it does, and the relay-size and pipeline-threshold cases leave the
two deployments without a relay as they were. A simulated point is a function of
(scenario, workload, load, seed) (tests/experiments/economics/test_simpoint.py),
and prices only enter the figures through the cost (services/scenario/cost.py), so
a point asked for again, or asked for at other prices, is the point already run.
"""

from __future__ import annotations

import asyncio
import json

from services.experiments.economics.loadpoint import LoadPointRunner, PointResult
from services.scenario import Scenario

PRICE_FIELDS = frozenset({"price_per_hour", "wan_price_per_hour"})  # read by services/scenario/cost.py only


def _without_prices(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_prices(v) for k, v in value.items() if k not in PRICE_FIELDS}
    if isinstance(value, list):
        return [_without_prices(v) for v in value]
    return value


def point_key(scenario: Scenario, workload: str, load: float, seed: int) -> str:
    """What a simulated point depends on: the whole scenario but its prices, the workload, the load and the seed."""
    what = _without_prices(scenario.model_dump(mode="json"))
    return json.dumps([what, workload, float(load), seed], sort_keys=True)


class PointMemo:
    """`runner`'s points by `point_key`: a point asked for again (or while it runs) is answered from the first run."""

    def __init__(self, runner: LoadPointRunner) -> None:
        self.runner = runner
        self.backend = runner.backend
        self.parallel = getattr(runner, "parallel", False)
        self._points: dict[str, asyncio.Future[PointResult]] = {}
        self.run = self.reused = 0

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int) -> PointResult:
        key = point_key(scenario, workload, load, seed)
        point = self._points.get(key)
        if point is None:
            point = self._points[key] = asyncio.ensure_future(self.runner.run_point(scenario, workload, load, seed))
            self.run += 1
        else:
            self.reused += 1
        return await point

    def close(self) -> None:
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()
