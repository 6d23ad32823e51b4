"""Build a mesh plan on this machine: the schema of services/scenario/plan.py with free ports allocated."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from services.scenario import Scenario
from services.scenario.plan import (KV_RECEIVERS, LinkPlan, MeshPlan, ServicePlan, control_routes, control_spec,
                                    kv_paths, router_dc)
from services.types import Role


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_SPAN = 12_000  # ports below the ephemeral range the plans draw from
_handed_out: set[int] = set()
_choose = random.Random()  # which free port a service gets has no bearing on any result: no seed


def ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, below the kernel's ephemeral range, and new to this process.

    A port from bind(0) lies inside the ephemeral range, where the source port of any outgoing
    connection on the machine may take it between the plan and the service's own bind: a main
    decode then failed to bind its HTTP port five restarts in a row. Below the range only other
    listeners compete, and each port is handed out once per process, since a plan allocates all its
    ports before any service binds them.
    """
    high = ephemeral_low()
    low = max(1024, high - LISTEN_SPAN)
    for _ in range(200 if high - low >= 1000 else 0):
        port = _choose.randrange(low, high)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue  # a listener has it
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # no room below the range: any free port
        sock.bind((host, 0))
        return sock.getsockname()[1]


def build_plan(scenario: Scenario, host: str = "127.0.0.1", router_port: int = 0) -> MeshPlan:
    services = [ServicePlan(name="router", role=Role.ROUTER, host=host, http_port=router_port or free_port(host),
                            dc=router_dc(scenario))]
    for pool in scenario.pools:
        receives_kv = pool.role in KV_RECEIVERS
        services.append(ServicePlan(
            name=pool.name, role=pool.role, host=host, pool=pool, http_port=free_port(host), dc=pool.dc,
            grpc_port=free_port(host), kv_port=free_port(host) if receives_kv else 0,
        ))
    by_name = {s.name: s for s in services}
    links = []
    for src, dst in kv_paths(scenario):
        kind = "rdma" if src.dc == dst.dc else "wan"
        links.append(LinkPlan(
            name=f"{src.name}-to-{dst.name}", src=src.name, dst=dst.name, kind=kind, host=host,
            listen_port=free_port(host), control_port=free_port(host),
            upstream_port=by_name[dst.name].kv_port, spec=scenario.link_between(src, dst),
        ))
    # gRPC between datacenters crosses the WAN too, as in compose: lookups, Generate and its token
    # feed, announces and handoffs pay the round trip (docs/mesh.md §Topology).
    for dc, target in control_routes(services):
        links.append(LinkPlan(
            name=f"{dc}-to-{target.name}-grpc", src=dc, dst=target.name, kind="wan", purpose="control", host=host,
            listen_port=free_port(host), control_port=free_port(host), upstream_port=target.grpc_port,
            spec=control_spec(scenario.wan),
        ))
    return MeshPlan(scenario=scenario, services=tuple(services), links=tuple(links))
