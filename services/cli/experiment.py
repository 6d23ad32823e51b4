"""`pdd-emu experiment NAME [--quick] [--seeds N] [--backend B] [--workers W | --ray-address A] [--workload SPEC]
[--resume] [--deployments-only] [--warmup-s S] [--measure-s S] [--paced] [--out DIR] [--json]`: reproduce one
measurement.

NAME is paper, bathtub, handoff, wan or economics (docs/results.md); --seeds, --backend (simulate, the default,
or mesh), --workers (simulated points run in W processes of a local Ray), --ray-address (they run on a Ray
cluster), --workload (a Mooncake trace in place of the report's agentic workload), --resume (start from the
simulated points an earlier run left under OUT), --deployments-only (the three deployments' searches
without the arms and the sensitivity), --warmup-s and --measure-s (each load point's warm-up and window) and
--paced (the mesh backend's sends at the simulator's send times) are economics's. The report, figures and
result.json go to OUT/NAME; the table "paper | emulated | ratio" is printed, or with --json one JSON object of
the headline figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

NAMES = ("paper", "bathtub", "handoff", "wan", "economics")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="reproduce a measurement of the PDD report (docs/results.md)")
    p.add_argument("name", choices=NAMES, help="which measurement")
    p.add_argument("--quick", action="store_true", help="a short run that shows the direction of each effect")
    p.add_argument("--seeds", type=int, default=1, help="economics: seeds per load point (mean and spread)")
    p.add_argument("--backend", choices=("simulate", "mesh"), default=None,
                   help="economics: run the load points in the simulator (default) or the real-time mesh (mini "
                        "presets only, with --quick)")
    p.add_argument("--workers", type=int, default=1,
                   help="economics: simulated load points run in this many processes at once, on a local Ray "
                        "(default 1: one after another in this process)")
    p.add_argument("--workload", default=None, metavar="SPEC",
                   help="economics: a Mooncake trace, mooncake:FILE[:key=value,...], replayed at searched speeds "
                        "(default: the report's agentic workload)")
    p.add_argument("--resume", action="store_true",
                   help="economics: reuse the simulated points an earlier run of the same code and settings "
                        "stored under OUT/economics/runs/points")
    p.add_argument("--deployments-only", action="store_true",
                   help="economics: search the three deployments' knees and give the headline figures, without the "
                        "iso-cost arms and the sensitivity cases (3 of the full run's 21 searches)")
    p.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="economics: run the simulated load points on the running Ray cluster at ADDRESS (host:port "
                        "of its head, or 'auto'; docs/campaigns.md, \"Sweeps on Ray\") in place of a local Ray")
    p.add_argument("--warmup-s", type=float, default=None, metavar="S",
                   help="economics: emulated seconds each load point runs before its window, the agents joining "
                        "over the first half (default 120; --quick 30); docs/results.md, \"The window's first "
                        "minutes\"")
    p.add_argument("--measure-s", type=float, default=None, metavar="S",
                   help="economics: emulated seconds of each load point's window (default: the full run's 300, or "
                        "3000 requests if fewer; --quick 60)")
    p.add_argument("--paced", action="store_true",
                   help="economics, --backend mesh: simulate each point first and send each mesh request at the "
                        "simulation's send time (or when its previous answer is in, if later): the cross-check "
                        "request by request (docs/simulate.md, \"Paced by the simulation's sends\")")
    p.add_argument("--out", type=Path, default=Path("out/experiments"), help="reports go to OUT/NAME")
    p.add_argument("--json", action="store_true", help="print only the headline figures, as one JSON object")
    p.set_defaults(func=cmd_experiment)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # meshes are stopped by the runs' own cleanup on the way out


def cmd_experiment(args: argparse.Namespace) -> int:
    from services.cli.errors import fail
    from services.experiments.runner import SEEDED, run_experiment
    from services.simulate.sweep import ClusterUnreachable, RayMissing

    signal.signal(signal.SIGTERM, _interrupt)
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else \
        (lambda line: print(line, flush=True))
    options = {"seeds": (args.seeds, 1), "backend": (args.backend, None), "workers": (args.workers, 1),
               "workload": (args.workload, None), "resume": (args.resume, False),
               "deployments_only": (args.deployments_only, False), "ray_address": (args.ray_address, None),
               "warmup_s": (args.warmup_s, None), "measure_s": (args.measure_s, None), "paced": (args.paced, False)}
    for name, (value, default) in options.items():
        if value != default and args.name not in SEEDED:
            fail(f"--{name.replace('_', '-')} applies to {', '.join(SEEDED)} only, not to {args.name}")
    chosen = {name: value for name, (value, default) in options.items() if value != default}
    if args.name == "economics":
        from services.experiments.economics.experiment import check_options

        try:
            check_options(args.quick, **chosen)
        except ValueError as exc:
            fail(str(exc))
    try:
        result = asyncio.run(run_experiment(args.name, args.quick, args.out / args.name, log, **chosen))
    except (ClusterUnreachable, RayMissing) as exc:  # Ray missing, or a cluster that would not take us
        fail(str(exc))
    if args.json:
        print(json.dumps(result.headline))
    else:
        print(result.markdown())
        print(f"report: {(args.out / args.name / 'report.md').resolve()}")
    return 0
