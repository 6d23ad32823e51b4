"""`pdd-emu plan`: each architecture's best deployment for the money, searched, simulated and confirmed over seeds.

    pdd-emu plan --spec FILE.yaml [--quick] [--out DIR] [--json] [--seeds N] [--ray-address A]

Flags override the spec's fields (`--budget`, `--target-rps`, `--workload`, `--architectures`, and any
field with `--set key=value`); bad input exits 2 with one line (docs/plan.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from services.cli.errors import fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="each architecture's best deployment for the money (docs/plan.md)")
    parser.add_argument("--spec", required=True, help="the plan's YAML spec (e.g. services/plan/specs/mini.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a spec field, e.g. slo.ttft_s=3s (repeatable)")
    parser.add_argument("--budget", type=float, metavar="USD_PER_HOUR",
                        help="objective: the most SLA goodput for this budget (replaces the spec's objective)")
    parser.add_argument("--target-rps", type=float, metavar="RPS",
                        help="objective: the least cost for this SLA goodput (replaces the spec's objective)")
    parser.add_argument("--workload", metavar="SPEC", help="the workload, e.g. agentic:context=64K")
    parser.add_argument("--architectures", metavar="A,B", help="comma-separated: colocated, pd-intra, pd-cross, pdd")
    parser.add_argument("--quick", action="store_true",
                        help="one candidate per architecture simulated, one seed, a 8%% knee bracket")
    parser.add_argument("--seeds", type=int, help="seeds the optima are confirmed over (default: the spec's)")
    parser.add_argument("--workers", type=int, default=1, help="simulated points at once on a local Ray (default 1)")
    parser.add_argument("--ray-address", help="run the simulated points on this Ray cluster")
    parser.add_argument("--out", type=Path, default=Path("out/plan"), help="output folder (default out/plan)")
    parser.add_argument("--json", action="store_true", help="print plan.json")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def spec_overrides(args: argparse.Namespace) -> list[str]:
    """The flags as spec overrides, after the --set ones (a flag wins)."""
    overrides = list(args.overrides)
    if args.budget is not None and args.target_rps is not None:
        fail("give --budget or --target-rps, not both")
    if args.budget is not None:
        overrides += [f"budget_per_hour={args.budget}", "target_rps=null"]
    if args.target_rps is not None:
        overrides += [f"target_rps={args.target_rps}", "budget_per_hour=null"]
    if args.workload is not None:
        overrides.append(f"workload={json.dumps(args.workload)}")
    if args.architectures is not None:
        overrides.append(f"architectures=[{args.architectures}]")
    if args.seeds is not None:
        overrides.append(f"seeds={args.seeds}")
    return overrides


def run(args: argparse.Namespace) -> int:
    from services.plan.outputs import plain_words, write_outputs
    from services.plan.planner import run_plan
    from services.plan.spec import PlanError, load_spec

    if args.workers < 1:
        fail("--workers must be at least 1")
    if args.ray_address is not None and args.workers > 1:
        fail("--workers sizes a local Ray; with --ray-address the cluster's CPUs run the points")
    try:
        spec = load_spec(args.spec, spec_overrides(args))
    except PlanError as exc:
        fail(str(exc))
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    plan = run_plan(spec, args.out, quick=args.quick, seeds=args.seeds, workers=args.workers,
                    ray_address=args.ray_address, progress=not args.no_progress, log=log)
    data = write_outputs(plan, args.out)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    for line in plain_words(data):
        print(line)
    print(f"wrote {args.out / 'report.md'}, {args.out / 'plan.json'} and a scenario per architecture in "
          f"{args.out / 'scenarios'}")
    return 0
