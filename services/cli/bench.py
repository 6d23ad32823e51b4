"""`pdd-emu bench`: drive a router with a workload and write requests.jsonl and summary.json."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from pydantic import ValidationError

from services.cli.errors import fail
from services.units import parse_duration


def add_sla_arguments(parser: argparse.ArgumentParser, recompute: bool = False) -> None:
    if recompute:
        parser.add_argument("--sla-ttft", default=None, help="recompute goodput with this TTFT limit (default 5s)")
        parser.add_argument("--sla-tpot", default=None, help="recompute goodput with this TPOT limit (default 100ms)")
        return
    parser.add_argument("--sla-ttft", default="5s", help="TTFT limit of the SLA (default 5s)")
    parser.add_argument("--sla-tpot", default="100ms", help="TPOT limit of the SLA (default 100ms)")


def add_run_arguments(parser: argparse.ArgumentParser, url_required: bool = True) -> None:
    """Arguments shared by bench and sweep (whose --simulate needs no router)."""
    parser.add_argument("--url", required=url_required, help="router base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--workload", required=True, metavar="SPEC",
                        help="agentic[:k=v,...], mooncake:FILE[:k=v,...], poisson[:k=v,...] or gamma[:k=v,...]")
    parser.add_argument("--duration", required=True, help="how long to send, e.g. 60s or 5m")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--model", default=None, help="model name (default: the first of GET /v1/models)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    parser.add_argument("--max-requests", type=int, default=None, help="stop sending after N requests")
    parser.add_argument("--timeout", default="300s", help="deadline of each request (default 300s)")
    parser.add_argument("--cost-per-hour", type=float, default=None, help="deployment cost, for BCR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_sla_arguments(parser)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmark a router: open loop (--rate) or closed loop (--concurrency)"
    )
    add_run_arguments(parser)
    pacing = parser.add_mutually_exclusive_group()
    pacing.add_argument("--rate", type=float, help="open loop: requests per second")
    pacing.add_argument("--concurrency", type=int, help="closed loop: requests in flight")
    parser.add_argument("--label", default=None, help="name of the run in reports (default: the router's mode)")
    parser.set_defaults(func=run)


def bench_settings(args: argparse.Namespace) -> dict:
    try:
        return {
            "url": args.url, "workload": args.workload, "out_dir": args.out,
            "duration_s": parse_duration(args.duration),
            "max_requests": args.max_requests, "model": args.model, "seed": args.seed,
            "request_timeout_s": parse_duration(args.timeout), "cost_per_hour": args.cost_per_hour,
            "progress": not args.no_progress, "sla": sla_settings(args),
        }
    except ValueError as error:
        fail(str(error))


def sla_settings(args: argparse.Namespace) -> dict:
    try:
        return {"ttft_s": parse_duration(args.sla_ttft), "tpot_s": parse_duration(args.sla_tpot)}
    except ValueError as error:
        fail(f"SLA: {error}")


def validated(model_class, settings: dict):
    try:
        return model_class.model_validate(settings)
    except ValidationError as error:
        fail("; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors()))


def run(args: argparse.Namespace) -> int:
    from loadgen.bench import BenchConfig, BenchError, run_bench
    from loadgen.spec import SpecError, parse_spec

    config = validated(BenchConfig, {**bench_settings(args), "rate": args.rate, "concurrency": args.concurrency,
                                     "label": args.label})
    try:
        parse_spec(config.workload)
        summary = asyncio.run(run_bench(config, handle_sigint=True))
    except SpecError as error:
        fail(str(error))
    except BenchError as error:
        fail(str(error))
    except ValueError as error:  # e.g. a trace file that is missing or malformed
        fail(str(error))
    print_summary(summary, config.out_dir)
    return 130 if summary.interrupted else 0


def print_summary(summary, out_dir: Path) -> None:
    def ms(p) -> str:
        return "-" if p.p50 is None else f"{p.p50 * 1e3:.0f}/{p.p90 * 1e3:.0f}/{p.p99 * 1e3:.0f} ms"

    print(f"{summary.label}: sent {summary.sent}, completed {summary.completed}, failed {summary.failed}, "
          f"cancelled {summary.cancelled} in {summary.window_s:.1f}s")
    print(f"  TTFT p50/p90/p99 {ms(summary.ttft_s)}   TPOT {ms(summary.tpot_s)}   E2E {ms(summary.e2e_s)}")
    print(f"  goodput {summary.goodput_rps:.2f} req/s, SLA attainment {summary.sla_attainment:.1%}, "
          f"mean hit {summary.hit_rate_mean:.1%}")
    print(f"  wrote {out_dir / 'requests.jsonl'} and {out_dir / 'summary.json'}")
