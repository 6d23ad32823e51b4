"""`pdd-emu sweep`: bench at several offered rates and report the max goodput rate.

With `--simulate` the points are simulations of a scenario instead of benches
of a running router, run in parallel on Ray (services/simulate/sweep.py): a
local Ray by default, a cluster with `--ray-address`. They sweep rates or,
with `--concurrencies`, populations of closed-loop clients.
"""

from __future__ import annotations

import argparse
import asyncio

from services.cli.errors import fail

NOT_SIMULATED = ("url", "model", "max_requests", "cost_per_hour")  # a simulation has no router to name or bill


def register(subparsers: argparse._SubParsersAction) -> None:
    from services.cli.bench import add_run_arguments

    parser = subparsers.add_parser("sweep", help="rate sweep: the highest rate with >= 90%% of requests within SLA")
    add_run_arguments(parser, url_required=False)
    points = parser.add_mutually_exclusive_group(required=True)
    points.add_argument("--rates", help="offered rates in req/s, e.g. 1,2,4,8")
    points.add_argument("--concurrencies", help="with --simulate: closed-loop populations, e.g. 8,16,32")
    parser.add_argument("--keep-going", action="store_true", help="run every rate even after one misses the SLA")
    simulated = parser.add_argument_group("simulated sweeps (in parallel on Ray)")
    simulated.add_argument("--simulate", action="store_true", help="simulate each point instead of benching --url")
    simulated.add_argument("--scenario", help="with --simulate: a preset name or a scenario YAML file")
    simulated.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                           help="with --simulate: override a scenario field (repeatable)")
    simulated.add_argument("--ray-address", default=None,
                           help="with --simulate: a Ray cluster, e.g. ray://head:10001 (default: a local Ray)")
    simulated.add_argument("--num-cpus", type=int, default=None,
                           help="with --simulate and a local Ray: the CPUs it may use (default: all)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchConfig, BenchError
    from loadgen.spec import SpecError, parse_spec
    from loadgen.sweep import SweepConfig, parse_rates, run_sweep
    from services.cli.bench import bench_settings, validated

    if args.simulate:
        return _simulated(args)
    if args.url is None or args.concurrencies is not None or args.scenario is not None:
        fail("a sweep benches a router (--url, --rates), or simulates a scenario (--simulate --scenario)")
    try:
        rates = parse_rates(args.rates)
        parse_spec(args.workload)
    except (SpecError, ValueError) as error:
        fail(str(error))
    bench = validated(BenchConfig, {**bench_settings(args), "rate": rates[0]})
    settings = {"bench": bench, "rates": rates, "out_dir": args.out, "keep_going": args.keep_going}
    config = validated(SweepConfig, settings)
    try:
        result = asyncio.run(run_sweep(config))
    except (BenchError, ValueError) as error:
        fail(str(error))
    _print(result, "rate", "req/s")
    print(f"wrote {config.out_dir / 'sweep.json'} and {result.report.index}")
    return 0


def _simulated(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchError
    from loadgen.spec import SpecError, parse_spec
    from loadgen.sweep import parse_rates
    from services.cli.bench import sla_settings
    from services.scenario import ScenarioError, load_scenario
    from services.simulate.sweep import SimulatedSweep, run_on_ray
    from services.units import parse_duration

    given = [f"--{name.replace('_', '-')}" for name in NOT_SIMULATED if getattr(args, name) is not None]
    if given:
        fail(f"--simulate runs no router: drop {', '.join(given)}")
    if args.scenario is None:
        fail("--simulate needs --scenario (a preset name or a scenario YAML file)")
    if args.num_cpus is not None and (args.num_cpus < 1 or args.ray_address is not None):
        fail("--num-cpus is at least 1, and only for a local Ray (not with --ray-address)")
    try:
        scenario = load_scenario(args.scenario, args.overrides)
        parse_spec(args.workload)
        rates = parse_rates(args.rates) if args.rates is not None else ()
        concurrencies = _populations(args.concurrencies) if args.concurrencies is not None else ()
        duration_s, timeout_s = parse_duration(args.duration), parse_duration(args.timeout)
    except (ScenarioError, SpecError, ValueError) as error:
        fail(str(error))
    if duration_s <= 0:
        fail("--duration must be positive")
    sweep = SimulatedSweep(scenario, args.workload, duration_s, args.seed, rates, concurrencies, timeout_s,
                           sla_settings(args))
    try:
        result = run_on_ray(sweep, args.out, address=args.ray_address, num_cpus=args.num_cpus,
                            progress=not args.no_progress)
    except (BenchError, ValueError) as error:
        fail(str(error))
    _print(result, sweep.load, "req/s" if sweep.load == "rate" else "clients")
    print(f"wrote {args.out / 'sweep.json'} and {result.report.index}")
    return 0


def _populations(text: str) -> tuple[int, ...]:
    try:
        populations = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"cannot read concurrencies {text!r}; write them like 8,16,32") from None
    if not populations or min(populations) < 1:
        raise ValueError(f"concurrencies {text!r} must be whole numbers of at least 1, like 8,16,32")
    return populations


def _print(result, load: str, unit: str) -> None:
    for point, summary in result.summaries.items():
        print(f"{load} {point:g} {unit}: goodput {summary.goodput_rps:.3f} req/s, "
              f"within SLA {summary.sla_attainment:.1%}")
    if result.max_goodput_rate is None:
        print(f"no {load} kept 90% of requests within the SLA")
    else:
        print(f"max goodput {load}: {result.max_goodput_rate:g} {unit} (goodput {result.max_goodput_rps:.3f} req/s)")
