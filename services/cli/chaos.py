"""`pdd-emu chaos NAME`: run a chaos scenario on a fresh mesh under load and check the invariants.

Prints sent, completed, failed, lost, recovery_s and the rest (or the whole
report as JSON with --json). Exit 0 when every invariant held, 1 when one did
not, 2 when the scenario does not apply (kill-rld and rld-overload need the
relay tier of mode pdd). `pdd-emu chaos soak` is the fault-free Locust run at
the rated load (docs/reliability.md §Load).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from services.cli.errors import fail
from services.units import parse_duration

SOAK = "soak"


def register(subparsers: argparse._SubParsersAction) -> None:
    from services.chaos.scenarios import PRESETS, SCENARIOS

    names = ", ".join(SCENARIOS)
    p = subparsers.add_parser("chaos", help="break links or kill services under load and check the invariants",
                              description=f"Scenarios: {names}; and {SOAK} (a fault-free Locust run).")
    p.add_argument("name", metavar="NAME", choices=[*SCENARIOS, SOAK], help=f"one of {names}, {SOAK}")
    p.add_argument("--mode", choices=list(PRESETS), default="pdd",
                   help="pdd runs pdd-mini, pd-cross runs pd-cross-mini (default: pdd)")
    p.add_argument("--quick", action="store_true", help="the short faults only (what CI runs)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--seed", type=int, default=0, help="seed of the traffic and of random fault values")
    p.add_argument("--run-dir", type=Path, default=None, help="plan and logs of the mesh (default: a temp dir)")
    p.add_argument("--duration", default="300s",
                   help=f"{SOAK} only: how long Locust runs (default 300s; its 64 MiB RSS bound is a 5-minute one: "
                        "host-memory prefix tiers keep filling for 40-80 minutes, docs/reliability.md §Load)")
    p.add_argument("--users", type=int, default=None, help=f"{SOAK} only: Locust users (default: the rated load)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name == SOAK:
        return _soak(args)
    from services.chaos import ChaosError, run_scenario
    from services.chaos.scenarios import not_applicable

    if (reason := not_applicable(args.name, args.mode)) is not None:
        fail(reason)
    try:
        report = asyncio.run(run_scenario(args.name, args.mode, args.quick, args.run_dir, args.seed))
    except ChaosError as exc:
        print(f"pdd-emu chaos: {exc}")
        return 1
    print(report.to_json() if args.json else report.to_text(), flush=True)
    return 0 if report.ok else 1


def _soak(args: argparse.Namespace) -> int:
    from services.chaos.soak import SoakError, run_soak

    if args.mode != "pdd":
        fail(f"{SOAK} runs the rated load of pdd-mini only")
    try:
        seconds = parse_duration(args.duration)
    except ValueError as exc:
        fail(f"--duration: {exc}")
    try:
        report = run_soak(seconds, args.users, args.run_dir, args.seed)
    except SoakError as exc:
        print(f"pdd-emu chaos soak: {exc}")
        return 1
    print(report.to_json() if args.json else report.to_text(), flush=True)
    return 0 if report.ok else 1
