"""The whole mesh in one process: the same servicers and router, joined by in-process calls and virtual links.

Every service of the plan gets what `pdd-emu up` gives it (a RoleProcess with
its engines, and the PrefillService or DecodeService over it); the router gets
its Router and Peers. Where the mesh opens a gRPC channel, here an
`InprocStub` calls the peer's servicer; where it opens a KV connection through
a planned link, a `VirtualKvSender` times the same frames on a `VirtualLink`
built from the same link config and seed (docs/simulate.md, "Wiring").
Nothing here opens a socket.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from prometheus_client import CollectorRegistry

from netem.schedule import load_schedule
from netem.virtual import VirtualLink
from services.engine.prompt_memo import RecentPrompts
from services.instances import RoleProcess
from services.kv.transfers import TransferTable
from services.kv.shipper import Sender
from services.main_decode.server import DecodeService
from services.prefill.server import PrefillService
from services.router.peers import Peers
from services.router.server import Router
from services.scenario import Scenario
from services.scenario.link_config import real_link_config
from services.scenario.plan import LinkPlan, MeshPlan, plan_mesh
from services.simulate.inproc import InprocStub
from services.simulate.kvlink import VirtualKvSender
from services.types import Role

HOST = "simulated"  # no service listens anywhere; the plan's addresses only name the services

LAZY_TOKENS = True  # False: every token wakes its reader, as in the mesh (the records are the same)


def simulated_plan(scenario: Scenario) -> MeshPlan:
    """The scenario's mesh plan with placeholder ports: the same services and links as `pdd-emu up`'s."""
    ports = itertools.count(1)
    return plan_mesh(scenario, HOST, lambda: next(ports))


class _Routes:
    """KvRoutes of one service: the receiver's servicer in-process, its bytes on the planned virtual link."""

    def __init__(self, mesh: SimulatedMesh, me: str) -> None:
        self.mesh, self.me = mesh, me

    def stub(self, target: str) -> InprocStub:
        return self.mesh.stub(target, self.me)

    def sender(self, link: LinkPlan, on_lost: Callable[[list[str]], None]) -> Sender:
        return VirtualKvSender(self.mesh.links[link.name], self.mesh.transfers(link.dst), on_lost=on_lost)

    async def close(self) -> None:
        return None


class SimulatedMesh:
    """Built and started on the loop that runs it (a virtual one for `simulate`)."""

    def __init__(self, plan: MeshPlan) -> None:
        self.plan = plan
        scenario = plan.scenario
        # The mesh's links draw from the scenario's seed (services/launcher/processes.py, `--seed`).
        self.links = {link.name: VirtualLink(real_link_config(link, scenario.byte_scale), seed=scenario.seed)
                      for link in plan.links}
        self.processes: dict[str, RoleProcess] = {}
        self.recent = RecentPrompts()  # one process here: every service meets a prompt's hashes once
        self.servicers: dict[str, Any] = {}
        for service in plan.services:
            if service.role is not Role.ROUTER:
                self.build_service(service.name)
        self.router = Router(plan, CollectorRegistry())

    def build_service(self, name: str) -> None:
        """A fresh process and servicer for `name`, as its process has at start-up (a restart calls it again)."""
        service = self.plan.service(name)
        process = self.processes[name] = RoleProcess(self.plan, service, self.recent)
        routes = _Routes(self, name)
        if service.role is Role.PREFILL:
            self.servicers[name] = PrefillService(process, routes)
        else:
            self.servicers[name] = DecodeService(process, relay_stub=lambda target: self.stub(target, name),
                                                 kv_routes=routes)

    async def start(self) -> None:
        for link_plan in self.plan.links:
            link = self.links.get(link_plan.name)
            if link is None:
                continue
            await link.start()
            if link_plan.spec.schedule:
                await link.run_schedule(load_schedule(link_plan.spec.schedule))
        for name in self.processes:
            await self.start_service(name)
        self.router.peers = Peers(self.plan, {name: self.stub(name, "router") for name in self.servicers})
        # The client reads each token's arrival time from the token, so a stream's reader wakes for its
        # first token and its end, not for every token (services/router/feed.py LazyInbox).
        self.router.peers.lazy_tokens = LAZY_TOKENS

    async def start_service(self, name: str) -> None:
        for engine in self.processes[name].engines:
            await engine.start()

    def transfers(self, name: str) -> TransferTable:
        """The table `name`'s KV receiver hands arriving frames to."""
        return self.servicers[name].transfers

    def stub(self, target: str, caller: str) -> InprocStub:
        """`caller`'s stub of `target`: across datacenters on a connection of their control link, as its channel."""
        route = self.control_route(target, caller)
        wire = self.links[route.name].connect() if route is not None else None
        return InprocStub(self.servicers[target], caller, wire)

    def control_route(self, target: str, caller: str) -> LinkPlan | None:
        """The control link `caller`'s calls to `target` cross (between datacenters), or None."""
        return self.plan.control_link(self.plan.service(caller).dc, target, "grpc")

    async def stop(self) -> None:
        if self.router.peers is not None:
            await self.router.peers.close()
        for name, servicer in self.servicers.items():
            if isinstance(servicer, DecodeService):
                await servicer.close()
            else:
                await servicer.shipper.close()
        for process in self.processes.values():
            for engine in process.engines:
                await engine.stop()
        for link in self.links.values():
            await link.stop()

    def stats(self) -> dict[str, dict]:
        """Per service name, the dict its /stats endpoint returns in the mesh; links under their names."""
        out: dict[str, dict] = {"router": self.router.stats()}
        for name, process in self.processes.items():
            servicer = self.servicers[name]
            extra = servicer.stats() if isinstance(servicer, DecodeService) else servicer.shipper.stats()
            out[name] = {**process.stats(), **extra}
        for name, link in self.links.items():
            out[name] = link.stats()
        return out

    async def __aenter__(self) -> SimulatedMesh:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
