"""`pdd-emu sweep`: bench at several offered rates and report the max goodput rate."""

from __future__ import annotations

import argparse
import asyncio

from services.cli.errors import fail


def register(subparsers: argparse._SubParsersAction) -> None:
    from services.cli.bench import add_run_arguments

    parser = subparsers.add_parser("sweep", help="rate sweep: the highest rate with >= 90%% of requests within SLA")
    add_run_arguments(parser)
    parser.add_argument("--rates", required=True, help="offered rates in req/s, e.g. 1,2,4,8")
    parser.add_argument("--keep-going", action="store_true", help="run every rate even after one misses the SLA")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchConfig, BenchError
    from loadgen.spec import SpecError, parse_spec
    from loadgen.sweep import SweepConfig, parse_rates, run_sweep
    from services.cli.bench import bench_settings, validated

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
    for rate, summary in result.summaries.items():
        print(f"rate {rate:g} req/s: goodput {summary.goodput_rps:.3f} req/s, within SLA {summary.sla_attainment:.1%}")
    if result.max_goodput_rate is None:
        print("no rate kept 90% of requests within the SLA")
    else:
        print(f"max goodput rate: {result.max_goodput_rate:g} req/s (goodput {result.max_goodput_rps:.3f} req/s)")
    print(f"wrote {config.out_dir / 'sweep.json'} and {result.report.index}")
    return 0
