"""The simulation against the mesh on every -mini preset: the same workload and seed, request by request.

    python -m benchmarks.bench_simulate_agreement [--duration 20] [--concurrency 1] [--workload SPEC]
        [--ramp S] [--window-from S] [--dilation K] [--paced]

For each preset, a bench on a real mesh (`pdd-emu up`'s processes) and a simulation
of the same workload and seed (services/simulate/agreement.py). Printed per preset
(docs/simulate.md, "Agreement with the mesh"): TTFT, TPOT and E2E at P50/P90/P99 on
both, the requests with the same text and the same pipeline, the mesh's event-loop
lag p99, and where the mesh's extra time goes: the mean of (mesh - simulation) per
request for the router's intake (received to prefill sent), the KV transfer, and
the HTTP hop (client send to router received), over requests on the same pipeline,
and the worst request's KV transfer excess. With `--ramp` a closed loop's users join over
that time on both sides, and `--window-from` compares only the requests sent from then
on: `--workload agentic:context=16K,output=256..512,turns=6 --concurrency 12 --duration 90
--ramp 15 --window-from 30 --seed 0` is the quick economics run's 12-agent point on both.
With `--dilation K` the mesh runs K times slower than real time (services/experiments/dilation.py:
its steps and links, and the closed loop's think time and schedule, stretched by K) and its records
are read back in emulated time, so its own per-request cost counts 1/K as much; the simulation is
the same run as without. A gap that is the mesh's own overhead shrinks as 1/K; a modelling gap
does not (docs/history/simulate-agreement-2026-12-01.md, "The mesh's overhead under dilation").
With `--paced` the simulation runs
first and the mesh's closed loop sends each request at the simulation's send time (or as soon as its
previous answer is in, if later), so a difference in one answer does not move every later send of
that user (docs/simulate.md, "Agreement with the mesh").
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
from pathlib import Path

from benchmarks.meshctl import mesh, service_stats
from loadgen.bench.config import BenchConfig
from loadgen.bench.records import RequestRecord
from services.experiments.dilation import dilate_workload, to_emulated_record
from services.scenario.loader import load_scenario
from services.simulate.agreement import bench_mesh, compare
from services.simulate.run import Driven, run_simulation

PRESETS = ["colocated-mini", "pd-intra-mini", "pd-cross-mini", "pdd-mini", "pdd-kvship-mini"]
WORKLOAD = "poisson:input=1000..16000,output=64"


def _lag_p99(plan, reset: bool = False) -> float:
    return max(service_stats(plan, s.name, reset_lag=reset)["loop_lag_s"]["p99"] or 0.0 for s in plan.services)


def _overheads(mesh_run: Driven, sim: Driven, dilation: float) -> dict[str, float]:
    """Mean (mesh - simulation) in ms, per stage, over requests both completed on the same pipeline; and the worst KV.

    The mesh's timeline stamps are wall-clock times: their differences are divided by the `dilation`."""
    by_id = {r.id: r for r in sim.records if r.ok}
    stages: dict[str, list[float]] = {"http": [], "intake": [], "kv": [], "ttft": []}
    for m in mesh_run.records:
        s = by_id.get(m.id)
        if not m.ok or s is None or m.pdd["pipeline"] != s.pdd["pipeline"]:
            continue
        mt, st = m.pdd["timeline"], s.pdd["timeline"]
        stages["http"].append((mt["received"] - m.send_unix) / dilation - (st["received"] - s.send_unix))
        if "prefill_sent" in mt:
            mesh_intake = (mt["prefill_sent"] - mt["received"]) / dilation
            stages["intake"].append(mesh_intake - (st["prefill_sent"] - st["received"]))
        stages["kv"].append(m.pdd["kv_transfer_s"] - s.pdd["kv_transfer_s"])
        stages["ttft"].append(m.ttft_s - s.ttft_s)
    extra = {k: round(statistics.fmean(v) * 1e3, 1) if v else float("nan") for k, v in stages.items()}
    # The worst transfer too: a mean hid five stalled transfers of twelve behind seven exact ones.
    extra["kv_worst"] = round(max(stages["kv"]) * 1e3, 1) if stages["kv"] else float("nan")
    return extra


def _window(run: Driven, args: argparse.Namespace) -> Driven:
    """The run with only the requests sent from `--window-from` on."""
    kept = [r for r in run.records if r.send_s >= args.window_from]
    return Driven(kept, run.outputs, run.rate, run.concurrency, run.skipped_arrivals)


def _emulated(run: Driven, k: float) -> Driven:
    """A dilated mesh run's records read back in emulated time."""
    records = [RequestRecord(**to_emulated_record(r.row(), k)) for r in run.records]
    return dataclasses.replace(run, records=records)


def one(preset: str, args: argparse.Namespace) -> None:
    k = args.dilation
    run = run_simulation(load_scenario(preset), args.workload, concurrency=args.concurrency, duration_s=args.duration,
                         seed=args.seed, ramp_s=args.ramp)
    # Paced: the mesh sends each request at the simulation's instant (dilated), not after its own answers.
    send_at = {r.id: r.send_s * k for r in run.records} if args.paced else None
    config = BenchConfig(url="http://unused", workload=dilate_workload(args.workload, k), out_dir=".",
                         concurrency=args.concurrency, duration_s=args.duration * k, seed=args.seed, progress=False)
    with tempfile.TemporaryDirectory() as tmp, mesh(preset, Path(tmp), dilation=k) as (url, plan):
        _lag_p99(plan, reset=True)
        driven = asyncio.run(bench_mesh(url, config.model_copy(update={"url": url}), args.ramp * k, send_at))
        mesh_run = _window(_emulated(driven, k), args)
        lag = _lag_p99(plan)
    sim = _window(Driven(run.records, run.outputs, None, args.concurrency, 0), args)
    agreement = compare(mesh_run, sim)
    cells = []
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        table = agreement.percentiles.get(metric, {})
        cells.append(" / ".join(f"{m * 1e3:.0f}:{s * 1e3:.0f}" for m, s in table.values()) or "-")
    over = _overheads(mesh_run, sim, k)
    print(f"| {preset} | {agreement.requests} | {agreement.same_text} | {agreement.same_pipeline} | "
          f"{' | '.join(cells)} | {lag * 1e3:.1f} | {over['http']} | {over['intake']} | {over['kv']} | "
          f"{over['kv_worst']} | {over['ttft']} | {len(agreement.violations())} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--presets", nargs="*", default=PRESETS)
    parser.add_argument("--workload", default=WORKLOAD, help=f"a loadgen spec (default {WORKLOAD})")
    parser.add_argument("--ramp", type=float, default=0.0, help="seconds over which a closed loop's users join")
    parser.add_argument("--window-from", type=float, default=0.0, help="compare requests sent from this second on")
    parser.add_argument("--dilation", type=float, default=1.0,
                        help="run the mesh this many times slower than real time, read back in emulated time")
    parser.add_argument("--paced", action="store_true",
                        help="send each mesh request at the simulation's send time (or when ready, if later) "
                             "instead of after the mesh's own answers and think time")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.workload}, "
          f"concurrency {args.concurrency}, {args.duration:g} s, seed {args.seed}, ramp {args.ramp:g} s, "
          f"window from {args.window_from:g} s, mesh at time dilation {args.dilation:g}"
          f"{', paced by the simulation' if args.paced else ''} "
          "(its lag in real ms)")
    print("| preset | requests | same text | same pipeline | TTFT p50/p90/p99 mesh:sim ms | TPOT | E2E | "
          "mesh lag p99 ms | extra ms: HTTP | intake | KV | KV worst | TTFT | bounds broken |")
    print("| --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for preset in args.presets:
        one(preset, args)


if __name__ == "__main__":
    main()
