"""What one role may call on another: the interfaces of the role cores, as Protocols.

Each core (services/prefill/role.py, services/relay_decode/role.py, services/main_decode/role.py)
implements its interface by direct calls, so a core is its own in-process adapter; the gRPC
servicers serve the same calls over the wire, and a stub's adapter (services/main_decode/relay_peer.py)
implements the interface on the caller's side. Failures are RoleErrors (services/types.py).
The router's pipelines reach every pool through `RouterPeers`, whose adapter is services/router/peers.py.
The calls exchange protobuf messages (proto/pdd/v1/control.proto): they are the typed data of the
protocol, not I/O, and converting them at every hop would cost more than it would clarify.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Callable, NamedTuple, Protocol

if TYPE_CHECKING:
    from services.engine.sequence import TokenEvent
    from services.relay_decode.relay import StopWhen
    from services.router.pipelines import Job
    from services.rpc import pb
    from services.scenario.plan import MeshPlan, ServicePlan
    from services.types import Role

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


class Token(NamedTuple):  # a tuple: one is built per streamed token, and a frozen dataclass costs more
    position: int
    token_id: int
    t: float = 0.0  # the router's loop time when its step's feed message arrived (0: not read from a feed)


class TokenRun(tuple):
    """Consecutive `Token`s of one stream, passed on at once: what a simulation's lazy reader had queued.

    Every layer between the stream and the client treats a run as its tokens in order; the mesh reads
    token by token and never makes one (docs/simulate.md, "Speed").
    """

    __slots__ = ()


def token_count(item: object) -> int:
    """The tokens a stream item carries: 1 for a `Token`, a run's length, 0 for anything else."""
    kind = type(item)
    return 1 if kind is Token else len(item) if kind is TokenRun else 0  # type: ignore[arg-type]


class DecodeStream(Protocol):
    """One Generate call as the router reads it: `Token`s (or `TokenRun`s) in order, then one `GenerateStats`."""

    def cancel(self) -> bool: ...

    def __aiter__(self) -> AsyncIterator[Token | pb.GenerateStats]: ...


class RouterPeers(Protocol):
    """Every pool as the router's pipelines see it; each call fails with a RoleError.

    `job` is the request (services/router/pipelines.py): its prompt goes by reference where a lookup
    left it (services/router/prompts.py), and the call is made again with the ids if it was gone.
    """

    plan: MeshPlan
    kv_bytes_per_token: int

    def services(self, *roles: Role) -> list[ServicePlan]: ...

    def pick_prefill(self) -> ServicePlan: ...

    async def cache_lookup(self, service: str, job: Job) -> pb.CacheLookupReply: ...

    def generate(self, service: str, request: pb.GenerateRequest, job: Job) -> DecodeStream: ...

    async def submit_prefill(self, pool: str, request: pb.PrefillRequest, job: Job) -> pb.PrefillReply: ...

    async def cancel_transfer(self, pool: str, request_id: str, reason: str) -> bool: ...

    async def set_limit(self, service: str, request_id: str, limit: int | None) -> None: ...

    def abandon_transfer(self, pool: str, job: Job) -> None: ...
