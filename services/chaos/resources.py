"""Leaks: after the traffic has drained, every counter of work in progress must be back at rest.

At rest means: router inflight 0; in every engine instance running 0, waiting
0 and KV blocks used 0 (cached, unreferenced blocks are fine: that is the
prefix cache); in every decode-side pool transfers_pending 0 and relayed 0; in
prefill transfers_in_flight 0; every link's queue empty and at most the
sender's pool of connections open. Open file descriptors and asyncio tasks are
compared with the same process at rest before the faults, with a small slack
for what a process opens lazily (a gRPC channel to a restarted peer, say).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp

from netem.client import ControlError
from services.chaos.mesh import ChaosMesh
from services.types import Role

SENDER_CONNECTIONS = 4  # KvSender's pool per destination: a link may hold that many idle connections
FD_SLACK = 16
TASK_SLACK = 16
POLL_S = 0.25


@dataclass
class Footprint:
    """What each process holds at one moment: RSS (KiB), open fds, asyncio tasks."""

    rss_kib: dict[str, int | None] = field(default_factory=dict)
    fds: dict[str, int | None] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)


# What a service still holds at rest, in its /stats: decode-side transfers and relayed requests,
# prefill's transfers still sending. The fault campaigns read the same (services/simulate/campaign.py).
WORK_KEYS = ("transfers_pending", "relayed", "transfers_in_flight")


def busy_reasons(name: str, role: Role, stats: dict) -> list[str]:
    """Why one service is not at rest; empty when it is."""
    reasons = []
    if role is Role.ROUTER:
        if stats["inflight"]:
            reasons.append(f"router inflight {stats['inflight']}")
        return reasons
    for instance, s in stats["instances"].items():
        for key in ("running", "waiting", "kv_blocks_used"):
            if s[key]:
                reasons.append(f"{instance} {key} {s[key]}")
    for key in WORK_KEYS:
        if stats.get(key):
            reasons.append(f"{name} {key} {stats[key]}")
    return reasons


def link_reasons(name: str, stats: dict) -> list[str]:
    reasons = []
    for side in ("up", "down"):
        s = stats[side]
        if s["queue_bytes"]:
            reasons.append(f"link {name} {side} queue_bytes {s['queue_bytes']}")
        if s["connections"] > SENDER_CONNECTIONS:
            reasons.append(f"link {name} {side} connections {s['connections']} > {SENDER_CONNECTIONS}")
    return reasons


async def not_at_rest(mesh: ChaosMesh, http: aiohttp.ClientSession) -> tuple[list[str], dict[str, dict]]:
    reasons: list[str] = []
    stats: dict[str, dict] = {}
    for service in mesh.services():
        try:
            stats[service.name] = await mesh.stats(http, service.name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            reasons.append(f"{service.name} /stats unreachable: {type(exc).__name__}")
            continue
        reasons += busy_reasons(service.name, service.role, stats[service.name])
    # KV links only: a control link carries the peers' gRPC channels, whose connections and HTTP/2
    # frames (pings, window updates, idle token streams) stay open at rest by design; what those
    # channels hold is counted by the services themselves above.
    for link in (link for link in mesh.plan.links if link.purpose == "kv"):
        try:
            reasons += link_reasons(link.name, await mesh.link(http, link).stats())
        except ControlError as exc:
            reasons.append(f"link {link.name} /stats unreachable: {type(exc).__name__}")
    return reasons, stats


async def wait_at_rest(mesh: ChaosMesh, http: aiohttp.ClientSession, deadline_s: float) -> tuple[list[str], Footprint]:
    """Poll until every counter is at rest or the deadline passes; the reasons left (none: at rest)."""
    deadline = time.monotonic() + deadline_s
    while True:
        reasons, stats = await not_at_rest(mesh, http)
        if not reasons or time.monotonic() > deadline:
            return reasons, footprint(mesh, stats)
        await asyncio.sleep(POLL_S)


def footprint(mesh: ChaosMesh, stats: dict[str, dict]) -> Footprint:
    snapshot = Footprint()
    for name in mesh.processes:
        snapshot.rss_kib[name] = mesh.rss_kib(name)
        snapshot.fds[name] = mesh.open_fds(name)
        if name in stats and "asyncio_tasks" in stats[name]:
            snapshot.tasks[name] = stats[name]["asyncio_tasks"]
    return snapshot


def growth(before: Footprint, after: Footprint) -> list[str]:
    """File descriptors or tasks held at rest beyond what the same process held at rest before."""
    grown = []
    for name, fds in after.fds.items():
        was = before.fds.get(name)
        if fds is not None and was is not None and fds > was + FD_SLACK:
            grown.append(f"{name} holds {fds} fds at rest, {was} before the faults")
    for name, tasks in after.tasks.items():
        was = before.tasks.get(name)
        if was is not None and tasks > was + TASK_SLACK:
            grown.append(f"{name} runs {tasks} asyncio tasks at rest, {was} before the faults")
    return grown
