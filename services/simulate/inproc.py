"""gRPC stubs without gRPC: each call goes straight into the servicer object the mesh runs.

The router's pipelines, main decode's handoff and the KV shipper call their peers
through stubs (`stub.CacheLookup(request, timeout=..., metadata=...)`,
`stub.Generate(request, metadata=...)` iterated for events). `InprocStub` offers
the same calls on a servicer in this process: a unary call awaits the servicer's
coroutine in the caller's task under the call's deadline, a server stream runs
the servicer's generator in a task of its own from the moment the call is made
(as the mesh's server starts the handler when the call arrives), and
`context.abort` raises the `grpc.aio.AioRpcError` the caller's `except` clauses
already expect. Messages are passed as objects, never serialised.

Between datacenters the mesh's gRPC channel is one connection through a WAN
control link (services/scenario/plan.py `control_routes`); here a stub across
datacenters holds one connection of the same link's VirtualLink (its `wire`),
and every message rides it at its serialised size: the request "up" before the
servicer sees it, each reply or stream event "down" before the caller does. A
stream's events are sent as the servicer yields them and arrive in order, so
an event leaves at its production time, as in the mesh's HTTP/2 stream.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterator, NamedTuple

import grpc

from netem.virtual import VirtualConnection
from services.simulate.feedport import Deliver, PushedFeed

STREAMING = frozenset({"Generate", "Tokens"})  # the server-streaming methods of proto/pdd/v1/control.proto
_END = object()
_CANCELLED = object()  # cancel() was called: reading on raises CancelledError, as a cancelled grpc.aio call does
SMALL_MESSAGE_BYTES = 64  # an event that is not a protobuf message (none in the mesh today): a header's worth


def _size(message: Any) -> int:
    byte_size = getattr(message, "ByteSize", None)
    return byte_size() if byte_size is not None else SMALL_MESSAGE_BYTES


async def _carry(wire: VirtualConnection | None, direction: str, message: Any) -> None:
    """`message` across the control link's connection; a reset is what gRPC reports as UNAVAILABLE."""
    if wire is None:
        return
    try:
        await wire.send(direction, _size(message))  # type: ignore[arg-type]
    except ConnectionResetError as exc:
        raise InprocRpcError(grpc.StatusCode.UNAVAILABLE, f"connection reset on the control link: {exc}") from None


class InprocRpcError(grpc.aio.AioRpcError):
    """A call's failure as a gRPC client sees it: a status code and its details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


class _Item(NamedTuple):  # what ServicerContext.invocation_metadata() yields: .key and .value
    key: str
    value: str


class InprocContext:
    """The parts of grpc.aio.ServicerContext the servicers use: metadata, the peer, abort."""

    __slots__ = ("_metadata", "_peer")

    def __init__(self, metadata: Any, peer: str) -> None:
        self._metadata = tuple(_Item(k, v) for k, v in metadata or ())
        self._peer = peer

    def invocation_metadata(self) -> tuple[_Item, ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise InprocRpcError(code, details)


def _as_rpc_error(exc: BaseException) -> grpc.aio.AioRpcError:
    """What the client sees of a servicer's exception: its own status, or UNKNOWN (gRPC's rule)."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc
    return InprocRpcError(grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")


class StreamCall:
    """A server-streaming call: started at once, read by iterating it, stopped by `cancel()`."""

    def __init__(self, events: AsyncIterator[Any], wire: VirtualConnection | None = None,
                 request: Any = None) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._wire = wire
        self._last: asyncio.Future[None] | None = None  # the latest event still crossing the wire
        self._cancelled = False  # by the reader's cancel(); any other cancel is the server's process dying
        self._task = asyncio.get_running_loop().create_task(self._pump(events, request))
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if task.cancelled() and not self._cancelled:  # the server died with its process (services/simulate/outage.py)
            self._put(InprocRpcError(grpc.StatusCode.UNAVAILABLE, "the server's connection was reset"))

    async def _pump(self, events: AsyncIterator[Any], request: Any) -> None:
        try:
            await _carry(self._wire, "up", request)
            async for event in events:
                self._deliver(event)
            self._deliver(_END)
        except asyncio.CancelledError:
            raise  # cancel() has told the reader, or _ended does
        except BaseException as exc:  # noqa: BLE001 - the client reads it as the call's status
            self._deliver(_as_rpc_error(exc))

    def _deliver(self, item: Any) -> None:
        """`item` to the reader: at once in-process, or once it has crossed the wire after the ones before it."""
        if self._wire is None:
            self._put(item)
            return
        self._last = asyncio.ensure_future(self._cross(item, self._last))

    async def _cross(self, item: Any, before: asyncio.Future[None] | None) -> None:
        try:
            if item is not _END and not isinstance(item, BaseException):
                await _carry(self._wire, "down", item)
        except InprocRpcError as reset:
            item = reset
        if before is not None:
            await before
        self._put(item)

    def _put(self, item: Any) -> None:
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def cancel(self) -> bool:
        """Stop the servicer's generator (even one not started yet); the reader sees CancelledError next."""
        if self._last is not None:
            self._last.cancel()  # nothing still crossing the wire reaches the reader after the cancel
        if self._task.done() or self._task.cancelling():
            return False
        self._cancelled = True
        self._task.cancel()
        self._put(_CANCELLED)
        return True

    def done(self) -> bool:
        return self._task.done()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._read()

    async def _read(self) -> AsyncIterator[Any]:
        items = self._items
        while True:
            while not items:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
            item = items.popleft()
            if item is _END:
                return
            if item is _CANCELLED:
                raise asyncio.CancelledError()
            if isinstance(item, BaseException):
                raise item
            yield item


class InprocStub:
    """A stub whose calls are the servicer's own methods, with the mesh's deadlines and errors."""

    def __init__(self, servicer: Any, caller: str = "inproc", wire: VirtualConnection | None = None) -> None:
        self._servicer = servicer
        self._peer = f"inproc:{caller}"
        self._wire = wire  # the control link's connection across datacenters; None within one

    def open_tokens(self, request: Any, deliver: Deliver) -> PushedFeed:
        """The `Tokens` stream as the feed port hands it over: each batch to `deliver` (services/simulate/feedport.py)."""
        return PushedFeed(self._servicer.feeds, request.subscriber or self._peer, deliver, self._wire)

    def __getattr__(self, method: str):
        """The call `method`, built on first use and kept as the stub's attribute."""
        call = self._call(method)
        setattr(self, method, call)
        return call

    def _call(self, method: str):
        handler = getattr(self._servicer, method)
        wire = self._wire
        if method in STREAMING:
            def stream(request, metadata=None, timeout=None, wait_for_ready=None) -> StreamCall:
                return StreamCall(handler(request, InprocContext(metadata, self._peer)), wire, request)
            return stream

        async def unary(request, timeout=None, metadata=None, wait_for_ready=None):
            try:
                async with asyncio.timeout(timeout):
                    await _carry(wire, "up", request)
                    reply = await handler(request, InprocContext(metadata, self._peer))
                    await _carry(wire, "down", reply)
                    return reply
            except TimeoutError:
                raise InprocRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the client reads it as the call's status
                raise _as_rpc_error(exc) from exc
        return unary
