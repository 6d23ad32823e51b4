"""`pdd-emu link`: run one shaped link in the foreground until SIGINT or SIGTERM.

Prints exactly one line when it accepts connections:
    pdd-emu link: ready listen=HOST:PORT upstream=HOST:PORT control=HOST:PORT
(control=- without a control API; real ports even when 0 was asked for).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.cli.errors import fail
from services.credentials import LINK_TOKEN_ENV, LINK_TOKEN_FILE_ENV, MissingToken, link_token
from services.cli.loop import run as run_loop

if TYPE_CHECKING:
    from netem.config import LinkConfig

SHAPING_FLAGS = ("delay", "jitter", "jitter_dist", "correlation", "rate", "queue", "loss")


def parse_address(text: str, what: str) -> tuple[str, int]:
    """'HOST:PORT' or '[v6]:PORT' -> (host, port); exits 2 on anything else."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"{what} {text!r} is not HOST:PORT (port 0-65535)")
    return host, int(port)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("link", help="run one shaped TCP link (userspace, or kernel qdiscs)")
    p.add_argument("--listen", required=True, metavar="HOST:PORT", help="accept clients here (port 0: any free port)")
    p.add_argument("--upstream", required=True, metavar="HOST:PORT", help="forward every connection here")
    shaping = p.add_argument_group("shaping, both directions alike (defaults: no shaping, a 64MiB queue)")
    shaping.add_argument("--delay", default=None, help="one-way delay (e.g. 20ms)")
    shaping.add_argument("--jitter", default=None, help="jitter scale, sigma (e.g. 5ms)")
    shaping.add_argument("--jitter-dist", default=None, help="uniform, normal, pareto or paretonormal")
    shaping.add_argument("--correlation", default=None, help="jitter correlation with the previous draw (e.g. 25%%)")
    shaping.add_argument("--rate", default=None, help="line rate (e.g. 800mbit); unlimited when absent")
    shaping.add_argument("--queue", default=None, help="bytes held per direction before the link stops reading")
    shaping.add_argument("--loss", default=None, help="loss per segment (1448 B), paid as a 200 ms stall (e.g. 0.1%%)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="the whole config as JSON, as GET /config returns it (instead of the shaping flags)")
    p.add_argument("--schedule", default=None, metavar="FILE", help="YAML timeline to play from the start")
    p.add_argument("--control", default=None, metavar="HOST:PORT", help="serve the control API here")
    p.add_argument("--control-token", default=None, metavar="T",
                   help=f"bearer token for the control API (or ${LINK_TOKEN_FILE_ENV} naming a file that holds "
                        f"it, or ${LINK_TOKEN_ENV}); required off loopback")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="seed for jitter and loss draws")
    p.add_argument("--name", default="link", help="the link's name, its metrics' `link` label (e.g. wan)")
    p.add_argument("--backend", choices=("userspace", "kernel"), default="userspace",
                   help="userspace (default) or kernel qdiscs via pyroute2, falling back to userspace")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    from netem.config import ConfigError, LinkConfig
    from netem.schedule import load_schedule

    options: dict[str, Any] = {
        "listen": parse_address(args.listen, "--listen"),
        "upstream": parse_address(args.upstream, "--upstream"),
        "control": parse_address(args.control, "--control") if args.control else None,
    }
    fields = {name: value for name in SHAPING_FLAGS if (value := getattr(args, name)) is not None}
    if args.config is not None and fields:
        fail(f"--config {args.config} gives the whole config; drop --{', --'.join(fields).replace('_', '-')}")
    try:
        options["config"] = _read_config(args.config) if args.config else LinkConfig.symmetric(**fields)
        options["schedule"] = load_schedule(args.schedule) if args.schedule else None
    except ConfigError as err:
        fail(str(err))
    if args.backend == "kernel" and args.schedule:
        fail("--schedule needs the userspace backend: qdiscs are set once, at start")
    try:
        args.control_token = args.control_token or link_token()
    except MissingToken as err:
        fail(str(err))
    if options["control"] and not args.control_token:
        from netem.control import is_loopback

        if not is_loopback(options["control"][0]):
            fail(f"--control {args.control} is not loopback: give --control-token (or ${LINK_TOKEN_ENV})")
    return options


def _read_config(path: Path) -> LinkConfig:
    from netem.config import ConfigError, LinkConfig

    try:
        return LinkConfig.model_validate_json(path.read_text())
    except OSError as err:
        raise ConfigError(f"--config {path}: {err.strerror}") from None
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        raise ConfigError(f"--config {path}: {err}") from None


def run(args: argparse.Namespace) -> int:
    options = _options(args)
    kernel = None
    if args.backend == "kernel":
        # pyroute2's calls run their own event loop, so the qdiscs are set before ours starts.
        from netem.kernel.cli import kernel_shaping

        kernel = kernel_shaping(options["config"], options["listen"], options["upstream"],
                                report=lambda line: print(line, file=sys.stderr, flush=True))
    if kernel is not None:
        options["config"] = None  # the relay must not shape a second time
    try:
        return run_loop(_serve(args, **options))
    except OSError as err:
        print(f"pdd-emu link: {err}", file=sys.stderr)
        return 1
    finally:
        if kernel is not None:
            kernel.clear()


async def _serve(args: argparse.Namespace, listen, upstream, control, config, schedule) -> int:  # type: ignore[no-untyped-def]
    from netem.control import ControlServer
    from netem.link import UserspaceLink

    link = UserspaceLink(listen, upstream, config, seed=args.seed)
    server = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await link.start()
        if control:
            server = ControlServer(link, control[0], control[1], token=args.control_token, name=args.name)
            await server.start()
        if schedule is not None:
            await link.run_schedule(schedule)
        shown = "-" if server is None else _show(server.address)
        print(f"pdd-emu link: ready listen={_show(link.listen_address)} upstream={_show(upstream)} control={shown}",
              flush=True)
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if server is not None:
            await server.stop()
        await link.stop()
    return 0


def _show(address: tuple[str, int] | None) -> str:
    if address is None:
        return "-"
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
