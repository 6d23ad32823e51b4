"""Where the line, not prefill, sets the TTFT tail: cross-DC PD against PDD at one load of the report's workload.

    python -m benchmarks.economics_line_tail [--agents 64] [--rates 20gbit 12gbit] [--seeds 1] [--workers 2]
                                             [--out DIR]

The economics experiment reads PDD's TTFT P99 reduction at the baseline's knee, where one shared prefill
tier is 94-96% busy and the tail is prefill's queue in every deployment (docs/results.md, "Economics at the
report's scale"). The report's reduction comes from its line. This runs a load below the prefill knee at
46 KB of KV a token (the article's 4649 KB a 100-token handoff, the experiment's "KV bytes per token"
case), on the 20 Gbit/s line as sized and on slower ones, so that the line's queue, not prefill's, makes
the tail: cross-DC PD, PDD as sized, PDD with a second relay instance, and PDD with a 2 s pipeline
threshold. Each point is the experiment's (120 s of warm-up, then 300 s or 3000 requests, the whole
window); with --out an economics run's folder, points it ran are read back. With --seeds N every point
runs at seeds 0 .. N-1, since one window's tail is a draw (docs/results.md, "The line's cases over
seeds"). About 3 minutes a seed on 2 cores; docs/results.md ("Where the line sets the tail") records
a run.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from benchmarks.economics_points import add_point_options, run_with_points
from services.experiments.economics.experiment import WORKLOAD
from services.experiments.economics.experiment import point_runner as experiment_points
from services.experiments.economics.loadpoint import PointResult
from services.scenario import load_scenario

KV_46K = "model=pdd-paper-kv46k"
ARMS = {  # label -> (preset, overrides beyond the model and the line's rate)
    "cross-DC PD": ("paper-full-pd-cross", ()),
    "PDD": ("paper-full-pdd", ()),
    "PDD, 2 relay instances": ("paper-full-pdd", ("pools.relay-decode.count=2",)),
    "PDD, threshold 2 s": ("paper-full-pdd", ("pdd.transfer_threshold_s=2.0",)),
}


def row(label: str, rate: str, seed: int, point: PointResult, relayed: bool) -> str:
    s, t = point.stats, point.ttft_s
    relay, ended_on_relay = (f"{s.rld_token_share:.1%}", f"{s.singular_share:.0%}") if relayed else ("-", "-")
    return (f"| {label} | {rate} | {seed} | {s.wan_utilisation:.0%} | {s.prefill_busy:.0%} | {point.attainment:.1%} | "
            f"{t.p50:.2f} / {t.p90:.2f} / {t.p99:.2f} | {relay} | {ended_on_relay} |")


async def main(agents: int, rates: list[str], seeds: int, workers: int, out: Path) -> None:
    runner = experiment_points("simulate", False, out / "runs", workers, resume=True)
    jobs = [(label, rate, seed, load_scenario(preset, [KV_46K, f"wan.rate_bps={rate}", *extra]))
            for rate in rates for label, (preset, extra) in ARMS.items() for seed in range(seeds)]
    try:
        points = await asyncio.gather(*(runner.run_point(scenario, WORKLOAD, agents, seed, whole=True)
                                        for _, _, seed, scenario in jobs))
    finally:
        runner.close()
    print(f"{agents} agents of {WORKLOAD}, 46 KB of KV a token, seeds 0-{seeds - 1}\n")
    print("| deployment | line | seed | line used | prefill busy | within SLA | TTFT P50 / P90 / P99 s | "
          "relay's tokens | requests ending on the relay |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for (label, rate, seed, _), point in zip(jobs, points):
        print(row(label, rate, seed, point, ARMS[label][0] == "paper-full-pdd"), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=64, help="the population (default 64: prefill about 60%% busy)")
    parser.add_argument("--rates", nargs="+", default=["20gbit", "12gbit"], help="line rates (default 20gbit 12gbit)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0 .. N-1 of every point (default 1)")
    add_point_options(parser)
    args = parser.parse_args()
    if args.agents < 1 or args.seeds < 1:
        parser.error("--agents and --seeds must be at least 1")
    run_with_points(parser, args, lambda workers, out: main(args.agents, args.rates, args.seeds, workers, out))
