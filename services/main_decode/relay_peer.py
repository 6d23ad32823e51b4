"""The relay as main decode's RelayPeer (services/roles.py), over the relay's Decode gRPC stub.

A failed call comes back as the RoleError of its status (services/rpc/errors.py), so the decode
core decides on kinds (not_found: the relay never had the request) and never sees gRPC.
"""

from __future__ import annotations

from services.relay_decode.relay import StopWhen
from services.rpc import pb, pb_grpc
from services.rpc.errors import unary

RPC_TIMEOUT_S = 15.0


class GrpcRelayPeer:
    def __init__(self, stub: pb_grpc.DecodeStub) -> None:
        self.stub = stub

    async def handoff(self, request_id: str, from_position: int, stop: bool, ship_kv_to: str = "",
                      stop_when: StopWhen | None = None) -> pb.HandoffReply:
        request = pb.HandoffRequest(request_id=request_id, from_position=from_position, stop=stop,
                                    ship_kv_to=ship_kv_to, stop_when=_message(stop_when))
        return await unary(self.stub.Handoff, request, request_id, RPC_TIMEOUT_S)

    async def set_limit(self, request_id: str, limit: int | None) -> None:
        request = pb.LimitRequest(request_id=request_id, limit=-1 if limit is None else limit)
        await unary(self.stub.SetLimit, request, request_id, RPC_TIMEOUT_S)


def _message(rule: StopWhen | None) -> pb.StopWhen | None:
    if rule is None:
        return None
    return pb.StopWhen(backlog_at_most=rule.backlog_at_most, backlog_at_least=rule.backlog_at_least,
                       load_at_least=rule.load_at_least)
