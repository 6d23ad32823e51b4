"""Max goodput near the knee: bracket the 90% crossing, then bisect it to 2% (docs/results.md, "Economics").

Why bisection rather than a grid of 8 points: a report-scale load point is a
minutes-long run, and a grid's resolution is its spacing (8 points over a
factor-2 range resolve 9%), whereas doubling from a first guess brackets the
crossing in a few points and each further point halves the bracket: from a
factor-2 bracket, 6 halvings reach 2%. Attainment is taken as falling with
load (more load never serves a larger share within SLA); the max goodput is
then read between the last passing and first failing point by goodput.py's
linear crossing. Every point is kept, so the goodput curve is drawn from them.
A fixed grid (`grid`) is kept for short runs whose points are given.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from services.experiments.economics.loadpoint import PointResult
from services.experiments.goodput import THRESHOLD, MaxGoodput, max_goodput

RunPoint = Callable[[float], Awaitable[PointResult]]
TOLERANCE = 0.02  # the bracket's width against its lower end when bisection stops
# A sensitivity case's: its figure moves with the knee it finds, and the base knees' spread over three
# seeds is 3.5-10% of their mean (docs/results.md, "Economics at the report's scale"), so a 2% bracket
# resolves the seed's noise rather than the case's effect, at one or two more points a search.
CASE_TOLERANCE = 0.04
MAX_POINTS = 16  # a search that has not converged by then says so


@dataclass(frozen=True)
class Knee:
    method: str  # "bisection" or "grid"
    points: tuple[PointResult, ...]  # in the order they were run
    best: MaxGoodput
    converged: bool  # bisection: the bracket is within the tolerance; grid: a failing point lies above

    @property
    def goodput_rps(self) -> float | None:
        return self.best.goodput_rps

    def at_knee(self) -> PointResult | None:
        """The highest passing point: where the validity checks and TTFTs are read."""
        passing = [p for p in self.points if p.attainment >= THRESHOLD]
        return max(passing, key=lambda p: p.load) if passing else None

    def bracket(self) -> tuple[float, float | None] | None:
        """(the highest passing load, the lowest failing load above it or None); None when nothing passed."""
        knee = self.at_knee()
        if knee is None:
            return None
        above = [p.load for p in self.points if p.load > knee.load and p.attainment < THRESHOLD]
        return knee.load, min(above, default=None)


def _knee(method: str, points: list[PointResult], converged: bool) -> Knee:
    return Knee(method, tuple(points), max_goodput([p.as_load_point() for p in points]), converged)


async def bisect_knee(run: RunPoint, first: float, tolerance: float = TOLERANCE, integral: bool = False,
                      max_points: int = MAX_POINTS, smallest: float = 1.0, factor: float = 2.0,
                      then: float | None = None) -> Knee:
    """Step up (or down) by `factor` from `first` until the 90% crossing is bracketed, then halve the bracket
    to `tolerance`.

    A search warm-started at a knee already found (a sensitivity case's base deployment's) starts
    at its last passing load, tries `then` (its first failing one) if that passes, and steps by a
    small `factor`: where the case changes nothing the knee's two points are the whole search,
    and elsewhere the bracket starts narrow, so fewer halvings follow.
    Each further step the same way is at least four tolerances wide (16% at a case's 4%): a bracket
    that wide takes two halvings, as the first 8% step's does at 2%, and a knee the case moved
    far is reached in half the steps.
    `integral` loads (agents) also stop once the bracket is one apart.
    """
    points: list[PointResult] = []

    async def at(load: float) -> PointResult:
        point = await run(float(round(load)) if integral else load)
        points.append(point)
        return point

    low = high = None
    load = first
    direction = 0  # the walk's last step: +1 up, -1 down
    stride = max(factor, 1 + 4 * tolerance)  # every step after the first one the same way
    while len(points) < max_points:
        point = await at(load)
        passed = point.attainment >= THRESHOLD
        if passed:
            low = point.load
        else:
            high = point.load
        if low is not None and high is not None or not passed and point.load <= smallest:
            break
        if passed and then is not None and len(points) == 1:
            load = then
            continue
        way = 1 if passed else -1
        step = stride if way == direction else factor
        direction = way
        load = _step(point.load, step, integral) if passed else max(smallest, _step(point.load, 1 / step, integral))
    if low is None or high is None:
        return _knee("bisection", points, False)
    while len(points) < max_points and not _narrow(low, high, tolerance, integral):
        point = await at((low + high) / 2)
        if point.attainment >= THRESHOLD:
            low = point.load
        else:
            high = point.load
    return _knee("bisection", points, _narrow(low, high, tolerance, integral))


def _step(load: float, factor: float, integral: bool) -> float:
    """`load` times `factor`; whole agents move by one at least, where a small factor would round back."""
    moved = load * factor
    if not integral:
        return moved
    return max(load + 1, round(moved)) if factor > 1 else min(load - 1, round(moved))


def _narrow(low: float, high: float, tolerance: float, integral: bool) -> bool:
    return high - low <= max(1.0 if integral else 0.0, tolerance * low)


async def grid(run: RunPoint, loads: tuple[float, ...]) -> Knee:
    """Every given load, in order (a short run's few points; the knee is bounded only if one fails)."""
    points = [await run(load) for load in loads]
    return _knee("grid", points, any(p.attainment < THRESHOLD for p in points))


@dataclass(frozen=True)
class OverSeeds:
    """One deployment's max goodput over seeds: mean and spread (sample standard deviation)."""

    knees: tuple[Knee, ...]

    @property
    def values(self) -> list[float]:
        return [k.goodput_rps for k in self.knees if k.goodput_rps is not None]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def spread(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0
