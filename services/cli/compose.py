"""`pdd-emu compose plan | chaos | netem | tokens`: the Docker Compose deployment's helpers (docs/compose.md).

    pdd-emu compose plan --scenario pdd-mini --set wan.delay_s=20ms --out plan.json
    pdd-emu compose chaos --plan plan.json set delay=50ms rate=5gbit
    pdd-emu compose chaos --plan plan.json partition --duration 5s
    pdd-emu compose netem --plan plan.json          # inside wan-link's network namespace
    pdd-emu compose tokens /run/pdd-emu/mesh/token  # a random token, made once

The scenario and overrides may come from PDD_EMU_SCENARIO and PDD_EMU_SET (whitespace-
separated KEY=VALUE); `--set` flags are applied after PDD_EMU_SET, so they win.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from services.cli.errors import fail

if TYPE_CHECKING:
    from services.scenario.plan import LinkPlan, MeshPlan

SCENARIO_ENV, SET_ENV = "PDD_EMU_SCENARIO", "PDD_EMU_SET"


def register(sub: argparse._SubParsersAction) -> None:
    compose = sub.add_parser("compose", help="helpers of the Docker Compose deployment (plan, chaos, kernel netem)")
    verbs = compose.add_subparsers(dest="compose_command", metavar="VERB", required=True)

    plan = verbs.add_parser("plan", help="write the mesh plan every container reads")
    plan.add_argument("--scenario", default=os.environ.get(SCENARIO_ENV),
                      help=f"a preset name or a scenario YAML file (default: ${SCENARIO_ENV})")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help=f"override a scenario field, after those in ${SET_ENV} (repeatable)")
    plan.add_argument("--out", type=Path, required=True, help="where to write plan.json")
    plan.set_defaults(func=cmd_plan)

    chaos = verbs.add_parser("chaos", help="change the WAN at run time through the links' control APIs")
    chaos.add_argument("--plan", type=Path, required=True, help="the plan the mesh runs")
    chaos.add_argument("--link", action="append", default=[], metavar="NAME",
                       help="act on this link only (repeatable; default: every link of --runner)")
    chaos.add_argument("--runner", default="wan-link", help="the link container to act on (default: %(default)s)")
    actions = chaos.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("stats", help="print each link's config and counters")
    change = actions.add_parser("set", help="set link fields in emulated units, e.g. delay=50ms rate=5gbit")
    change.add_argument("fields", nargs="+", metavar="FIELD=VALUE")
    part = actions.add_parser("partition", help="cut the links: hold bytes (blackhole) or reset connections")
    part.add_argument("--mode", choices=("blackhole", "reject"), default="blackhole")
    part.add_argument("--direction", choices=("up", "down", "both"), default="both")
    part.add_argument("--duration", default=None, help="e.g. 5s; until `heal` when absent")
    actions.add_parser("heal", help="end a partition")
    sched = actions.add_parser("schedule", help="play a netem schedule YAML on the KV links (real units)")
    sched.add_argument("file", type=Path)
    actions.add_parser("unschedule", help="stop the schedule; links keep their current settings")
    chaos.set_defaults(func=cmd_chaos)

    netem = verbs.add_parser("netem", help="shape a link runner's WAN with kernel qdiscs, or say why not")
    netem.add_argument("--plan", type=Path, required=True)
    netem.add_argument("--runner", default="wan-link")
    netem.set_defaults(func=cmd_netem)

    tokens = verbs.add_parser("tokens", help="make each token file the stack needs, once (the `tokens` service)")
    tokens.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="a file to hold a new random token, readable by its owner only; one already there is kept")
    tokens.set_defaults(func=cmd_tokens)


def cmd_tokens(args: argparse.Namespace) -> int:
    """One line per file, never the token: made at the stack's first start, kept on every later one."""
    from services.credentials import new_token, write_token

    for path in args.files:
        print(f"pdd-emu compose tokens: {'made' if write_token(path, new_token(), keep=True) else 'kept'} {path}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from services.launcher.compose_plan import ComposePlanError, build_compose_plan
    from services.scenario import ScenarioError, load_scenario

    if not args.scenario:
        fail(f"give --scenario or set ${SCENARIO_ENV}")
    overrides = os.environ.get(SET_ENV, "").split() + args.overrides
    try:
        plan = build_compose_plan(load_scenario(args.scenario, overrides))
    except (ScenarioError, ComposePlanError) as exc:
        fail(str(exc))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plan.save(args.out)
    runners = sorted({link.runner for link in plan.links if link.runner})
    print(f"plan: {plan.scenario.name} ({plan.scenario.mode.value}), services "
          f"{', '.join(f'{s.name}@{s.host}' for s in plan.services)}; {len(plan.links)} links on "
          f"{', '.join(runners)}; overrides {overrides or 'none'} -> {args.out}", flush=True)
    return 0


def cmd_chaos(args: argparse.Namespace) -> int:
    from netem.config import ConfigError
    from netem.schedule import posted_form
    from services.scenario.plan import MeshPlan

    plan = MeshPlan.load(args.plan)
    schedule_text = None
    if args.action == "schedule":
        try:
            schedule_text = posted_form(args.file)
        except ConfigError as err:
            fail(f"schedule {args.file}: {err}")
    links = [l for l in plan.links if l.runner == args.runner and (not args.link or l.name in args.link)]
    if not links:
        fail(f"no link matches runner {args.runner!r} and {args.link or 'any name'}; plan links: "
             f"{[l.name for l in plan.links]}")
    fields = dict(_field(text) for text in getattr(args, "fields", []))
    return asyncio.run(_chaos(args, plan, links, fields, schedule_text))


async def _chaos(args: argparse.Namespace, plan: MeshPlan, links: list[LinkPlan], fields: dict[str, str],
                 schedule_text: str | None) -> int:
    import aiohttp

    from netem.client import ControlClient, ControlError
    from services.credentials import link_token
    from services.scenario.link_config import real_fields

    failed, token = False, link_token()
    async with aiohttp.ClientSession() as http:
        for link in links:
            if args.action == "schedule" and link.purpose != "kv":
                continue
            client = ControlClient(http, f"http://{link.host}:{link.control_port}", token)
            try:
                if args.action == "stats":
                    reply = {"config": await client.config(), "stats": await client.stats()}
                elif args.action == "set":  # fields in emulated units, as the scenario writes them
                    reply = await client.patch_config({"both": real_fields(link, fields, plan.scenario.byte_scale)})
                elif args.action == "partition":
                    reply = await client.partition(args.mode, args.direction, args.duration)
                elif args.action == "heal":
                    reply = await client.heal()
                elif args.action == "schedule":
                    reply = await client.post_schedule(text=schedule_text)
                else:
                    reply = await client.stop_schedule()
            except (ControlError, ValueError) as err:  # ValueError: a field netem cannot read
                failed, reply = True, {"error": str(err)}
            print(json.dumps({"link": link.name, **reply}), flush=True)
    return 1 if failed else 0


def _field(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        fail(f"{text!r} is not FIELD=VALUE (fields: delay, jitter, jitter_dist, rate, queue, loss, ...)")
    return key, value


def cmd_netem(args: argparse.Namespace) -> int:
    from services.launcher.link_host import kernel_takeover
    from services.scenario.plan import MeshPlan

    return kernel_takeover(MeshPlan.load(args.plan), args.runner,
                           report=lambda line: print(line, file=sys.stderr, flush=True))
