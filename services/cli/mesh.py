"""`pdd-emu up | down | status`: the embedded mesh as local processes, no docker needed."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from services.cli.errors import fail
from services.credentials import MissingToken
from services.launcher.plan import build_plan
from services.launcher.processes import (
    STATE_FILE, LaunchError, _alive, health_state, keeper_status, read_state, start_mesh, stop_processes, unsupervised,
)
from services.scenario import ScenarioError, load_scenario
from services.simulate.realtime import realtime_fit

DEFAULT_RUN_DIR = Path(".pdd-emu")


def _run_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR,
                        help="where the plan, logs and process list live (default: %(default)s)")


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="start every service and link of a scenario as local processes")
    up.add_argument("--scenario", required=True, help="a preset name or a scenario YAML file")
    up.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario field, e.g. wan.rate_bps=5gbit (repeatable)")
    up.add_argument("--detach", action="store_true", help="return once healthy; stop later with `pdd-emu down`")
    up.add_argument("--port", type=int, default=0, help="router port (default: a free one)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for health")
    _run_dir_arg(up)
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop what `pdd-emu up` started, and only that")
    _run_dir_arg(down)
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", help="show the processes of the running mesh and their health")
    _run_dir_arg(status)
    status.set_defaults(func=cmd_status)


def cmd_up(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.scenario, args.overrides)
    except ScenarioError as exc:
        fail(str(exc))
    fit = realtime_fit(scenario)  # before anything starts: a deployment too big for this machine's CPUs
    if fit.refused:
        fail(fit.message())
    if not fit.fits:
        print(f"pdd-emu: warning: {fit.message()}", file=sys.stderr)
    existing = read_state(args.run_dir)
    if existing and any(_alive(p.pid) or unsupervised(args.run_dir, p) for p in existing[1]):
        fail(f"a mesh is already running from {args.run_dir}; stop it with `pdd-emu down --run-dir {args.run_dir}`")
    plan = build_plan(scenario, router_port=args.port)
    try:
        started = start_mesh(plan, args.run_dir, args.timeout)
    except MissingToken as exc:  # the user's $PDD_EMU_LINK_TOKEN_FILE names a file that cannot be read
        fail(str(exc))
    except LaunchError as exc:
        print(f"pdd-emu: error: {exc}")
        return 1
    print(f"scenario: {scenario.name} ({scenario.mode.value}), {len(started)} processes, logs in {args.run_dir}/logs")
    router = f"http://{plan.router.host}:{plan.router.http_port}"
    print(f"router: {router}")
    print(f"dashboard: {router}/dashboard  (live figures; docs/dashboard.md)", flush=True)
    if args.detach:
        return 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    restarts = {p.name: 0 for p in started}
    while not stop.wait(0.5):
        for proc in started:  # each keeper restarts its service; say so here too
            status = keeper_status(args.run_dir, proc.name) or {}
            if status.get("restarts", 0) > restarts[proc.name]:
                restarts[proc.name] = status["restarts"]
                print(f"pdd-emu: {proc.name} exited with code {status['last_exit_code']}; restart "
                      f"{status['restarts']}", flush=True)
        dead = [p.name for p in started if not _alive(p.pid)]
        if dead:  # a keeper gave up (too many failures in a row) or was stopped from outside
            print(f"pdd-emu: {', '.join(dead)} exited for good; stopping the mesh")
            break
    stop_processes(started, run_dir=args.run_dir)
    (args.run_dir / STATE_FILE).unlink(missing_ok=True)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    state = read_state(args.run_dir)
    if state is None:
        print(f"no mesh recorded in {args.run_dir}")
        return 0
    _, started = state
    stop_processes(started, run_dir=args.run_dir)
    (args.run_dir / STATE_FILE).unlink(missing_ok=True)
    print(f"stopped {len(started)} processes of scenario {state[0]['scenario']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state(args.run_dir)
    if state is None:
        print(f"no mesh recorded in {args.run_dir}")
        return 1
    info, started = state
    print(f"scenario: {info['scenario']}  router: {info['router']}")
    healthy = True
    print(f"  {'process':<28} {'pid':<8} {'state':<12} {'restarts':>8}  last exit code")
    for proc in started:
        status = keeper_status(args.run_dir, proc.name) or {}
        alive = _alive(proc.pid)
        answer = health_state(proc.health_url) if alive else None
        healthy &= answer == "healthy"  # a drained service is up but serves nothing: not a healthy mesh
        state = answer or (_unhealthy(status) if alive else _without_keeper(args.run_dir, proc))
        last = status.get("last_exit_code")
        print(f"  {proc.name:<28} {status.get('child_pid') or proc.pid:<8} {state:<12} {status.get('restarts', 0):>8}  "
              f"{'-' if last is None else last}")
    return 0 if healthy else 1


def _unhealthy(status: dict) -> str:
    """A kept service that does not answer /health: its keeper's state, or "no-answer" while it runs
    (starting, or hung until its keeper's liveness check kills it: docs/hangs.md)."""
    state = status.get("state", "running")
    return "no-answer" if state == "running" else state


def _without_keeper(run_dir: Path, proc) -> str:
    """A dead keeper's service: still running with nobody to restart it ("unsupervised"), or gone ("exited")."""
    return "unsupervised" if unsupervised(run_dir, proc) is not None else "exited"
