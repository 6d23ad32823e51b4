"""TTFT with gRPC across the shaped WAN (as `pdd-emu up` runs it) against gRPC sent directly.

The reference run is the same plan with its control links left out, so MeshPlan.grpc_address
sends every call straight to its server, as `up` did before; both runs use the same prompts
in the same order, one request at a time (docs/mesh.md §Topology records the result).

    .venv/bin/python -m benchmarks.bench_control_wan [--requests 8] [--delay 20ms]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import urllib.request
from pathlib import Path

from services.launcher.plan import build_plan
from services.launcher.processes import start_mesh, stop_processes
from services.scenario import load_scenario
from services.scenario.plan import MeshPlan


def ttfts(plan: MeshPlan, prompts: list[str], run_dir: Path) -> list[float]:
    """The router's TTFT of each prompt (timeline first_token - received), one request at a time."""
    processes = start_mesh(plan, run_dir)
    url = f"http://{plan.router.host}:{plan.router.http_port}/v1/completions"
    try:
        out = []
        for text in prompts:
            body = json.dumps({"model": plan.scenario.model, "prompt": text, "max_tokens": 2}).encode()
            request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as reply:
                timeline = json.loads(reply.read())["pdd"]["timeline"]
            out.append(timeline["first_token"] - timeline["received"])
        return out
    finally:
        stop_processes(processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="pd-cross-mini")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--delay", default="20ms", help="the WAN's one-way delay")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario, [f"wan.delay_s={args.delay}", "wan.jitter_s=0ms", "control_over_wan=true"])
    prompts = [" ".join(f"w{r}x{i}" for i in range(512)) for r in range(args.requests)]
    shaped = build_plan(scenario)
    direct = shaped.model_copy(update={"links": tuple(l for l in shaped.links if l.purpose == "kv")})
    with tempfile.TemporaryDirectory() as tmp:
        reference = ttfts(direct, prompts, Path(tmp) / "direct")
        measured = ttfts(build_plan(scenario), prompts, Path(tmp) / "shaped")
    ref, got = statistics.median(reference), statistics.median(measured)
    print(f"{args.scenario}, WAN one-way delay {scenario.wan.delay_s * 1e3:g} ms, {args.requests} requests")
    print(f"median TTFT, gRPC direct:   {ref * 1e3:8.1f} ms")
    print(f"median TTFT, gRPC over WAN: {got * 1e3:8.1f} ms   (+{(got - ref) * 1e3:.1f} ms, "
          f"{(got - ref) / scenario.wan.delay_s:.1f} one-way delays; ratio {got / ref:.2f})")


if __name__ == "__main__":
    main()
