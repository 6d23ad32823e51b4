"""What planning a request's stop rules costs the router (services/router/stops.py, docs/mesh.md §Stops).

The router finds where each choice's output stops before it submits the jobs, by reading the
deterministic output a slice at a time. Each case plans a request through `plan_jobs` on
colocated-mini's router, with rules that never fire (the worst case: the whole output is read),
and reports the median of `--repeats` runs in CPU time of this process (the machine is shared, and
wall time would count the time others had the cores): milliseconds for the request, microseconds
per token, and the longest single step (what another request on the event loop may wait behind).

    .venv/bin/python -m benchmarks.bench_stop_scan [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.router.api import CompletionRequest
from services.router.fanout import planning
from services.router.server import Router
from services.router.stops import MAX_STOP_CHARS
from services.scenario import load_scenario

LONGEST = ["Q" * MAX_STOP_CHARS, "Q0Z", "Q1Z", "Q2Z"]
CASES = {  # name: (n, max_tokens, stop)
    "1 short stop, 256 tokens": (1, 256, ["\nQ:"]),
    "1 short stop, 4096 tokens": (1, 4096, ["\nQ:"]),
    "4 short stops, 16,000 tokens": (1, 16_000, ["Q0Z", "Q1Z", "Q2Z", "Q3Z"]),
    "4 stops up to 1000 chars, n=8, 8000 tokens": (8, 8000, LONGEST),
}


def _plan_once(router: Router, n: int, max_tokens: int, stop: list[str]) -> tuple[float, float]:
    """(CPU seconds for the whole plan, CPU seconds of its longest step)."""
    body = CompletionRequest.model_validate({"model": router.scenario.model, "prompt": "plan the stops",
                                             "max_tokens": max_tokens, "n": n, "stop": stop})
    pairs: list = []
    start = last = time.process_time()
    longest = 0.0
    for _ in planning(router, "bench", body, False, time.time(), pairs):
        now = time.process_time()
        longest, last = max(longest, now - last), now
    assert all(choice.ending.finish_reason == "length" for _, choice in pairs)
    return time.process_time() - start, longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    router = Router(build_plan(load_scenario("colocated-mini")), CollectorRegistry())
    rows = []
    for name, (n, max_tokens, stop) in CASES.items():
        runs = [_plan_once(router, n, max_tokens, stop) for _ in range(args.repeats)]
        total = statistics.median(r[0] for r in runs)
        rows.append({"case": name, "ms": 1e3 * total, "us_per_token": 1e6 * total / (n * max_tokens),
                     "longest_step_ms": 1e3 * statistics.median(r[1] for r in runs)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| case | CPU ms | us/token | longest step, CPU ms |\n| --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['case']} | {r['ms']:.1f} | {r['us_per_token']:.2f} | {r['longest_step_ms']:.2f} |")


if __name__ == "__main__":
    main()
