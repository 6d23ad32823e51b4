"""The relay's gRPC stub as main decode's RelayPeer: the calls it makes, and its failures as RoleErrors."""

from __future__ import annotations

import grpc
import pytest

from services.main_decode.relay_peer import RPC_TIMEOUT_S, GrpcRelayPeer
from services.rpc import REQUEST_ID_METADATA, pb
from services.types import ErrorKind, RoleError


class RecordingStub:
    def __init__(self, fail: grpc.StatusCode | None = None) -> None:
        self.fail, self.calls = fail, []

    async def _call(self, request, timeout=None, metadata=None):
        self.calls.append((type(request).__name__, request, timeout, dict(metadata)))
        if self.fail is not None:
            raise grpc.aio.AioRpcError(self.fail, grpc.aio.Metadata(), grpc.aio.Metadata(), details="gone")
        return pb.HandoffReply(tokens=[4, 5], end_position=2) if isinstance(request, pb.HandoffRequest) else pb.Empty()

    Handoff = SetLimit = _call


async def test_calls_carry_the_request_id_and_the_deadline():
    stub = RecordingStub()
    peer = GrpcRelayPeer(stub)
    reply = await peer.handoff("r", 3, stop=True, ship_kv_to="main-decode")
    await peer.set_limit("r", None)
    (_, handoff, timeout, metadata), (_, limit, _, _) = stub.calls
    assert list(reply.tokens) == [4, 5] and timeout == RPC_TIMEOUT_S and metadata[REQUEST_ID_METADATA] == "r"
    assert (handoff.from_position, handoff.stop, handoff.ship_kv_to) == (3, True, "main-decode")
    assert limit.limit == -1  # no limit, on the wire


async def test_a_failed_call_is_the_role_error_of_its_status():
    with pytest.raises(RoleError) as missing:
        await GrpcRelayPeer(RecordingStub(grpc.StatusCode.NOT_FOUND)).handoff("r", 0, stop=False)
    assert missing.value.kind is ErrorKind.NOT_FOUND and missing.value.message == "gone"
