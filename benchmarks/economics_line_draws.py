"""The economics cases where the line is loaded, over seeds: which of their figures are a draw.

    python -m benchmarks.economics_line_draws [--seeds 3] [--agents-kv 100] [--agents-window 194] [--workers 2]
                                              [--out DIR]

Two of the experiment's sensitivity cases put load on the WAN (docs/results.md, "Economics: the line's
cases over seeds"), and a full run reads each at one seed:
- 46 KB of KV a token, at the case's reference load (the baseline's knee, 100 agents): PDD's TTFT P99
  against cross-DC PD's, and the relay's share of the tokens. Each tail is split into the time to
  prefill's end (its queue and compute) and the rest (the KV's wait, the first token's way), from the
  `pdd` timeline of the tail's requests (TTFT at least 0.8 of the P99).
- The WAN connections held to a 3 MiB window, at the base run's reference load (194 agents): PDD's
  estimate of its transfers against the 500 ms threshold, per 30 s of the window. A run can tip into
  a state that holds itself: turns that end on the relay leave main decode without their context, so
  the next turns ship more, the four windowed connections stay full and the estimates stay over the
  threshold.
Each point is the experiment's own (120 s of warm-up, then 300 s or 3000 requests, the whole window), so
with --out an economics run's folder its points are read back. About 8 minutes for three seeds on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path

from benchmarks.economics_points import add_point_options, run_with_points
from services.experiments.economics.experiment import WORKLOAD
from services.experiments.economics.experiment import point_runner as experiment_points
from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.simpoint import point_folder
from services.scenario import Scenario, load_scenario

CASES = {  # label -> the case's overrides, as services/experiments/economics/sensitivity.py sets them
    "46 KB of KV a token": ("model=pdd-paper-kv46k",),
    "WAN connection window 3 MiB": (f"wan.window_bytes={3 * 2**20}",),
}
SPAN_S = 30.0  # the window's spans whose median estimate is read against the threshold
TAIL = 0.8  # a tail request: TTFT at least this share of the P99


def records(out: Path, scenario: Scenario, load: int, seed: int) -> list[dict]:
    """The point's whole window, as measured_point wrote it."""
    folder = point_folder(out / "runs", scenario, WORKLOAD, load, seed, whole=True)
    return [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]


def prefill_share_of_tail(rows: list[dict], p99: float) -> float:
    """Mean share of a tail request's time to its first token spent until prefill ended."""
    shares = []
    for r in rows:
        t = r["pdd"]["timeline"]
        if r["ttft_s"] is not None and r["ttft_s"] >= TAIL * p99 and t["first_token"] > t["received"]:
            shares.append((t["prefill_done"] - t["received"]) / (t["first_token"] - t["received"]))
    return statistics.fmean(shares) if shares else float("nan")


def spans_over(rows: list[dict], threshold_s: float) -> str:
    """How many of the window's spans had a median transfer estimate over the threshold."""
    start = min(r["send_s"] for r in rows)
    spans: dict[int, list[float]] = {}
    for r in rows:
        estimate = (r["pdd"].get("policy") or {}).get("estimate_s")
        if estimate is not None:
            spans.setdefault(int((r["send_s"] - start) // SPAN_S), []).append(estimate)
    return f"{sum(statistics.median(v) > threshold_s for v in spans.values())}/{len(spans)}"


def case_row(seed: int, pdd: tuple[PointResult, list[dict]], cross: tuple[PointResult, list[dict]],
             threshold_s: float) -> tuple[str, float]:
    (p, p_rows), (c, c_rows) = pdd, cross
    reduction = 1 - p.ttft_s.p99 / c.ttft_s.p99
    return (f"| {seed} | {p.ttft_s.p99:.2f} | {c.ttft_s.p99:.2f} | {reduction:+.1%} | {p.stats.rld_token_share:.1%} | "
            f"{p.stats.singular_share:.1%} | {prefill_share_of_tail(p_rows, p.ttft_s.p99):.0%} / "
            f"{prefill_share_of_tail(c_rows, c.ttft_s.p99):.0%} | {spans_over(p_rows, threshold_s)} |", reduction)


async def main(seeds: int, loads: dict[str, int], workers: int, out: Path) -> None:
    runner = experiment_points("simulate", False, out / "runs", workers, resume=True)
    jobs = [(label, seed, key, load_scenario(preset, list(overrides)))
            for label, overrides in CASES.items() for seed in range(seeds)
            for key, preset in (("pdd", "paper-full-pdd"), ("cross", "paper-full-pd-cross"))]
    try:
        points = await asyncio.gather(*(runner.run_point(scenario, WORKLOAD, loads[label], seed, whole=True)
                                        for label, seed, _, scenario in jobs))
    finally:
        runner.close()
    found = {(label, seed, key): (point, records(out, scenario, loads[label], seed))
             for (label, seed, key, scenario), point in zip(jobs, points)}
    threshold_s = next(s for _, _, key, s in jobs if key == "pdd").pdd.transfer_threshold_s
    for label in CASES:
        print(f"\n{label}, {loads[label]} agents of {WORKLOAD}\n")
        print("| seed | PDD TTFT P99 s | cross-DC PD TTFT P99 s | reduction | relay's tokens | requests ending on "
              "the relay | tail's time to prefill's end, PDD / cross-DC PD | spans over the threshold |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        reductions = []
        for seed in range(seeds):
            line, reduction = case_row(seed, found[label, seed, "pdd"], found[label, seed, "cross"], threshold_s)
            reductions.append(reduction)
            print(line, flush=True)
        spread = f", sample std {statistics.stdev(reductions):.1%}" if seeds > 1 else ""
        print(f"\nTTFT P99 reduction over the seeds: mean {statistics.fmean(reductions):+.1%}{spread}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 (default 3)")
    parser.add_argument("--agents-kv", type=int, default=100, help="the 46 KB case's load (default 100)")
    parser.add_argument("--agents-window", type=int, default=194, help="the 3 MiB window case's load (default 194)")
    add_point_options(parser)
    args = parser.parse_args()
    if args.seeds < 1 or args.agents_kv < 1 or args.agents_window < 1:
        parser.error("--seeds, --agents-kv and --agents-window must be at least 1")
    loads = dict(zip(CASES, (args.agents_kv, args.agents_window)))
    run_with_points(parser, args, lambda workers, out: main(args.seeds, loads, workers, out))
