"""`pdd-emu simulate`: a bench run against the whole mesh in one process, on virtual time.

Writes requests.jsonl and summary.json as `pdd-emu bench` does (so `pdd-emu
report` reads them unchanged), with `emulated_s`, `wall_s` and `speedup`
(emulated seconds per wall second) added to the summary (docs/simulate.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from services.cli.bench import print_summary
from services.cli.errors import fail
from services.units import parse_duration


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("simulate", help="run a workload against a scenario's mesh on virtual time")
    parser.add_argument("--scenario", required=True, help="a preset name or a scenario YAML file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario field, e.g. wan.rate_bps=5gbit (repeatable)")
    parser.add_argument("--workload", required=True, metavar="SPEC",
                        help="agentic[:k=v,...], mooncake:FILE[:k=v,...], poisson[:k=v,...] or gamma[:k=v,...]")
    pacing = parser.add_mutually_exclusive_group()
    pacing.add_argument("--rate", type=float, help="open loop: requests per second")
    pacing.add_argument("--concurrency", type=int, help="closed loop: requests in flight")
    parser.add_argument("--duration", required=True, help="emulated time to send for, e.g. 60s or 5m")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    parser.add_argument("--timeout", default="300s", help="deadline of each request (default 300s)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchError
    from loadgen.spec import SpecError, parse_spec
    from loadgen.summary import Summary
    from services.scenario import ScenarioError, load_scenario
    from services.simulate.run import run_simulation

    try:
        scenario = load_scenario(args.scenario, args.overrides)
    except ScenarioError as exc:
        fail(str(exc))
    try:
        duration_s, timeout_s = parse_duration(args.duration), parse_duration(args.timeout)
    except ValueError as error:
        fail(str(error))
    if duration_s <= 0:
        fail("--duration must be positive")
    if args.rate is not None and args.rate <= 0 or args.concurrency is not None and args.concurrency < 1:
        fail("--rate must be positive and --concurrency at least 1")
    try:
        parse_spec(args.workload)
        result = run_simulation(scenario, args.workload, rate=args.rate, concurrency=args.concurrency,
                                duration_s=duration_s, seed=args.seed, progress=not args.no_progress,
                                request_timeout_s=timeout_s)
    except (SpecError, BenchError) as error:
        fail(str(error))
    except ValueError as error:  # e.g. a trace file that is missing or malformed
        fail(str(error))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "requests.jsonl", "w", encoding="utf-8") as lines:
        for record in result.records:
            lines.write(record.to_json_line() + "\n")
    (args.out / "summary.json").write_text(json.dumps(result.summary, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result.summary, indent=2))
        return 0
    print_summary(Summary.model_validate(result.summary), args.out)
    s = result.summary
    print(f"  {s['emulated_s']:.1f} emulated s in {s['wall_s']:.2f} wall s ({s['speedup']:.1f}x real time)")
    return 0
