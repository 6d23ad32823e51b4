"""Run the load-generation sub-commands alone, as `pdd-emu` would, without the other commands' modules."""

from __future__ import annotations

import argparse
import importlib
import sys

LOADGEN_COMMANDS = ("trace", "bench", "report", "sweep")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pdd-emu")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in LOADGEN_COMMANDS:
        importlib.import_module(f"services.cli.{name}").register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
