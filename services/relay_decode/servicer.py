"""The relay's gRPC calls: main decode pulls the relay's token ids (Handoff), the router lifts its cap.

A mixin of the decode service (services/main_decode/server.py), which owns the ledger (`relay`), the
KV shipper and the scenario; every pool runs the same servicer, and only a relay gets these calls.
"""

from __future__ import annotations

import grpc

from services.kv.shipper import ShipRefused
from services.relay_decode.relay import StopWhen
from services.rpc import pb


class RelayServicer:
    async def Handoff(self, request, context):
        try:
            await self.relay.settled(request.request_id, self.scenario.transfer_timeout_s)
            stop_when = StopWhen.of(request.stop_when) if request.HasField("stop_when") else None
            ids, end, stopped, finished = await self.relay.handoff(request.request_id, request.from_position,
                                                                   request.stop, stop_when, self.process.load)
        except KeyError:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"{request.request_id} is not relayed here")
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"{request.request_id}: relay did not reach its cut")
        if request.ship_kv_to and stopped and not finished:
            try:  # pdd-kvship: the KV of every relay token but the last crosses the WAN
                await self.shipper.ship(f"{request.request_id}/handoff", request.ship_kv_to, max(0, end - 1))
            except (ShipRefused, KeyError, grpc.aio.AioRpcError) as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"shipping the relay's KV failed: {exc}")
        return pb.HandoffReply(tokens=ids, end_position=end, stopped=stopped, finished=finished,
                               relay_load=self.process.load())

    async def SetLimit(self, request, context):
        try:
            self.relay.set_limit(request.request_id, None if request.limit < 0 else request.limit)
        except KeyError:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"{request.request_id} is not relayed here")
        return pb.Empty()
