"""A compose plan moved onto loopback: free ports, upstreams pointed at test servers."""

from __future__ import annotations

import socket
from contextlib import ExitStack
from pathlib import Path

from services.launcher.compose_plan import build_compose_plan
from services.scenario.plan import MeshPlan
from services.scenario import load_scenario

TOKEN = "test-token"


def local_plan(scenario: str, upstreams: dict[str, tuple[str, int]] | None = None,
               overrides: tuple[str, ...] = ()) -> MeshPlan:
    """build_compose_plan(scenario) with every link on free loopback ports; `upstreams` maps link names to servers."""
    plan = build_compose_plan(load_scenario(scenario, overrides))
    ports = iter(distinct_free_ports(3 * len(plan.links)))
    links = []
    for link in plan.links:
        listen, control, spare = next(ports), next(ports), next(ports)
        host, port = (upstreams or {}).get(link.name, ("127.0.0.1", spare))
        links.append(link.model_copy(update={"host": "127.0.0.1", "listen_port": listen, "control_port": control,
                                             "upstream_host": host, "upstream_port": port}))
    return plan.model_copy(update={"links": tuple(links)})


def distinct_free_ports(count: int) -> list[int]:
    """Ports free right now, all different: each stays bound until every one is chosen."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def saved(plan: MeshPlan, directory: Path) -> Path:
    path = directory / "plan.json"
    plan.save(path)
    return path
