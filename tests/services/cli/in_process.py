"""Run a pdd-emu sub-command in-process and capture its exit code and output (a fixture to import)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

import pytest


def _parser(*commands: str) -> argparse.ArgumentParser:
    """Like services.cli.build_parser, for the named sub-commands only: another command cannot break these tests."""
    parser = argparse.ArgumentParser(prog="pdd-emu")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in commands:
        importlib.import_module(f"services.cli.{name}").register(sub)
    return parser


@pytest.fixture
def cli(capsys) -> Callable[..., tuple[int, str, str]]:
    """cli("predict", "--gpu", ...) -> (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            args = _parser(argv[0]).parse_args(list(argv))
            code = int(args.func(args) or 0)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
