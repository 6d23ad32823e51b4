"""`pdd-emu demo`: the main job. Each scenario's mesh runs the same agentic workload; one report compares them.

For every scenario in turn: start its mesh as local processes, run the
open-loop benchmark client against its router for `--duration` seconds, stop
the mesh. Then `loadgen.report` writes the table, the plots and index.html.
Beside the live meshes, the economics experiment answers "does PDD pay?" in the
simulator (`experiment economics --quick`, docs/results.md "Economics"): each
mini deployment's goodput within SLA on a grid of agent populations, its cost,
and the BCR gain that follows; `--economics off` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from pathlib import Path

from services.cli.errors import fail
from services.launcher.plan import build_plan
from services.launcher.processes import LaunchError, start_mesh, stop_processes
from services.scenario import ScenarioError, load_scenario
from services.scenario.cost import cost_per_hour

DEFAULT_SCENARIOS = "pd-intra-mini,pd-cross-mini,pdd-mini"
DEFAULT_WORKLOAD = "agentic:context=32K,output=32..256,think=0.5,turns=12"


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run several scenarios under one workload and write a comparison report")
    demo.add_argument("--scenarios", default=DEFAULT_SCENARIOS, help="comma-separated presets or files "
                                                                     "(default: %(default)s)")
    demo.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload SPEC (default: %(default)s)")
    demo.add_argument("--rate", type=float, default=1.0, help="open-loop requests per second (default: %(default)s)")
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of load per scenario")
    demo.add_argument("--seed", type=int, default=0, help="workload seed, the same for every scenario")
    demo.add_argument("--out", type=Path, default=Path("out"), help="where runs and the report go")
    demo.add_argument("--economics", choices=("quick", "off"), default="quick",
                      help="after the meshes, the simulated economics comparison (default: %(default)s)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from loadgen.bench.config import BenchConfig
    from loadgen.bench.runner import run_bench
    from loadgen.report import build_report
    from loadgen.spec import SpecError, parse_spec

    try:
        scenarios = [load_scenario(name.strip()) for name in args.scenarios.split(",") if name.strip()]
        parse_spec(args.workload)
    except (ScenarioError, SpecError, ValueError) as exc:
        fail(str(exc))
    if not scenarios or args.duration <= 0 or args.rate <= 0:
        fail("need at least one scenario, a positive --duration and a positive --rate")
    run_dirs = []
    started_at = time.monotonic()
    for scenario in scenarios:
        run_dir = args.out / "runs" / scenario.name
        shutil.rmtree(run_dir, ignore_errors=True)
        mesh_dir = args.out / "mesh" / scenario.name
        print(f"== {scenario.name} ({scenario.mode.value}): starting the mesh", flush=True)
        plan = build_plan(scenario)
        try:
            processes = start_mesh(plan, mesh_dir)
        except LaunchError as exc:
            print(f"pdd-emu: error: {exc}")
            return 1
        try:
            config = BenchConfig(url=f"http://{plan.router.host}:{plan.router.http_port}", workload=args.workload,
                                 out_dir=run_dir, rate=args.rate, duration_s=args.duration, seed=args.seed,
                                 label=scenario.mode.value, cost_per_hour=cost_per_hour(scenario),
                                 sla={"ttft_s": scenario.sla.ttft_s, "tpot_s": scenario.sla.tpot_s})
            summary = asyncio.run(run_bench(config, handle_sigint=True))
        finally:
            stop_processes(processes)
        print(f"   sent {summary.sent}, completed {summary.completed}, failed {summary.failed}", flush=True)
        run_dirs.append(run_dir)
    wan_rates = {scenario.wan.rate_bps for scenario in scenarios}
    report = build_report(run_dirs, args.out / "report", wan_rate_bps=wan_rates.pop() if len(wan_rates) == 1 else None)
    print()
    print(report.markdown)
    print(f"\nreport: {report.index.resolve()}  ({time.monotonic() - started_at:.0f} s)")
    if args.economics == "quick":
        _economics(args.out / "economics")
    return 0


def _economics(out: Path) -> None:
    """Does PDD pay? The simulated mini-scale economics, its table and where each figure comes from."""
    from services.experiments.runner import run_experiment

    print("\n== economics, simulated (experiment economics --quick): max goodput within SLA per $/h", flush=True)
    result = asyncio.run(run_experiment("economics", True, out, lambda line: print(line, flush=True)))
    print(result.markdown())
    print(f"economics: {(out / 'report.md').resolve()}; formulas and the report-scale run: docs/results.md, "
          f"\"Economics\" (pdd-emu experiment economics)")
