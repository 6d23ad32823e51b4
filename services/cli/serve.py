"""`pdd-emu serve --plan FILE --service NAME`: run one service of a mesh plan in the foreground.

NAME may also be a link runner (a container such as `wan-link`): then every link
the plan places on it runs in this process (services/launcher/link_host.py).
"""

from __future__ import annotations

import argparse
import importlib
import logging
from pathlib import Path

from services.cli.loop import run as run_loop
from services.cli.errors import fail
from services.launcher.compose_plan import HEALTH_PORT, links_on, service_on
from services.scenario.plan import MeshPlan
from services.types import Role

# Every decode-family role runs the one decode process (services/main_decode/server.py), which mixes
# in the relay's ledger and RPCs from services/relay_decode/; so imports run main_decode -> relay_decode.
ROLE_MODULES = {
    Role.ROUTER: "services.router.server",
    Role.PREFILL: "services.prefill.server",
    Role.DECODE: "services.main_decode.server",
    Role.MAIN_DECODE: "services.main_decode.server",
    Role.COLOCATED: "services.main_decode.server",
    Role.RELAY_DECODE: "services.main_decode.server",
}


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run one service of a mesh plan (used by `up` and by containers)")
    serve.add_argument("--plan", type=Path, required=True, help="plan.json written by `pdd-emu up`")
    serve.add_argument("--service", required=True,
                       help="the service's name (or its container) in the plan, or a link runner such as wan-link")
    serve.add_argument("--health-port", type=int, default=HEALTH_PORT,
                       help="where a link runner answers /health and /stats (default: %(default)s)")
    serve.add_argument("--idle-ok", action="store_true",
                       help="if the plan runs nothing under this name, serve /health only instead of failing "
                            "(containers of a fixed topology that a scenario leaves empty)")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    if not args.plan.is_file():
        fail(f"plan file {args.plan} does not exist")
    plan = MeshPlan.load(args.plan)
    # Runner names first: a container that runs links is never also a service.
    service = None if links_on(plan, args.service) else service_on(plan, args.service)
    logging.basicConfig(level=args.log_level, format=f"%(asctime)s {service.name if service else args.service} "
                                                     "%(levelname)s %(name)s: %(message)s")
    if service is None:
        if not links_on(plan, args.service) and not args.idle_ok:
            runners = sorted({link.runner for link in plan.links if link.runner})
            fail(f"no service or link runner {args.service!r} in the plan; services: "
                 f"{[s.name for s in plan.services]}, runners: {runners}")
        from services.launcher.link_host import serve_links

        run_loop(serve_links(plan, args.service, args.health_port))
        return 0
    from services.credentials import MissingToken
    from services.rpc.auth import required_token

    try:
        required_token()  # every gRPC call in and out carries it (services/rpc/auth.py)
    except MissingToken as exc:
        fail(str(exc))
    module = importlib.import_module(ROLE_MODULES[service.role])
    run_loop(module.serve(plan, service), keeps_time=service.role is not Role.ROUTER)
    return 0
