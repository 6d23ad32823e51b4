"""`pdd-emu demo`: the main job. Each scenario's mesh runs the same agentic workload; one report compares them.

For every scenario in turn: start its mesh as local processes, run the
open-loop benchmark client against its router for `--duration` seconds, stop
the mesh. Then `loadgen.report` writes the table, the plots and index.html, and
the run ends with a plain-words summary (loadgen/report/verdict.py): the winner,
the binding stage of each deployment, and the report's path, as its last lines.
Before that summary, `--plan quick` (the default) runs `pdd-emu plan --quick` on the
mini spec (services/plan/specs/mini.yaml, docs/plan.md): each architecture's best
deployment for the same money, simulated, so the summary also answers what to buy.
`--economics quick` adds the simulated economics (`experiment economics
--quick`, docs/results.md "Economics") before that summary; it is off by
default, so `make run` stays within 5 minutes on 2 cores.
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
    demo.add_argument("--duration", type=float, default=45.0,
                      help="seconds of load per scenario (default: %(default)s, which keeps `make run` within "
                           "5 minutes on 2 cores)")
    demo.add_argument("--seed", type=int, default=0, help="workload seed, the same for every scenario")
    demo.add_argument("--out", type=Path, default=Path("out"), help="where runs and the report go")
    demo.add_argument("--plan", choices=("quick", "off"), default="quick",
                      help="after the meshes, `pdd-emu plan --quick` on the mini spec: each architecture's best "
                           "deployment for the money, simulated, about a minute (default: %(default)s)")
    demo.add_argument("--economics", choices=("quick", "off"), default="off",
                      help="after the meshes, the simulated economics comparison, about a minute "
                           "(default: %(default)s)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from loadgen.bench.config import BenchConfig
    from loadgen.bench.runner import run_bench
    from loadgen.report import build_report
    from loadgen.report.table import text_table
    from loadgen.report.verdict import summary_lines
    from services.experiments.scale_notes import mini_scale_notes
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
    report = build_report(run_dirs, args.out / "report", wan_rate_bps=wan_rates.pop() if len(wan_rates) == 1 else None,
                          notes=mini_scale_notes)
    print(f"\n{text_table(report.runs)}\n\nmeshes and report: {time.monotonic() - started_at:.0f} s", flush=True)
    extra = _plan(args.out / "plan") if args.plan == "quick" else []
    extra += _economics(args.out / "economics") if args.economics == "quick" else []
    print("\n" + "\n".join(summary_lines(report.runs, report.index.resolve(), extra)))
    return 0


def _plan(out: Path) -> list[str]:
    """What to buy: the mini spec's plan, each architecture at its optimum for one budget; its answer in words."""
    from services.cli import main
    from services.plan.outputs import answer_lines
    from services.plan.spec import SPECS

    spec = SPECS / "mini.yaml"
    print(f"\n== what to buy, simulated (pdd-emu plan --spec {spec.name} --quick): each architecture's optimum "
          f"for the same money", flush=True)
    if main(["plan", "--spec", str(spec), "--quick", "--out", str(out)]) != 0:
        return [f"The plan did not finish; its output is in {out}."]
    # The meshes above are not sized to equal cost, so their winner is not the answer to what to buy.
    return ["What to buy (pdd-emu plan: each architecture at its optimum for the same money, simulated at mini "
            "scale, one seed):", *answer_lines(out),
            f"Plan: {(out / 'report.md').resolve()}"]


def _economics(out: Path) -> list[str]:
    """Does PDD pay? The simulated mini-scale economics; its progress is printed, its answer summarised."""
    from services.experiments.runner import run_experiment

    print("\n== economics, simulated (experiment economics --quick): max goodput within SLA per $/h", flush=True)
    asyncio.run(run_experiment("economics", True, out, lambda line: print(line, flush=True)))
    return [f"Economics (simulated, mini scale): {(out / 'report.md').resolve()}; the report-scale run and "
            f"its formulas: docs/results.md, \"Economics\"."]
