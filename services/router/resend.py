"""The Generate made once more with the prompt's ids when its service no longer holds the prompt it named.

Part of the Peers adapter (services/router/peers.py): it wraps a decode service's stub, below the
stream that turns a call's status into a RoleError (services/router/feed.py), so the refusal and
the second call never reach a pipeline. The prompt's fields are services/router/prompts.py's.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import grpc

from services.router.prompts import Resends, not_held, resent_whole
from services.rpc.errors import role_error


class ResendingDecodeStub:
    """A decode stub whose Generate (or GenerateFed), if it named a held prompt the service no longer has, is made once
    more with the ids: the refusal is the stream's first event, so the caller sees only the second call.

    Only the call's own events pass through here; tokens sent through the token feed do not.
    """

    def __init__(self, stub, job, service: str, resends: Resends) -> None:
        self._stub, self._job, self._service, self._resends = stub, job, service, resends

    def Generate(self, request, metadata=None):  # noqa: N802 (the gRPC method's name)
        return _ResendingCall(self, request, metadata)

    def GenerateFed(self, request, metadata=None):  # noqa: N802
        return _ResendingReply(self, request, metadata)

    def _again(self, method: str, request, metadata):
        """The call once more, with the prompt's ids."""
        self._resends.count(self._service)
        return getattr(self._stub, method)(resent_whole(request, self._job), metadata=metadata)


class _Resending:
    """One call of `method`, made once more with the ids if it was refused for its reference."""

    def __init__(self, stub: ResendingDecodeStub, method: str, request, metadata) -> None:
        self._owner, self._method, self._request, self._metadata = stub, method, request, metadata
        self._call = getattr(stub._stub, method)(request, metadata=metadata)
        self._cancelled = False

    def cancel(self) -> bool:
        self._cancelled = True
        return self._call.cancel()

    def _resend_after(self, exc: grpc.aio.AioRpcError) -> None:
        """Make the call again if `exc` refused the reference and nobody cancelled it; else raise."""
        if self._cancelled or not not_held(role_error(exc)):
            raise exc
        self._call = self._owner._again(self._method, self._request, self._metadata)


class _ResendingReply(_Resending):
    """GenerateFed's call: awaited for its one reply; a "prompt not held" refusal is the call's status."""

    def __init__(self, stub: ResendingDecodeStub, request, metadata) -> None:
        super().__init__(stub, "GenerateFed", request, metadata)

    def __await__(self):
        return self._reply().__await__()

    async def _reply(self) -> Any:
        try:
            return await self._call
        except grpc.aio.AioRpcError as exc:
            self._resend_after(exc)
        return await self._call


class _ResendingCall(_Resending):
    def __init__(self, stub: ResendingDecodeStub, request, metadata) -> None:
        super().__init__(stub, "Generate", request, metadata)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        events = self._call.__aiter__()
        try:
            first = await events.__anext__()
        except StopAsyncIteration:
            return
        except grpc.aio.AioRpcError as exc:
            self._resend_after(exc)
            events = self._call.__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
        yield first
        async for event in events:
            yield event
