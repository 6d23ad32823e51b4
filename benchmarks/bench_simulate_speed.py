"""How fast `simulate` runs: emulated seconds per wall second and per CPU second, peak RSS, and how they grow.

    python -m benchmarks.bench_simulate_speed [--quick]

Each case runs in a child process of its own, so its peak RSS and CPU time are its
own (docs/simulate.md, "Speed"):
1. every -mini preset, poisson 3000-token prompts, 200-token outputs, 4 req/s for 20 s;
2. paper-full-pdd under the report's agentic workload (the economics experiment's): 1300 agents in
   closed loop, joining over the first 60 s, more than its prefill tier carries (about 21 req/s); and
   880 agents with the prefill tier at 12 instances, the report's 80 req/s in steady state; the speed
   is read over each run's last third, past the ramp and the first turns;
3. wall time against the request rate (pdd-mini, 2 to 16 req/s);
4. wall time against the instance count (pd-intra-mini, 1 to 8 decode instances at 8 req/s).
The bar: 50x real time on -mini presets, 1x on paper-full-pdd at 80 req/s (one core).
CPU speedup is the one-core figure: on a shared machine the wall clock also counts waiting for a core.
Each row also gives a fixed pure-Python workload's CPU ms, read after the case: the machine's speed then.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from services.experiments.economics.experiment import WORKLOAD as REPORT_WORKLOAD

MINI = ["colocated-mini", "pd-intra-mini", "pd-cross-mini", "pdd-mini", "pdd-kvship-mini"]
POISSON = "poisson:input=3000,output=200"


def reference_ms() -> float:
    """CPU ms of a fixed pure-Python workload (dicts, tuples, calls, a sort; no project code, a few
    hundred KB), the median of three: how fast the machine runs Python at the moment, read after each
    case, since that moved by a third within an hour on the shared machine (docs/simulate.md, "The
    machine's speed, beside each case")."""
    times = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(50):
            table = {i: (i * 7 % 1009, i) for i in range(4000)}
            sorted(table.values())
            sum(len(str(v)) for v in table.values())
        times.append((time.process_time() - start) * 1e3)
    return round(sorted(times)[1], 1)


def one_case(preset: str, workload: str, rate: float | None, users: int | None, duration_s: float,
             overrides: list[str], ramp_s: float = 0.0) -> dict:
    from services.scenario.loader import load_scenario
    from services.simulate.run import run_simulation

    scenario = load_scenario(preset, overrides)
    cpu0 = time.process_time()
    run = run_simulation(scenario, workload, rate=rate, concurrency=users, duration_s=duration_s, seed=0,
                         ramp_s=ramp_s)
    cpu = time.process_time() - cpu0
    s = run.summary
    row = {"preset": preset, "overrides": overrides, "workload": workload, "rate": rate, "users": users,
           "duration_s": duration_s, "requests": s["sent"], "completed": s["completed"], "failed": s["failed"],
           "tokens": sum(r.output_tokens for r in run.records), "emulated_s": s["emulated_s"],
           "wall_s": s["wall_s"], "cpu_s": round(cpu, 3), "speedup": s["speedup"],
           "cpu_speedup": round(s["emulated_s"] / cpu, 2),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    row["reference_ms"] = reference_ms()  # after the case, which it must neither warm nor outgrow
    if users is not None:  # a population's steady state: the last third, past the ramp and the first turns
        row["window"] = last_third(run, duration_s)
    return row


def last_third(run, duration_s: float) -> dict:
    """Speed and load over the run's last third, from the CPU time read at each stats snapshot."""
    half = [(t, cpu) for t, cpu in run.pace if t >= duration_s * 2 / 3]
    (t0, cpu0), (t1, cpu1) = half[0], half[-1]
    sent = [r for r in run.records if t0 <= r.send_s < t1]
    tokens = sum(r.output_tokens for r in sent)
    return {"emulated_s": round(t1 - t0, 1), "cpu_s": round(cpu1 - cpu0, 2),
            "cpu_speedup": round((t1 - t0) / (cpu1 - cpu0), 3), "req_per_s": round(len(sent) / (t1 - t0), 1),
            "tokens_per_s": round(tokens / (t1 - t0)), "cpu_us_per_token": round((cpu1 - cpu0) / tokens * 1e6, 1),
            "ok": sum(r.status == "ok" for r in sent), "sent": len(sent)}


def run_case(preset: str, workload: str, rate: float | None, duration_s: float, *overrides: str,
             users: int | None = None, ramp_s: float = 0.0) -> dict:
    spec = json.dumps([preset, workload, rate, users, duration_s, list(overrides), ramp_s])
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_simulate_speed", "--case", spec],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def show_last_third(row: dict) -> None:
    w = row["window"]
    print(f"{row['preset']} {' '.join(row['overrides'])}, {row['users']} agents, last third: {w['emulated_s']} "
          f"emulated s in {w['cpu_s']} CPU s ({w['cpu_speedup']}x), {w['req_per_s']} req/s, {w['tokens_per_s']} "
          f"output tokens/s, {w['cpu_us_per_token']} CPU us/token, {w['ok']}/{w['sent']} ok", flush=True)


def show(row: dict) -> None:
    extra = f" {' '.join(row['overrides'])}" if row["overrides"] else ""
    load = f"{row['rate']:g}" if row["rate"] is not None else f"{row['users']} agents"
    print(f"| {row['preset']}{extra} | {load} | {row['completed']}/{row['requests']} | {row['tokens']} | "
          f"{row['emulated_s']:.1f} | {row['wall_s']:.2f} | {row['cpu_s']:.2f} | {row['speedup']:.1f}x | "
          f"{row['cpu_speedup']:.1f}x | {row['cpu_s'] / max(1, row['tokens']) * 1e6:.0f} | {row['peak_rss_mb']:.0f} | "
          f"{row['reference_ms']:.0f} |",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="shorter runs, fewer points")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(*json.loads(args.case))))
        return
    seconds = 10.0 if args.quick else 20.0
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| case | req/s or agents | completed | tokens | emulated s | wall s | CPU s | speedup (wall) | speedup (CPU) | "
          "CPU us/token | peak RSS MB | reference ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for preset in MINI:
        show(run_case(preset, POISSON, 4.0, seconds))
    full = run_case("paper-full-pdd", REPORT_WORKLOAD, None, 90.0 if args.quick else 180.0,
                    users=650 if args.quick else 1300, ramp_s=30.0 if args.quick else 60.0)
    show(full)
    show_last_third(full)
    # The preset's two prefill instances carry about 21 req/s of this workload; with twelve, 880 agents
    # send the report's 80 req/s in steady state
    # (docs/history/simulate-speed-2026-12-04.md, "At the report's 80 req/s").
    wide = run_case("paper-full-pdd", REPORT_WORKLOAD, None, 120.0 if args.quick else 240.0, "pools.prefill.count=12",
                    users=880, ramp_s=60.0)
    show(wide)
    show_last_third(wide)
    for rate in (2.0, 8.0) if args.quick else (2.0, 4.0, 8.0, 16.0):
        show(run_case("pdd-mini", POISSON, rate, seconds))
    for count in (1, 4) if args.quick else (1, 2, 4, 8):
        show(run_case("pd-intra-mini", POISSON, 8.0, seconds, f"pools.decode.count={count}"))


if __name__ == "__main__":
    main()
