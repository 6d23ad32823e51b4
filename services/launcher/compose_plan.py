"""The mesh plan for Docker Compose: one container per pool, two datacenter networks, one WAN box.

Containers are fixed slots of compose/compose.yaml (docs/compose.md):

    network dc-a: router (also on `front`), prefill, relay-decode, rdma-link
    network dc-b: main-decode (a pd-cross scenario's `decode` pool runs here too)
    both:         wan-link, the only container that can reach the two networks

Every pool keeps its scenario name; its `host` is its container. Ports are fixed
(each container has its own address, so pools may share port numbers); links,
which share a container, get ports of their own. Every byte between the
datacenters crosses wan-link: KV frames on the WAN's KV links, and gRPC on
"control" links that carry the WAN's delay, jitter and loss.
"""

from __future__ import annotations

from services.scenario.plan import (FEED_SERVERS, LinkPlan, MeshPlan, ServicePlan, control_routes, control_spec,
                                    kv_paths, route_name, router_dc)
from services.scenario import PoolSpec, Scenario
from services.types import Mode, Role

BIND_ALL = "0.0.0.0"
ROUTER_PORT = 8000  # the user API inside the router container; the host port is PDD_EMU_PORT
HEALTH_PORT = 8080  # every other container answers /health here (pools and link hosts alike)
GRPC_PORT = 50051
FEED_PORT = 50052
KV_PORT = 9000
LINK_PORT_BASE = 9100  # link i listens on BASE + 2i, its control API on BASE + 2i + 1

WAN_LINK = "wan-link"
RDMA_LINK = "rdma-link"  # on dc-a: the only datacenter where KV moves between pools
SLOTS = {Role.PREFILL: "prefill", Role.RELAY_DECODE: "relay-decode", Role.MAIN_DECODE: "main-decode",
         Role.DECODE: "main-decode"}
CROSS_DC_MODES = (Mode.PD_CROSS, Mode.PDD, Mode.PDD_KVSHIP)


class ComposePlanError(ValueError):
    """The scenario does not fit the compose topology; the message says what to change."""


def container_of(pool: PoolSpec, entry_dc: str) -> str:
    """The compose service a pool runs in; raises ComposePlanError when it has no slot."""
    slot = SLOTS.get(pool.role)
    if slot is None:
        raise ComposePlanError(f"pool {pool.name!r} has role {pool.role.value}, which has no container in "
                               f"compose/compose.yaml")
    in_entry_dc = pool.dc == entry_dc
    if (slot == "main-decode") == in_entry_dc:
        where = "the other datacenter than prefill" if slot == "main-decode" else "prefill's datacenter"
        raise ComposePlanError(f"pool {pool.name!r} ({pool.role.value}) must sit in {where} to run in container {slot}")
    return slot


def build_compose_plan(scenario: Scenario) -> MeshPlan:
    if scenario.mode not in CROSS_DC_MODES:
        raise ComposePlanError(
            f"compose runs the cross-datacenter modes ({', '.join(m.value for m in CROSS_DC_MODES)}); "
            f"scenario {scenario.name!r} is {scenario.mode.value}: run it with `pdd-emu up`")
    entry_dc = router_dc(scenario)
    services = [ServicePlan(name="router", role=Role.ROUTER, host="router", http_port=ROUTER_PORT, dc=entry_dc,
                            bind_host=BIND_ALL)]
    taken: dict[str, str] = {}
    for pool in scenario.pools:
        container = container_of(pool, entry_dc)
        if container in taken:
            raise ComposePlanError(f"pools {taken[container]!r} and {pool.name!r} both need container {container}; "
                                   f"compose runs one pool per role (raise `count` for more instances)")
        taken[container] = pool.name
        services.append(ServicePlan(
            name=pool.name, role=pool.role, host=container, pool=pool, dc=pool.dc, bind_host=BIND_ALL,
            http_port=HEALTH_PORT, grpc_port=GRPC_PORT, kv_port=KV_PORT if pool.role is not Role.PREFILL else 0,
            feed_port=FEED_PORT if pool.role in FEED_SERVERS else 0,
        ))
    links = _kv_links(scenario, services) + _control_links(scenario, services)
    numbered = [link.model_copy(update={"listen_port": LINK_PORT_BASE + 2 * i,
                                        "control_port": LINK_PORT_BASE + 2 * i + 1})
                for i, link in enumerate(links)]
    return MeshPlan(scenario=scenario, services=tuple(services), links=tuple(numbered))


def _kv_links(scenario: Scenario, services: list[ServicePlan]) -> list[LinkPlan]:
    by_name = {s.name: s for s in services}
    links = []
    for src, dst in kv_paths(scenario):
        runner = RDMA_LINK if src.dc == dst.dc else WAN_LINK
        receiver = by_name[dst.name]
        links.append(LinkPlan(
            name=f"{src.name}-to-{dst.name}", src=src.name, dst=dst.name, kind="rdma" if src.dc == dst.dc else "wan",
            host=runner, runner=runner, listen_port=0, control_port=0, upstream_host=receiver.host,
            upstream_port=receiver.kv_port, spec=scenario.link_between(src, dst),
        ))
    return links


def _control_links(scenario: Scenario, services: list[ServicePlan]) -> list[LinkPlan]:
    """A route through wan-link from each datacenter to every gRPC server and token feed of the other one."""
    return [LinkPlan(name=route_name(dc, target.name, kind), src=dc, dst=target.name, kind="wan", purpose="control",
                     host=WAN_LINK, runner=WAN_LINK, listen_port=0, control_port=0, upstream_host=target.host,
                     upstream_port=port, spec=control_spec(scenario.wan))
            for dc, target, kind, port in control_routes(services)]


def links_on(plan: MeshPlan, runner: str) -> list[LinkPlan]:
    return [link for link in plan.links if link.runner == runner]


def service_on(plan: MeshPlan, container: str) -> ServicePlan | None:
    """The service a container runs: the one of that name, else the one hosted there."""
    for service in plan.services:
        if service.name == container:
            return service
    hosted = [s for s in plan.services if s.host == container]
    return hosted[0] if len(hosted) == 1 else None
