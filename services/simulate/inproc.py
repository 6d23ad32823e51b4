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
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterator, NamedTuple

import grpc

STREAMING = frozenset({"Generate", "Tokens"})  # the server-streaming methods of proto/pdd/v1/control.proto
_END = object()
_CANCELLED = object()  # cancel() was called: reading on raises CancelledError, as a cancelled grpc.aio call does


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

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._task = asyncio.get_running_loop().create_task(self._pump(events))

    async def _pump(self, events: AsyncIterator[Any]) -> None:
        try:
            async for event in events:
                self._put(event)
            self._put(_END)
        except asyncio.CancelledError:
            raise  # cancel() has told the reader
        except BaseException as exc:  # noqa: BLE001 - the client reads it as the call's status
            self._put(_as_rpc_error(exc))

    def _put(self, item: Any) -> None:
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def cancel(self) -> bool:
        """Stop the servicer's generator (even one not started yet); the reader sees CancelledError next."""
        if self._task.done() or self._task.cancelling():
            return False
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

    def __init__(self, servicer: Any, caller: str = "inproc") -> None:
        self._servicer = servicer
        self._peer = f"inproc:{caller}"

    def __getattr__(self, method: str):
        handler = getattr(self._servicer, method)
        if method in STREAMING:
            def stream(request, metadata=None, timeout=None, wait_for_ready=None) -> StreamCall:
                return StreamCall(handler(request, InprocContext(metadata, self._peer)))
            return stream

        async def unary(request, timeout=None, metadata=None, wait_for_ready=None):
            try:
                async with asyncio.timeout(timeout):
                    return await handler(request, InprocContext(metadata, self._peer))
            except TimeoutError:
                raise InprocRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the client reads it as the call's status
                raise _as_rpc_error(exc) from exc
        return unary
