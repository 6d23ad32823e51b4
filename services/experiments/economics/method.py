"""The economics method on any load-point backend: knees per deployment and seed, then the headline figures.

1. Each deployment's knee: a grid of given loads (short runs) or the bisection
   to 2% (search.py), per seed; the max goodput is the mean over seeds.
2. The reference load is the baseline's highest load within SLA (first seed);
   TTFTs are compared there, as the report compares its deployments at one load
   (a deployment whose search did not run that load runs one point there).
3. Cost, BCR and the headline figures (figures.py); the validity checks at
   every knee (validity.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Awaitable

from services.experiments.economics.figures import Deployment, headline
from services.experiments.economics.loadpoint import LoadPointRunner, PointResult
from services.experiments.economics.search import TOLERANCE, Knee, OverSeeds, bisect_knee, grid
from services.experiments.economics.validity import verdicts
from services.scenario import Scenario


@dataclass(frozen=True)
class Plan:
    workload: str
    seeds: tuple[int, ...] = (0,)
    loads: tuple[float, ...] | None = None  # a grid; None: bisect from first_load
    first_load: float = 32.0
    integral: bool = True  # loads are agents; False: a trace's replay speed
    smallest: float = 1.0  # the bisection halves no lower than this
    # per deployment, a knee found before: its last passing and first failing load (None: none failed)
    starts: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    factor: float = 2.0  # the bisection's step while it brackets the knee, from a start (search.py)
    tolerance: float = TOLERANCE  # the bracket's width, against its lower end, where the bisection stops
    # per deployment, a warm start at the found knee times this (a case that scales the tier setting it)
    start_scales: dict[str, float] = field(default_factory=dict)
    compare_ttfts: bool = True  # run every deployment at the baseline's knee load to compare TTFTs there
    # deployments run at the reference load only, for the TTFT figure, with no search of their own
    reference_only: frozenset[str] = frozenset()

    def warm(self, knees: dict[str, OverSeeds], factor: float) -> Plan:
        """This plan started at each deployment's knee in `knees` (found before), stepping by `factor`.

        Where `start_scales` has a deployment's key, its search starts at the knee's load times that,
        and the failing load found above the knee says nothing there.
        """
        starts = {key: bracket for key, over in knees.items() if (bracket := over.knees[0].bracket()) is not None}
        starts = {key: (_scaled(bracket[0], self.start_scales[key], self.integral), None)
                  if self.start_scales.get(key, 1.0) != 1.0 else bracket for key, bracket in starts.items()}
        return replace(self, starts=starts, factor=factor)


def _scaled(load: float, scale: float, integral: bool) -> float:
    return float(max(1, round(load * scale))) if integral else load * scale


@dataclass
class Outcome:
    """Every deployment's knees, the headline figures and the checks at each knee."""

    knees: dict[str, OverSeeds]
    deployments: dict[str, Deployment]
    figures: dict[str, float | None]
    checks: dict[str, list[str]] = field(default_factory=dict)  # per deployment, one line per verdict

    def summary(self) -> dict:
        return {key: {"scenario": d.scenario.name, "cost_per_hour": round(d.cost_per_hour, 2),
                      "max_goodput_rps": {"mean": self.knees[key].mean, "spread": self.knees[key].spread,
                                          "seeds": self.knees[key].values},
                      "bounded": all(k.converged for k in self.knees[key].knees),
                      "method": self.knees[key].knees[0].method, "bcr": d.bcr,
                      "points": [{"load": p.load, "attainment": p.attainment, "goodput_rps": p.goodput_rps,
                                  "ttft_p99_s": p.ttft_s.p99, "stopped_at_verdict": p.stopped_at_verdict}
                                 for p in self.knees[key].knees[0].points],
                      "checks": self.checks.get(key, [])}
                for key, d in self.deployments.items() if key in self.knees}


async def knee_of(runner: LoadPointRunner, scenario: Scenario, plan: Plan, seed: int, key: str = "") -> Knee:
    if plan.loads is not None:
        return await grid(lambda load: runner.run_point(scenario, plan.workload, load, seed), plan.loads)
    first, then = plan.starts.get(key, (plan.first_load, None))
    return await bisect_knee(lambda load: runner.run_point(scenario, plan.workload, load, seed), first,
                             integral=plan.integral, smallest=plan.smallest,
                             factor=plan.factor if key in plan.starts else 2.0, then=then,
                             tolerance=plan.tolerance)


async def together(runner: LoadPointRunner, jobs: list[Awaitable]) -> list:
    """The jobs' results in order: all at once on a `parallel` runner, else one after another."""
    if getattr(runner, "parallel", False):
        return list(await asyncio.gather(*jobs))
    return [await job for job in jobs]


async def _at(runner: LoadPointRunner, scenario: Scenario, plan: Plan, searched: tuple[PointResult, ...],
              load: float | None) -> PointResult | None:
    """The deployment's point at `load`: the one its search ran there (`searched`), else one run there now.

    A bisection visits loads of its own, so another deployment's knee is seldom among them; a
    point at a nearby load would compare TTFTs at unequal loads, near a knee far apart. The TTFTs
    are a whole window's: a search's point that ended at its verdict is run again whole.
    """
    if load is None:
        return None
    for point in searched:
        if point.load == load and not point.stopped_at_verdict:
            return point
    whole = {"whole": True} if getattr(runner, "stops_at_verdict", False) else {}
    return await runner.run_point(scenario, plan.workload, load, plan.seeds[0], **whole)


async def run_method(runner: LoadPointRunner, scenarios: dict[str, Scenario], plan: Plan, log=print) -> Outcome:
    """`scenarios` holds "pd-intra" and "pdd", and "pd-cross" for the TTFT figure (and any other arms) by key.

    A deployment in `plan.reference_only` is not searched: it runs the reference load alone, for
    the TTFT figure, and has no knee, goodput or checks.

    A `parallel` runner is asked for every deployment's and seed's search at once (each search is
    itself one point after another); any other runs them in turn (a mesh point owns the machine).
    """
    async def search(key: str, seed: int) -> Knee:
        knee = await knee_of(runner, scenarios[key], plan, seed, key)
        log(f"  {key} seed {seed}: " + ", ".join(f"{p.load:g}: {p.attainment:.0%}" for p in knee.points)
            + f" -> {knee.goodput_rps if knee.goodput_rps is None else round(knee.goodput_rps, 3)} req/s")
        return knee

    searched = [key for key in scenarios if key not in plan.reference_only]
    searches = [(key, seed) for key in searched for seed in plan.seeds]
    found = await together(runner, [search(key, seed) for key, seed in searches])
    knees = {key: OverSeeds(tuple(k for (k_key, _), k in zip(searches, found) if k_key == key)) for key in searched}
    base_knee = knees["pd-intra"].knees[0].at_knee()
    reference = base_knee.load if base_knee and plan.compare_ttfts else None
    points = await together(runner, [_at(runner, scenarios[key], plan,
                                         knees[key].knees[0].points if key in knees else (), reference)
                                     for key in scenarios])
    deployments = {key: Deployment(key, scenarios[key], knees[key].mean, point, knees[key].knees[0].at_knee())
                   if key in knees else Deployment(key, scenarios[key], None, point, None)
                   for key, point in zip(scenarios, points)}
    figures = headline(deployments["pd-intra"], deployments.get("pd-cross"), deployments["pdd"])
    checks = {key: [v.line() for v in verdicts(d.knee.stats)] if d.knee else ["no load within SLA"]
              for key, d in deployments.items() if key in knees}
    return Outcome(knees, deployments, figures, checks)
