"""What one role may call on another: the interfaces of the role cores, as Protocols.

Each core (services/prefill/role.py, services/relay_decode/role.py, services/main_decode/role.py)
implements its interface by direct calls, so a core is its own in-process adapter; the gRPC
servicers serve the same calls over the wire, and a stub's adapter (services/main_decode/relay_peer.py)
implements the interface on the caller's side. Failures are RoleErrors (services/types.py).
The calls exchange protobuf messages (proto/pdd/v1/control.proto): they are the typed data of the
protocol, not I/O, and converting them at every hop would cost more than it would clarify.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Callable, Protocol

if TYPE_CHECKING:
    from services.engine.sequence import TokenEvent
    from services.relay_decode.relay import StopWhen
    from services.rpc import pb

# What a decode core offers each event as the engine's step ends (SequenceHandle.forward); True: taken.
Sink = Callable[[object], bool]


class RelayPeer(Protocol):
    """The relay as main decode sees it: pull its token ids (and stop it), or move its output cap."""

    async def handoff(self, request_id: str, from_position: int, stop: bool, ship_kv_to: str = "",
                      stop_when: StopWhen | None = None) -> pb.HandoffReply: ...

    async def set_limit(self, request_id: str, limit: int | None) -> None: ...


class PrefillPeer(Protocol):
    """A prefill pool: compute a prompt and ship its KV to the named receivers."""

    async def prefill(self, request: pb.PrefillRequest) -> pb.PrefillReply: ...

    async def cache_lookup(self, request: pb.CacheLookupRequest) -> pb.CacheLookupReply: ...

    def cancel_transfer(self, request_id: str) -> bool: ...


class DecodePeer(Protocol):
    """A decode pool (PD decode, colocated, relay or main decode): receive KV, decode a request."""

    async def announce(self, request: pb.TransferAnnounce) -> pb.TransferAck: ...

    async def cache_lookup(self, request: pb.CacheLookupRequest) -> pb.CacheLookupReply: ...

    def generate(self, request: pb.GenerateRequest,
                 sink: Sink | None = None) -> AsyncIterator[TokenEvent | pb.GenerateEvent]: ...
