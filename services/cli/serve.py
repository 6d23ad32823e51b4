"""`pdd-emu serve --plan FILE --service NAME`: run one service of a mesh plan in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
from pathlib import Path

from services.cli.errors import fail
from services.launcher.plan import MeshPlan
from services.types import Role

ROLE_MODULES = {
    Role.ROUTER: "services.router.server",
    Role.PREFILL: "services.prefill.server",
    Role.DECODE: "services.main_decode.server",
    Role.MAIN_DECODE: "services.main_decode.server",
    Role.COLOCATED: "services.main_decode.server",
    Role.RELAY_DECODE: "services.relay_decode.server",
}


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run one service of a mesh plan (used by `up` and by containers)")
    serve.add_argument("--plan", type=Path, required=True, help="plan.json written by `pdd-emu up`")
    serve.add_argument("--service", required=True, help="the service's name in the plan")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    if not args.plan.is_file():
        fail(f"plan file {args.plan} does not exist")
    plan = MeshPlan.load(args.plan)
    try:
        service = plan.service(args.service)
    except KeyError as exc:
        fail(str(exc.args[0]))
    logging.basicConfig(level=args.log_level,
                        format=f"%(asctime)s {service.name} %(levelname)s %(name)s: %(message)s")
    module = importlib.import_module(ROLE_MODULES[service.role])
    asyncio.run(module.serve(plan, service))
    return 0
