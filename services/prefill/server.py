"""The prefill process: a pool of emulated instances behind the Prefill gRPC service.

The servicer is the gRPC adapter of the prefill core (services/prefill/role.py): each call
goes to the core, and the core's RoleErrors leave as status codes (services/rpc/errors.py).
"""

from __future__ import annotations

from services.instances import RoleProcess
from services.kv.shipper import KvRoutes, KvShipper
from services.prefill.role import PrefillRole
from services.rpc import pb, pb_grpc
from services.rpc.errors import answer
from services.scenario.plan import MeshPlan, ServicePlan


class PrefillService(pb_grpc.PrefillServicer):
    """`kv_routes` reaches the receivers; None: over gRPC channels and the planned links."""

    def __init__(self, process: RoleProcess, kv_routes: KvRoutes | None = None) -> None:
        self.process = process
        self.me: ServicePlan = process.service
        self.shipper = KvShipper(process.plan, self.me.name, kv_routes)
        self.role = PrefillRole(process, self.shipper)

    async def Prefill(self, request, context):
        return await answer(context, self.role.prefill(request))

    async def CacheLookup(self, request, context):
        return await answer(context, self.role.cache_lookup(request))

    async def CancelTransfer(self, request, context):
        return pb.CancelReply(cancelled=self.role.cancel_transfer(request.request_id))

    async def Health(self, request, context):
        return pb.HealthReply(serving=not self.process.draining, role=self.me.role.value, name=self.me.name)

    async def Stats(self, request, context):
        return pb.StatsReply(json=self.process.stats_json(self.shipper.stats()))

    async def Drain(self, request, context):
        self.process.drain()
        return pb.Empty()

    async def Resume(self, request, context):
        self.process.resume()
        return pb.Empty()


async def serve(plan: MeshPlan, service: ServicePlan) -> None:
    process = RoleProcess(plan, service)
    servicer = PrefillService(process)
    await process.run(lambda server: pb_grpc.add_PrefillServicer_to_server(servicer, server),
                      extra_stats=servicer.shipper.stats, on_close=servicer.shipper.close)
