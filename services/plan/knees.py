"""Simulated knees: the economics experiment's search (services/experiments/economics/search.py) on the planner's
candidates, warm-started from the screen, and the finalists' knees over seeds with a confidence interval.

A load is an open-loop request rate (simpoint.py `open_loop`), so a knee rate is what
`pdd-emu simulate --rate` offers. Points go through the economics point memo with a
store: a plan stopped midway and run again answers every point it already ran from
disk, and a point two searches ask for runs once. With `workers` above 1 or a Ray
address the points run in parallel on Ray, as the sweeps do.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from scipy import stats as scipy_stats
from tqdm import tqdm

from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.memo import PointMemo
from services.experiments.economics.method import together
from services.experiments.economics.search import Knee, bisect_knee
from services.experiments.economics.simpoint import SimulatedPoints
from services.plan.screen import Screened
from services.plan.spec import PlanSpec
from services.scenario import Scenario

WARM_START = 0.8  # the first point at this share of the screen's knee rate: the screen is an upper estimate
FIRST_STEP = 1.25  # steps from the screen's guess, to the crossing
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Simulated:
    screened: Screened
    scenario: Scenario
    knees: tuple[Knee, ...]  # one per seed, seed 0 first

    @property
    def values(self) -> list[float]:
        return [k.goodput_rps for k in self.knees if k.goodput_rps is not None]

    @property
    def goodput_rps(self) -> float:
        return statistics.fmean(self.values) if self.values else 0.0

    @property
    def knee_rate_rps(self) -> float:
        rates = [k.best.load for k in self.knees if k.best.load is not None]
        return statistics.fmean(rates) if rates else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """The mean knee's two-sided 95% t interval over seeds; one seed gives a point."""
        values = self.values
        if len(values) < 2:
            return (self.goodput_rps, self.goodput_rps)
        half = scipy_stats.t.ppf((1 + CONFIDENCE) / 2, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
        return (self.goodput_rps - half, self.goodput_rps + half)

    @property
    def bounded(self) -> bool:
        return all(k.converged for k in self.knees)

    def at_knee(self) -> PointResult | None:
        return self.knees[0].at_knee()

    def goodput_at(self, rate: float) -> float | None:
        """The goodput seed 0's search measured at `rate`: linear between the points around it, else the nearest
        passing point's goodput per offered request times `rate` (below every point, goodput follows the load)."""
        points = sorted(self.knees[0].points, key=lambda p: p.load)
        for low, high in zip(points, points[1:]):
            if low.load <= rate <= high.load:
                share = (rate - low.load) / (high.load - low.load) if high.load > low.load else 0.0
                return low.goodput_rps + share * (high.goodput_rps - low.goodput_rps)
        passing = [p for p in points if p.attainment >= 0.9]
        nearest = min(passing, key=lambda p: abs(p.load - rate), default=None)
        return None if nearest is None else nearest.goodput_rps / nearest.load * rate


class _Progress:
    """The memo's points counted on a tqdm bar (a point answered from the store counts too)."""

    def __init__(self, memo: PointMemo, bar: tqdm) -> None:
        self.memo, self.bar = memo, bar
        self.backend, self.parallel, self.stops_at_verdict = memo.backend, memo.parallel, memo.stops_at_verdict

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int, **options) -> PointResult:
        point = await self.memo.run_point(scenario, workload, load, seed, **options)
        self.bar.update(1)
        self.bar.set_postfix_str(f"{scenario.mode.value} {load:.3g} req/s: {point.attainment:.0%}")
        return point


class KneeSearch:
    """The simulated stage's runner: one per plan."""

    def __init__(self, spec: PlanSpec, out: Path, quick: bool, workers: int = 1, ray_address: str | None = None,
                 progress: bool = True) -> None:
        search = spec.search
        points = SimulatedPoints(out / "runs", search.warmup_s, search.measure_s, search.window_requests,
                                 workers=workers, ray_address=ray_address, open_loop=True)
        self.memo = PointMemo(points, store=out / "points", resume=True)
        self.bar = tqdm(unit="point", desc="simulated points", disable=not progress, leave=False)
        self.runner = _Progress(self.memo, self.bar)
        self.spec, self.tolerance = spec, 0.08 if quick else 0.04

    async def knee(self, scenario: Scenario, seed: int, first: float, then: float | None = None) -> Knee:
        def run(load: float):
            return self.runner.run_point(scenario, self.spec.workload, load, seed)

        factor = 1 + 4 * self.tolerance if then is not None else FIRST_STEP
        return await bisect_knee(run, first, tolerance=self.tolerance, smallest=max(0.01, first / 64),
                                 factor=factor, then=then)

    async def first_seed(self, screened: list[Screened]) -> list[Simulated]:
        """Seed 0's knee of every candidate, each search starting at its screen knee."""
        scenarios = [s.candidate.scenario(self.spec) for s in screened]
        knees = await together(self.runner, [self.knee(sc, 0, max(0.05, s.knee_rate_rps * WARM_START))
                                             for s, sc in zip(screened, scenarios)])
        return [Simulated(s, sc, (k,)) for s, sc, k in zip(screened, scenarios, knees)]

    async def over_seeds(self, finalist: Simulated, seeds: int) -> Simulated:
        """The finalist's knee on seeds 1.. as well, each started at seed 0's bracket."""
        bracket = finalist.knees[0].bracket()
        if bracket is None or seeds < 2:
            return finalist
        more = await together(self.runner, [self.knee(finalist.scenario, seed, bracket[0], bracket[1])
                                            for seed in range(1, seeds)])
        return Simulated(finalist.screened, finalist.scenario, (*finalist.knees, *more))

    def close(self) -> dict[str, int]:
        self.bar.close()
        self.memo.close()
        return {"run": self.memo.run, "reused": self.memo.reused, "loaded": self.memo.loaded}
