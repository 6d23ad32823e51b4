"""Build a mesh plan on this machine: the schema of services/scenario/plan.py with free ports allocated."""

from __future__ import annotations

import socket

from services.scenario import Scenario
from services.scenario.plan import KV_RECEIVERS, LinkPlan, MeshPlan, ServicePlan, kv_paths, router_dc
from services.types import Role


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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
    return MeshPlan(scenario=scenario, services=tuple(services), links=tuple(links))
