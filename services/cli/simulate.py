"""`pdd-emu simulate`: a bench run against the whole mesh in one process, on virtual time.

Writes requests.jsonl and summary.json as `pdd-emu bench` does (so `pdd-emu
report` reads them unchanged), with `emulated_s`, `wall_s` and `speedup`
(emulated seconds per wall second) added to the summary (docs/simulate.md).

With `--faults N` it runs a fault campaign instead (services/simulate/campaign.py):
N runs, seeds S to S+N-1, each under its own random fault schedule, written to
campaign.jsonl; a run that breaks an invariant is printed with the command that
replays it, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
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
    parser.add_argument("--ramp", default="0s", help="with --concurrency: the users join over this time (default 0s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    parser.add_argument("--timeout", default="300s", help="deadline of each request (default 300s)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--json", action="store_true", help="print the summary (with --faults: the campaign's) as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--faults", type=int, default=None, metavar="N",
                        help="a fault campaign: N runs (seeds SEED..SEED+N-1), each under a random fault schedule, "
                             "every request checked (exit 1 on a violation)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchError
    from loadgen.spec import SpecError, parse_spec
    from loadgen.summary import Summary
    from services.scenario import ScenarioError, load_scenario
    from services.simulate.run import run_simulation, write_outputs

    if args.faults is not None and args.faults < 1:
        fail("--faults must be at least 1")
    try:
        # A campaign runs under the chaos runs' request deadlines, which a --set may still change.
        scenario = load_scenario(args.scenario, [*_campaign_deadlines(args), *args.overrides])
    except ScenarioError as exc:
        fail(str(exc))
    try:
        duration_s, timeout_s, ramp_s = (parse_duration(args.duration), parse_duration(args.timeout),
                                         parse_duration(args.ramp))
    except ValueError as error:
        fail(str(error))
    if duration_s <= 0:
        fail("--duration must be positive")
    if args.rate is not None and args.rate <= 0 or args.concurrency is not None and args.concurrency < 1:
        fail("--rate must be positive and --concurrency at least 1")
    if ramp_s < 0 or ramp_s > 0 and args.concurrency is None:
        fail("--ramp takes a duration of 0 or more, and only with --concurrency")
    try:
        parse_spec(args.workload)
        if args.faults is not None:
            return _campaign(args, scenario, duration_s)
        result = run_simulation(scenario, args.workload, rate=args.rate, concurrency=args.concurrency,
                                duration_s=duration_s, seed=args.seed, progress=not args.no_progress,
                                request_timeout_s=timeout_s, ramp_s=ramp_s)
    except (SpecError, BenchError) as error:
        fail(str(error))
    except ValueError as error:  # e.g. a trace file that is missing or malformed
        fail(str(error))
    write_outputs(args.out, [record.to_json_line() for record in result.records], result.summary)
    if args.json:
        print(json.dumps(result.summary, indent=2))
        return 0
    print_summary(Summary.model_validate(result.summary), args.out)
    s = result.summary
    print(f"  {s['emulated_s']:.1f} emulated s in {s['wall_s']:.2f} wall s ({s['speedup']:.1f}x real time)")
    return 0


def _campaign_deadlines(args: argparse.Namespace) -> tuple[str, ...]:
    from services.chaos.scenarios import DEADLINES

    return DEADLINES if args.faults is not None else ()


def _campaign(args: argparse.Namespace, scenario, duration_s: float) -> int:
    from services.simulate.campaign import Campaign, run_campaign

    args.out.mkdir(parents=True, exist_ok=True)
    campaign = Campaign(scenario, args.workload, duration_s, args.seed, args.faults, args.rate, args.concurrency)
    # The services' own warnings (a transfer reset by a partition) go to a log, as the mesh's go to its logs.
    log = logging.FileHandler(args.out / "campaign.log", encoding="utf-8")
    logging.getLogger().addHandler(log)
    try:
        reports = run_campaign(campaign, progress=not args.no_progress)
    finally:
        logging.getLogger().removeHandler(log)
        log.close()
    with open(args.out / "campaign.jsonl", "w", encoding="utf-8") as lines:
        for report in reports:
            lines.write(json.dumps(report.as_json()) + "\n")
    broken = [report for report in reports if report.problems]
    totals = {key: sum(getattr(r, key) for r in reports) for key in ("sent", "completed", "failed")}
    if args.json:
        print(json.dumps({"schedules": len(reports), "seeds": [args.seed, args.seed + len(reports) - 1], **totals,
                          "violations": [{**r.as_json(), "replay": replay_command(args, r.seed)} for r in broken]},
                         indent=2))
        return 1 if broken else 0
    for report in broken:
        print(f"violation at seed {report.seed}, faults {json.dumps(report.as_json()['schedule'])}:")
        for problem in report.problems:
            print(f"  {problem}")
        print(f"  replay: {replay_command(args, report.seed)}")
    print(f"{len(reports)} fault schedules, seeds {args.seed}..{args.seed + len(reports) - 1}: {totals['sent']} "
          f"requests, {totals['completed']} completed, {totals['failed']} failed with an error; {len(broken)} runs "
          f"broke an invariant")
    print(f"  wrote {args.out / 'campaign.jsonl'}")
    return 1 if broken else 0


def replay_command(args: argparse.Namespace, seed: int) -> str:
    """The command that runs one schedule of a campaign again, alone."""
    words = ["pdd-emu", "simulate", "--scenario", args.scenario]
    for override in args.overrides:
        words += ["--set", override]
    words += ["--workload", args.workload]
    words += ["--rate", f"{args.rate:g}"] if args.rate is not None else []
    words += ["--concurrency", str(args.concurrency)] if args.concurrency is not None else []
    words += ["--duration", args.duration, "--faults", "1", "--seed", str(seed), "--out", str(args.out)]
    return shlex.join(words)
