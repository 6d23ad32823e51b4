"""The options and the points folder that the economics benchmarks share with `experiment economics`.

Both benchmarks run the experiment's own points (services/experiments/economics): `--workers` of
them at once on a local Ray, stored under `--out`, an economics run's folder whose points are read
back rather than run again; without `--out`, under a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Awaitable, Callable


def add_point_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=2, help="points at once, on a local Ray (default 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help="an economics run's folder, whose points are read back (default: a temp dir)")


def run_with_points(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    main: Callable[[int, Path], Awaitable[None]]) -> None:
    """Run `main(workers, folder)` in the folder `--out` names, or in a temporary one."""
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    with tempfile.TemporaryDirectory() as temp:
        asyncio.run(main(args.workers, args.out or Path(temp)))
