"""Run every benchmark in turn and print its figures; `--quick` shortens the long ones.

The numbers recorded in docs/ come from the full runs named in each doc; this
script is the one command that reruns them all (about 32 minutes in full, 9 quick).

    .venv/bin/python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

FULL = [
    ["benchmarks.bench_predict"],
    ["benchmarks.bench_engine"],
    ["benchmarks.bench_netem_accuracy"],
    ["benchmarks.bench_netem_overhead"],
    ["benchmarks.bench_netem_reconfigure"],
    ["benchmarks.bench_mesh_lag"],
    ["benchmarks.bench_intake"],
    ["benchmarks.bench_stop_scan"],
    ["benchmarks.bench_prompt_bytes"],
    ["benchmarks.bench_rpc_call"],
    ["benchmarks.bench_token_cost"],
    ["benchmarks.bench_handoff", "--requests", "20"],
    ["benchmarks.bench_pdd_steady", "--duration", "300"],
]
QUICK_ARGS = {
    "benchmarks.bench_netem_accuracy": ["--quick"],
    "benchmarks.bench_netem_overhead": ["--quick"],
    "benchmarks.bench_netem_reconfigure": ["--quick"],
    "benchmarks.bench_handoff": ["--requests", "5"],
    "benchmarks.bench_pdd_steady": ["--duration", "60"],
    "benchmarks.bench_engine": ["--steps", "500"],
    "benchmarks.bench_token_cost": ["--repeats", "1", "--tokens", "200", "--levels"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a smoke check")
    args = parser.parse_args()
    failed = []
    for entry in FULL:
        module = entry[0]
        argv = [module, *QUICK_ARGS[module]] if args.quick and module in QUICK_ARGS else entry
        print(f"\n=== {' '.join(argv)}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", *argv])
        print(f"=== {module}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
