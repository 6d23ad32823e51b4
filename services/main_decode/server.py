"""The decode process: a pool of emulated instances behind the Decode gRPC service.

Every decode pool (PD decode, colocated, PDD main decode and relay decode) runs this servicer:
the gRPC adapter of the decode core (services/main_decode/role.py) and of the relay's core
(services/relay_decode/role.py, whose calls only a relay gets). Each call goes to a core, and
the cores' RoleErrors leave as status codes (services/rpc/errors.py). The adapter owns what
is I/O: the KV receiver's sockets, the channels to the relays, the token feeds (on their own TCP
port, services/main_decode/feed_server.py, or as the `Tokens` stream).
"""

from __future__ import annotations

import logging
from typing import Callable

from services.instances import RoleProcess
from services.kv.receiver import KvReceiver, ReceiverLimits
from services.kv.transfers import TransferTable
from services.kv.shipper import KvRoutes, KvShipper
from services.main_decode.feed import FeedTable, Route
from services.main_decode.feed_server import FeedServer
from services.main_decode.relay_peer import GrpcRelayPeer
from services.main_decode.role import MainDecodeRole
from services.relay_decode.relay import RelayLedger, StopWhen
from services.relay_decode.role import RelayDecodeRole
from services.roles import RelayPeer
from services.rpc import TOKEN_FEED_METADATA, channel, metadata_value, pb, pb_grpc
from services.rpc.errors import abort, answer
from services.scenario.plan import MeshPlan, ServicePlan
from services.types import ErrorKind, RoleError

log = logging.getLogger(__name__)


class DecodeService(pb_grpc.DecodeServicer):
    """`relay_stub` and `kv_routes` reach the peers; None: over gRPC channels and the planned links."""

    def __init__(self, process: RoleProcess, relay_stub: Callable[[str], pb_grpc.DecodeStub] | None = None,
                 kv_routes: KvRoutes | None = None) -> None:
        self.process = process
        scenario = process.plan.scenario
        self.transfers = TransferTable(unclaimed_s=scenario.transfer_timeout_s)
        self.receiver = KvReceiver(self.transfers, process.service.listen_host, process.service.kv_port,
                                   ReceiverLimits(frame_read_s=scenario.transfer_timeout_s))
        self.relay = RelayLedger()
        self._relay_peers: dict[str, RelayPeer] = {}
        self._connect_relay = relay_stub or self._relay_channel
        self._channels = []
        self.shipper = KvShipper(process.plan, process.service.name, kv_routes)  # the relay's KV, pdd-kvship only
        self.feeds = FeedTable()
        self.feed_server = FeedServer(self.feeds, process.service.listen_host, process.service.feed_port)
        self.role = MainDecodeRole(process, self.transfers, self.relay, self._relay_peer)
        self.relay_role = RelayDecodeRole(self.relay, self.shipper, process.load, scenario.transfer_timeout_s)

    def _relay_peer(self, name: str) -> RelayPeer:
        if name not in self._relay_peers:
            self._relay_peers[name] = GrpcRelayPeer(self._connect_relay(name))
        return self._relay_peers[name]

    def _relay_channel(self, name: str) -> pb_grpc.DecodeStub:
        ch = channel(self.process.plan.grpc_address(name, self.process.service.name))
        self._channels.append(ch)
        return pb_grpc.DecodeStub(ch)

    async def Announce(self, request, context):
        return await self.role.announce(request)

    async def CacheLookup(self, request, context):
        return await answer(context, self.role.cache_lookup(request))

    async def Tokens(self, request, context):
        feed = self.feeds.open(request.subscriber or context.peer())
        try:
            async for message in feed.messages():
                yield message
        finally:
            self.feeds.close(feed)

    async def Generate(self, request, context):
        """The request's events; its tokens go through the caller's feed when the call names an open one."""
        route = Route(self.feeds.get(metadata_value(context, TOKEN_FEED_METADATA)), request.request_id)
        try:
            async for event in route.events(self.role.generate(request, route.sink)):
                yield event
        except RoleError as exc:
            await abort(context, exc)

    async def GenerateFed(self, request, context):
        """Generate with every token through the caller's open feed; the reply is the stats event."""
        feed = self.feeds.get(metadata_value(context, TOKEN_FEED_METADATA))
        if feed is None:
            await abort(context, RoleError(ErrorKind.UNAVAILABLE, "the call names no token feed open here"))
        route, stats = Route(feed, request.request_id), None
        try:
            async for event in route.events(self.role.generate(request, route.sink)):
                stats = event  # with a feed, the stats are the only event (Route.events)
        except RoleError as exc:
            await abort(context, exc)
        if stats is None:
            await abort(context, RoleError(ErrorKind.FAILED, "the request ended without its stats"))
        return stats

    async def Handoff(self, request, context):
        try:
            stop_when = StopWhen.of(request.stop_when) if request.HasField("stop_when") else None
            return await self.relay_role.handoff(request.request_id, request.from_position, request.stop,
                                                 request.ship_kv_to, stop_when)
        except RoleError as exc:
            await abort(context, exc)

    async def SetLimit(self, request, context):
        await answer(context, self.relay_role.set_limit(request.request_id,
                                                        None if request.limit < 0 else request.limit))
        return pb.Empty()

    async def Health(self, request, context):
        return pb.HealthReply(serving=not self.process.draining, role=self.process.service.role.value,
                              name=self.process.service.name)

    async def Stats(self, request, context):
        return pb.StatsReply(json=self.process.stats_json(self.stats()))

    async def Drain(self, request, context):
        self.process.drain()
        return pb.Empty()

    async def Resume(self, request, context):
        self.process.resume()
        return pb.Empty()

    def stats(self) -> dict:
        t, role = self.transfers, self.role
        return {"transfers_completed": t.completed, "transfers_failed": t.failed, "transfers_pending": t.pending,
                "kv_bytes_received": t.bytes_received, "orphan_frames": t.orphan_frames,
                "orphan_transfers_expired": t.orphans_expired,
                "late_announces": t.late_announces,
                "bad_frames": self.receiver.bad_frames, **self.receiver.stats(),
                "relayed": len(self.relay.requests),
                "relay_handoffs": self.relay.handoffs, "relay_finished_here": self.relay.finished_here,
                "handoffs": dict(role.handoffs), "token_feeds": len(self.feeds),
                "decoded_without_relay": role.relay_missing}

    async def close(self) -> None:
        await self.feed_server.close()
        await self.receiver.stop()
        await self.shipper.close()
        for ch in self._channels:
            await ch.close()


async def serve(plan: MeshPlan, service: ServicePlan) -> None:
    process = RoleProcess(plan, service)
    servicer = DecodeService(process)
    if service.kv_port:
        await servicer.receiver.start()
    if service.feed_port:
        await servicer.feed_server.start()
    await process.run(lambda server: pb_grpc.add_DecodeServicer_to_server(servicer, server),
                      extra_stats=servicer.stats, on_close=servicer.close)
