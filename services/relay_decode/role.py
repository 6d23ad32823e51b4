"""The relay decode core's calls: main decode pulls the relay's token ids (handoff), the router lifts its cap.

The relay's decoding itself is the decode core's (services/main_decode/role.py, which keeps this
ledger as each relayed request's tokens land); this core answers for the ledger. It implements
services/roles.py RelayPeer by direct calls, with no I/O: failures are RoleErrors, the KV shipper
(pdd-kvship) reaches main decode, and the decode service's gRPC servicer is its adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from services.relay_decode.relay import RelayLedger, StopWhen
from services.rpc.messages import pb
from services.types import ErrorKind, RoleError, Seconds

if TYPE_CHECKING:  # the shipper comes in as an argument; its sockets and stubs are not the core's
    from services.kv.shipper import KvShipper


class RelayDecodeRole:
    """`load`: the relay's load (RoleProcess.load), which main decode weighs to choose catch-up."""

    def __init__(self, ledger: RelayLedger, shipper: KvShipper, load: Callable[[], float],
                 settle_timeout_s: Seconds) -> None:
        self.ledger, self.shipper, self.load = ledger, shipper, load
        self.settle_timeout_s = settle_timeout_s

    async def handoff(self, request_id: str, from_position: int, stop: bool, ship_kv_to: str = "",
                      stop_when: StopWhen | None = None) -> pb.HandoffReply:
        try:
            await self.ledger.settled(request_id, self.settle_timeout_s)
            ids, end, stopped, finished = await self.ledger.handoff(request_id, from_position, stop, stop_when,
                                                                    self.load)
        except KeyError:
            raise RoleError(ErrorKind.NOT_FOUND, f"{request_id} is not relayed here") from None
        except TimeoutError:
            raise RoleError(ErrorKind.DEADLINE, f"{request_id}: relay did not reach its cut") from None
        if ship_kv_to and stopped and not finished:
            try:  # pdd-kvship: the KV of every relay token but the last crosses the WAN
                await self.shipper.ship(f"{request_id}/handoff", ship_kv_to, max(0, end - 1))
            except KeyError as exc:  # no link to `ship_kv_to`
                raise RoleError(ErrorKind.UNAVAILABLE, f"shipping the relay's KV failed: {exc}") from None
        return pb.HandoffReply(tokens=ids, end_position=end, stopped=stopped, finished=finished,
                               relay_load=self.load())

    async def set_limit(self, request_id: str, limit: int | None) -> None:
        try:
            self.ledger.set_limit(request_id, limit)
        except KeyError:
            raise RoleError(ErrorKind.NOT_FOUND, f"{request_id} is not relayed here") from None
