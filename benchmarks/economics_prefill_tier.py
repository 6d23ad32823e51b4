"""The economics gap's named cause, moved: the baseline and PDD with twice the prefill tier.

    python -m benchmarks.economics_prefill_tier [--instances 4] [--out DIR]   # about 10 minutes on 2 cores

The economics experiment's knees all sit where the one shared prefill tier (2 x 16 H100, sized to carry
the report's SLA goodput at 70% busy; docs/simulate.md "Deployments at the report's scale") saturates.
This runs the experiment's own simulated points (the report's agentic workload, seed 0, its warm-up and
window) for the intra-DC baseline and PDD with `pools.prefill.count` instances, searches each knee by
the experiment's bisection (started at twice the base knees, stepping 25%), and prints each knee, its
validity checks, the cost and the BCR gain of PDD against the baseline. docs/results.md ("Economics:
the prefill tier") records a run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from services.experiments.economics.experiment import WORKLOAD
from services.experiments.economics.search import bisect_knee
from services.experiments.economics.simpoint import SimulatedPoints
from services.experiments.economics.validity import verdicts
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour

# The full run's base knees (docs/results.md): the last passing loads, in agents.
BASE_KNEE_AGENTS = {"paper-full-pd-intra": 172, "paper-full-pdd": 168}
START_FACTOR = 2.0  # twice the prefill tier: a knee near twice the base's, if prefill sets it
STEP = 1.25


async def knee(points: SimulatedPoints, preset: str, instances: int) -> tuple[float, float, list[str], str]:
    scenario = load_scenario(preset, [f"pools.prefill.count={instances}"])
    found = await bisect_knee(lambda load: points.run_point(scenario, WORKLOAD, load, 0),
                              BASE_KNEE_AGENTS[preset] * START_FACTOR, integral=True, factor=STEP)
    at = found.at_knee()
    if at is None:
        raise SystemExit(f"{preset}: no load passed ({found.points[0].load:g} agents and below); start lower")
    path = ", ".join(f"{p.load:g}: {p.attainment:.0%}" for p in found.points)
    checks = [f"{v.name} {v.value}{'' if v.ok is not False else ' (' + v.says + ')'}" for v in verdicts(at.stats)]
    print(f"{preset}: {path} -> {found.goodput_rps:.2f} req/s at {at.load:g} agents", flush=True)
    return found.goodput_rps, cost_per_hour(scenario), checks, f"{at.load:g}"


async def main(instances: int, out: Path) -> None:
    points = SimulatedPoints(out, workers=1)
    rows = {preset: await knee(points, preset, instances) for preset in BASE_KNEE_AGENTS}
    print("\n| deployment | $/h | max goodput | BCR | checks at the knee |\n| --- | ---: | ---: | ---: | --- |")
    for preset, (goodput, cost, checks, agents) in rows.items():
        print(f"| {preset}, prefill {instances} x 16 | {cost:.2f} | {goodput:.1f} req/s ({agents}) | "
              f"{goodput / cost:.4f} | {'; '.join(checks)} |")
    (base, base_cost, *_), (pdd, pdd_cost, *_) = rows.values()
    print(f"\ngoodput gain {pdd / base - 1:+.1%}, cost reduction {1 - pdd_cost / base_cost:.1%}, "
          f"BCR gain {(pdd / pdd_cost) / (base / base_cost) - 1:+.1%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=4, help="prefill instances of 16 H100 (base: 2)")
    parser.add_argument("--out", type=Path, default=None, help="where the points' bench outputs go (a temp dir)")
    args = parser.parse_args()
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    with tempfile.TemporaryDirectory() as temp:
        asyncio.run(main(args.instances, args.out or Path(temp)))
