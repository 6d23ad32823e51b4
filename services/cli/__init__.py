"""The `pdd-emu` command line: one sub-command module per verb.

Each module in COMMANDS defines `register(subparsers)`, which adds its parser
and sets `func` to a callable taking the parsed namespace and returning an exit
code. Bad input exits 2 with one clear line, as argparse does.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from services.cli.errors import fail
from services.types import MissingExtra

COMMANDS = (
    "predict",
    "calibrate",
    "link",
    "mesh",
    "serve",
    "demo",
    "trace",
    "bench",
    "simulate",
    "report",
    "sweep",
    "compose",
    "chaos",
    "experiment",
    "plan",
    "tokenizer",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdd-emu",
        description="Emulate Prefill / Relay-Decode / Main-Decode LLM serving across datacenters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"services.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except MissingExtra as exc:  # a tool beyond `make run` whose extra is not installed
        fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
