"""`pdd-emu trace stats FILE`: describe a Mooncake-format trace without running anything."""

from __future__ import annotations

import argparse
import json

from services.cli.errors import fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("trace", help="inspect request traces")
    verbs = parser.add_subparsers(dest="trace_command", metavar="VERB", required=True)
    stats = verbs.add_parser(
        "stats", help="requests, duration, length percentiles and the prefix reuse an unbounded cache gets"
    )
    stats.add_argument("file", help="Mooncake JSONL trace (timestamp, input_length, output_length, hash_ids)")
    stats.add_argument("--limit", type=int, default=None, help="only the first N requests")
    stats.add_argument("--block-size", type=int, default=512, help="tokens per hash id (default 512)")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.set_defaults(func=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    from loadgen.trace_stats import trace_stats

    if args.limit is not None and args.limit < 1:
        fail("--limit must be at least 1")
    if args.block_size < 1:
        fail("--block-size must be at least 1")
    try:
        stats = trace_stats(args.file, args.limit, args.block_size)
    except FileNotFoundError:
        fail(f"trace file {args.file!r} does not exist")
    except ValueError as error:
        fail(str(error))
    if args.json:
        print(json.dumps(stats.as_dict(), indent=2))
        return 0
    print(f"requests      {stats.requests}")
    print(f"duration_s    {stats.duration_s:.1f}")
    for name, lengths in (("input_length", stats.input_length), ("output_length", stats.output_length)):
        cells = "  ".join(f"{key} {value:,.0f}" for key, value in lengths.items())
        print(f"{name:<13} {cells}")
    print(f"block_reuse   {stats.block_reuse:.1%}")
    print(f"token_reuse   {stats.token_reuse:.1%}")
    return 0
