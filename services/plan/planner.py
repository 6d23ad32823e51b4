"""`pdd-emu plan`: each architecture's best deployment for the money, optimum against optimum (docs/plan.md).

1. The screen (screen.py) rates every candidate of the search space (space.py) from its stages' capacities.
2. The best `finalists` per architecture by the objective get a simulated knee (knees.py), warm-started there.
3. Each architecture's best simulated candidate is its optimum; its knee is confirmed over `seeds` seeds.
4. The winner: the most goodput within the budget, or the least cost reaching the target goodput; a tie where
   the runner-up's confidence interval reaches the winner's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from services.experiments.economics.method import together
from services.plan.knees import KneeSearch, Simulated
from services.plan.screen import Screened, screen
from services.plan.space import candidates
from services.plan.spec import PlanSpec
from services.plan.workload import WorkloadSample, sample_workload


def ranked(spec: PlanSpec, screened: list[Screened]) -> list[Screened]:
    """Best first by the objective; the candidate itself breaks ties, so the order is the same at any prices."""
    if spec.objective == "max-goodput":
        return sorted(screened, key=lambda s: (-s.goodput_rps, s.cost_per_hour, s.candidate.key()))
    meets = [s for s in screened if s.goodput_rps >= spec.target_rps]
    return sorted(meets, key=lambda s: (s.cost_per_hour, -s.goodput_rps, s.candidate.key()))


def screen_all(spec: PlanSpec, sample: WorkloadSample) -> dict[str, list[Screened]]:
    """Every architecture's candidates, screened and ranked."""
    return {arch: ranked(spec, [screen(c, spec, sample) for c in candidates(spec, sample, arch)])
            for arch in spec.architectures}


def frontier(screened: list[Screened]) -> list[Screened]:
    """The cost-goodput Pareto front: each candidate no cheaper one matches in goodput, cheapest first."""
    front, best = [], -1.0
    for s in sorted(screened, key=lambda s: (s.cost_per_hour, -s.goodput_rps, s.candidate.key())):
        if s.goodput_rps > best:
            front.append(s)
            best = s.goodput_rps
    return front


@dataclass
class Plan:
    spec: PlanSpec
    sample: WorkloadSample
    screened: dict[str, list[Screened]]
    optimum: dict[str, Simulated | None]  # None: no candidate within the budget (or none reaching the target)
    winner: str | None
    tie: list[str]  # architectures within the winner's spread (the winner included), or empty
    points: dict[str, int]


def _choose(spec: PlanSpec, simulated: list[Simulated]) -> Simulated | None:
    if not simulated:
        return None
    if spec.objective == "max-goodput":
        return max(simulated, key=lambda s: (s.goodput_rps, -s.screened.cost_per_hour))
    meets = [s for s in simulated if s.goodput_rps >= spec.target_rps]
    if not meets:
        return None
    return min(meets, key=lambda s: (s.screened.cost_per_hour, -s.goodput_rps))


def _winner(spec: PlanSpec, optimum: dict[str, Simulated | None]) -> tuple[str | None, list[str]]:
    found = {arch: s for arch, s in optimum.items() if s is not None}
    if not found:
        return None, []
    if spec.objective == "max-goodput":
        winner = max(found, key=lambda a: (found[a].goodput_rps, -found[a].screened.cost_per_hour))
        low = found[winner].interval[0]
        tie = [a for a, s in found.items() if a != winner and s.interval[1] >= low and s.goodput_rps > 0]
    else:
        winner = min(found, key=lambda a: (found[a].screened.cost_per_hour, -found[a].goodput_rps))
        best = found[winner]
        spread = (best.interval[1] - best.interval[0]) / 2 / best.goodput_rps if best.goodput_rps else 0.0
        tie = [a for a, s in found.items()
               if a != winner and s.screened.cost_per_hour <= best.screened.cost_per_hour * (1 + spread)]
    return winner, ([winner, *tie] if tie else [])


async def _simulate(spec: PlanSpec, screened: dict[str, list[Screened]], search: KneeSearch, finalists: int,
                    seeds: int) -> dict[str, Simulated | None]:
    tops = {arch: [s for s in rows if s.goodput_rps > 0][:finalists] for arch, rows in screened.items()}
    flat = [(arch, s) for arch, rows in tops.items() for s in rows]
    done = await search.first_seed([s for _, s in flat])
    chosen = {arch: _choose(spec, [d for (a, _), d in zip(flat, done) if a == arch]) for arch in tops}
    confirmed = await together(search.runner, [search.over_seeds(s, seeds) for s in chosen.values() if s is not None])
    by_arch = iter(confirmed)
    return {arch: next(by_arch) if s is not None else None for arch, s in chosen.items()}


def run_plan(spec: PlanSpec, out: Path, quick: bool = False, seeds: int | None = None, workers: int = 1,
             ray_address: str | None = None, progress: bool = True, log=print) -> Plan:
    sample = sample_workload(spec.workload)
    screened = screen_all(spec, sample)
    log(f"screened {sum(len(v) for v in screened.values())} candidates: "
        + ", ".join(f"{arch} {len(rows)}" for arch, rows in screened.items()))
    finalists = 1 if quick else spec.search.finalists
    seeds = seeds or (1 if quick else spec.seeds)
    search = KneeSearch(spec, out, quick, workers, ray_address, progress)
    try:
        optimum = asyncio.run(_simulate(spec, screened, search, finalists, seeds))
    finally:
        points = search.close()
    winner, tie = _winner(spec, optimum)
    return Plan(spec, sample, screened, optimum, winner, tie, points)
