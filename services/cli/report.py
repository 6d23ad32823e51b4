"""`pdd-emu report DIR... --out OUT`: a table, PNG plots and an HTML page from bench outputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from services.cli.errors import fail


def register(subparsers: argparse._SubParsersAction) -> None:
    from services.cli.bench import add_sla_arguments

    parser = subparsers.add_parser("report", help="compare bench outputs: markdown table, PNG plots, index.html")
    parser.add_argument("runs", nargs="+", type=Path, metavar="DIR", help="bench output folders")
    parser.add_argument("--out", required=True, type=Path, help="report folder")
    add_sla_arguments(parser, recompute=True)
    parser.add_argument("--wan-rate", default=None, help="the WAN line rate, e.g. 10gbit: drawn on the WAN plot, "
                                                        "which then never goes above it")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.report import build_report
    from loadgen.summary import SlaConfig
    from services.cli.bench import sla_settings, validated
    from services.units import parse_rate

    sla = None
    if args.sla_ttft is not None or args.sla_tpot is not None:
        defaults = SlaConfig()
        args.sla_ttft = args.sla_ttft if args.sla_ttft is not None else defaults.ttft_s
        args.sla_tpot = args.sla_tpot if args.sla_tpot is not None else defaults.tpot_s
        sla = validated(SlaConfig, sla_settings(args))
    try:
        wan_rate = None if args.wan_rate is None else parse_rate(args.wan_rate)
        report = build_report(args.runs, args.out, sla, wan_rate)
    except (FileNotFoundError, ValueError) as error:
        fail(str(error))
    print(report.markdown)
    print(f"wrote {report.index} ({len(report.images)} plots)")
    return 0
