"""A mesh plan: the scenario resolved into services, links and addresses.

The launcher allocates the ports and writes the plan to the run directory;
every service process reads it to find its peers, so one file describes the
running mesh. Links carry KV
bytes from each sending pool to each receiving pool (docs/mesh.md §Topology);
their rates and queues are divided by `byte_scale` because real bytes are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from services.scenario import LinkSpec, PoolSpec, Scenario
from services.types import Mode, Role

KV_RECEIVERS = (Role.DECODE, Role.MAIN_DECODE, Role.RELAY_DECODE)
FEED_SERVERS = (*KV_RECEIVERS, Role.COLOCATED)  # every pool the decode process serves


class ServicePlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    role: Role
    host: str  # how peers in its own datacenter reach it
    http_port: int  # health and /metrics (the user API too, for the router)
    grpc_port: int = 0
    kv_port: int = 0
    feed_port: int = 0  # a decode service's token feeds (services/main_decode/feed_server.py)
    pool: PoolSpec | None = None
    dc: str = ""
    bind_host: str | None = None  # where it listens, when not `host` (0.0.0.0 in a container)

    @property
    def grpc_address(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def listen_host(self) -> str:
        return self.bind_host or self.host


class LinkPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    src: str  # sending pool (or, for a control route, the consumer's datacenter)
    dst: str  # receiving pool
    kind: str  # "wan" or "rdma"
    host: str
    listen_port: int
    control_port: int
    upstream_port: int
    spec: LinkSpec
    upstream_host: str | None = None  # default: host (everything on one machine)
    purpose: str = "kv"  # "kv" (KV frames) or "control" (gRPC across datacenters, in containers)
    runner: str | None = None  # the container that runs it; None: a process of its own

    @property
    def upstream(self) -> str:
        return f"{self.upstream_host or self.host}:{self.upstream_port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.listen_port}"


class MeshPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    scenario: Scenario
    services: tuple[ServicePlan, ...]
    links: tuple[LinkPlan, ...]
    # Where each process's keeper writes NAME.json (services/launcher/keeper.py), set by the launcher that
    # starts them; None where none does (compose restarts its containers itself).
    status_dir: str | None = None

    def service(self, name: str) -> ServicePlan:
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(f"no service {name!r} in the plan; have {[s.name for s in self.services]}")

    def with_role(self, *roles: Role) -> list[ServicePlan]:
        return [s for s in self.services if s.role in roles]

    def link(self, src: str, dst: str) -> LinkPlan:
        for link in self.links:
            if link.src == src and link.dst == dst and link.purpose == "kv":
                return link
        raise KeyError(f"no link from {src!r} to {dst!r}")

    def control_link(self, dc: str, target: str, kind: str) -> LinkPlan | None:
        """The control route from datacenter `dc` to `target`'s "grpc" or "feed" port, if there is one."""
        name = route_name(dc, target, kind)  # by name: a test plan may move a link's upstream port
        for link in self.links:
            if link.purpose == "control" and link.name == name:
                return link
        return None

    def grpc_address(self, target: str, consumer: str) -> str:
        """How `consumer` reaches `target`'s gRPC port: directly, or through a control route across datacenters."""
        link = self.control_link(self.service(consumer).dc, target, "grpc")
        return link.address if link is not None else self.service(target).grpc_address

    def feed_address(self, target: str, consumer: str) -> str:
        """How `consumer` reaches `target`'s token feeds: directly, or through a control route across datacenters."""
        service = self.service(target)
        link = self.control_link(self.service(consumer).dc, target, "feed")
        return link.address if link is not None else f"{service.host}:{service.feed_port}"

    @property
    def router(self) -> ServicePlan:
        return self.with_role(Role.ROUTER)[0]

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2))

    @classmethod
    def load(cls, path: Path) -> "MeshPlan":
        return cls.model_validate_json(Path(path).read_text())


def router_dc(scenario: Scenario) -> str:
    """The router sits with prefill (or the colocated pool): where user traffic enters."""
    entry = scenario.pools_with(Role.PREFILL) or scenario.pools_with(Role.COLOCATED) or list(scenario.pools)
    return entry[0].dc


def control_routes(services: list[ServicePlan] | tuple[ServicePlan, ...]) -> list[tuple[str, ServicePlan, str, int]]:
    """(a caller's datacenter, a server in another one, "grpc" or "feed", that port): every route control
    takes across the WAN.

    Each gRPC port and each token-feed port of a service is a route of its own. MeshPlan.grpc_address
    and feed_address pick the link of such a route for any caller across datacenters: the router and
    prefill reaching main decode, the router reading main decode's feed, main decode reaching the relay
    for handoffs, the relay announcing kvship transfers to main decode.
    """
    dcs = sorted({s.dc for s in services})
    return [(dc, target, kind, port) for dc in dcs for target in services if target.dc != dc
            for kind, port in (("grpc", target.grpc_port), ("feed", target.feed_port)) if port]


def route_name(dc: str, target: str, kind: str) -> str:
    return f"{dc}-to-{target}-{kind}"


def control_spec(wan: LinkSpec) -> LinkSpec:
    """The WAN as gRPC sees it: its propagation delay and its line rate without byte_scale.

    Control messages are sent at their real size, not divided by byte_scale, so they ride the
    WAN's emulated rate as is (services/scenario/link_config.py) and, being small, cost only the
    propagation the study cares about. An assumption: a scenario's WAN jitter, loss, window and
    schedule stand for what the bulk KV stream meets (the article's transfers wandering between 1
    and 20 s behind other traffic, loss stalls at volume, a connection's window, docs/netem.md), so
    they are the KV link's alone; a few hundred bytes of control traffic see the line's propagation only. This keeps the
    handoff experiment's premise, token ids on a steady control plane (docs/results.md, "Handoff").
    """
    return wan.model_copy(update={"schedule": None, "jitter_s": 0.0, "loss": 0.0, "window_bytes": None})


def kv_paths(scenario: Scenario) -> list[tuple[PoolSpec, PoolSpec]]:
    """Every (sender, receiver) pair of pools that KV bytes travel between."""
    senders = scenario.pools_with(Role.PREFILL)
    receivers = scenario.pools_with(*KV_RECEIVERS)
    paths = [(s, r) for s in senders for r in receivers]
    if scenario.mode is Mode.PDD_KVSHIP:  # the relay ships its incremental KV to main decode
        paths += [(s, r) for s in scenario.pools_with(Role.RELAY_DECODE) for r in scenario.pools_with(Role.MAIN_DECODE)]
    return paths


def plan_mesh(scenario: Scenario, host: str, port: Callable[[], int], router_port: int = 0) -> MeshPlan:
    """The mesh of a scenario: a router, one service per pool, one KV link per sender/receiver pair, one
    control link per gRPC route between datacenters.

    `port()` gives each listening port: free ones on this machine (services/launcher/plan.py), or
    placeholders where nothing listens (a simulation, services/simulate/).
    """
    services = [ServicePlan(name="router", role=Role.ROUTER, host=host, http_port=router_port or port(),
                            dc=router_dc(scenario))]
    for pool in scenario.pools:
        receives_kv = pool.role in KV_RECEIVERS
        services.append(ServicePlan(
            name=pool.name, role=pool.role, host=host, pool=pool, http_port=port(), dc=pool.dc,
            grpc_port=port(), kv_port=port() if receives_kv else 0,
            feed_port=port() if pool.role in FEED_SERVERS else 0,
        ))
    by_name = {s.name: s for s in services}
    links = []
    for src, dst in kv_paths(scenario):
        kind = "rdma" if src.dc == dst.dc else "wan"
        links.append(LinkPlan(
            name=f"{src.name}-to-{dst.name}", src=src.name, dst=dst.name, kind=kind, host=host,
            listen_port=port(), control_port=port(),
            upstream_port=by_name[dst.name].kv_port, spec=scenario.link_between(src, dst),
        ))
    # With control_over_wan, gRPC between datacenters crosses the WAN too, as in compose: lookups, Generate
    # and its token feed, announces and handoffs pay the round trip (docs/mesh.md §Topology).
    for dc, target, kind, target_port in control_routes(services) if scenario.control_over_wan else ():
        links.append(LinkPlan(
            name=route_name(dc, target.name, kind), src=dc, dst=target.name, kind="wan", purpose="control",
            host=host, listen_port=port(), control_port=port(), upstream_port=target_port,
            spec=control_spec(scenario.wan),
        ))
    return MeshPlan(scenario=scenario, services=tuple(services), links=tuple(links))
