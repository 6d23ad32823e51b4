"""The economics gap's named cause over seeds: the baseline and PDD with the prefill tier as sized and doubled.

    python -m benchmarks.economics_prefill_tier [--seeds 3] [--workers 2] [--out DIR]

The economics experiment's knees all sit where the one shared prefill tier (2 x 16 H100, sized to carry
the report's SLA goodput at 70% busy; docs/simulate.md "Deployments at the report's scale") saturates,
and its tornado has the tier doubled as one case, on one seed. Near that knee one seed's reading moves
with where its search lands on the cliff, so this runs the experiment's own two searches per seed (the
base deployments' bisection from 32 agents, then the "prefill tier" case started at twice each base
knee, stepping by the experiment's WARM_FACTOR) for every seed, and prints each seed's knees and BCR
gain and their mean and spread. Points are the experiment's (`experiment economics`): with --out an
economics run's folder, the points it ran are read back, not run again. About 15 minutes a seed on
2 cores; docs/history/economics-2026-12-04-prefill-tier-and-warmup.md records a run.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

from benchmarks.economics_points import add_point_options, run_with_points
from services.experiments.economics.arms import DEPLOYMENTS
from services.experiments.economics.cases import TORNADO_DEPLOYMENTS, sensitivity_cases
from services.experiments.economics.experiment import WARM_FACTOR, WORKLOAD
from services.experiments.economics.experiment import point_runner as experiment_points
from services.experiments.economics.method import Outcome, Plan, run_method
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour

CASE = "prefill tier"


def per_seed_bcr_gain(outcome: Outcome) -> list[float]:
    intra, pdd = (outcome.deployments[key] for key in TORNADO_DEPLOYMENTS)
    return [(p / pdd.cost_per_hour) / (i / intra.cost_per_hour) - 1
            for i, p in zip(outcome.knees["pd-intra"].values, outcome.knees["pdd"].values)]


def describe(label: str, outcome: Outcome, seeds: tuple[int, ...]) -> None:
    gains = per_seed_bcr_gain(outcome)
    for key in TORNADO_DEPLOYMENTS:
        scenario = outcome.deployments[key].scenario
        knees = ", ".join(f"seed {s}: " + (f"{k.goodput_rps:.1f} req/s at {k.at_knee().load:g} agents"
                                                if k.at_knee() is not None else "no load within SLA")
                          for s, k in zip(seeds, outcome.knees[key].knees))
        print(f"{label}, {key} (${cost_per_hour(scenario):.2f}/h): {knees}", flush=True)
    print(f"{label}, BCR gain by seed: {', '.join(f'{g:+.1%}' for g in gains)}; mean {statistics.mean(gains):+.1%}"
          + (f", spread {statistics.stdev(gains):.1%}" if len(gains) > 1 else ""), flush=True)


async def main(seeds: tuple[int, ...], workers: int, out: Path) -> None:
    runner = experiment_points("simulate", False, out / "runs", workers, resume=True)
    plan = Plan(WORKLOAD, seeds, compare_ttfts=False)
    log = lambda line: print(line, flush=True)  # noqa: E731
    try:
        base = await run_method(runner, {key: load_scenario(DEPLOYMENTS[key]) for key in TORNADO_DEPLOYMENTS},
                                plan, log)
        _, _, scenarios, case_plan = next(case for case in sensitivity_cases(plan) if case[0] == CASE)
        moved = await run_method(runner, scenarios, replace(case_plan, seeds=seeds).warm(base.knees, WARM_FACTOR),
                                 log)
    finally:
        runner.close()
    print(f"\n{runner.run} points run, {runner.reused} answered from a point already run ({runner.loaded} read back)")
    describe("prefill 2 x 16", base, seeds)
    describe("prefill 4 x 16", moved, seeds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    add_point_options(parser)
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    run_with_points(parser, args, lambda workers, out: main(tuple(range(args.seeds)), workers, out))
