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
    """A decode stub whose Generate, if it named a held prompt the service no longer has, is made once
    more with the ids: the refusal is the stream's first event, so the caller sees only the second call.

    Only the call's own events pass through here; tokens sent through the token feed do not.
    """

    def __init__(self, stub, job, service: str, resends: Resends) -> None:
        self._stub, self._job, self._service, self._resends = stub, job, service, resends

    def Generate(self, request, metadata=None):  # noqa: N802 (the gRPC method's name)
        return _ResendingCall(self, request, metadata)


class _ResendingCall:
    def __init__(self, stub: ResendingDecodeStub, request, metadata) -> None:
        self._owner, self._request, self._metadata = stub, request, metadata
        self._call = stub._stub.Generate(request, metadata=metadata)
        self._cancelled = False

    def cancel(self) -> bool:
        self._cancelled = True
        return self._call.cancel()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        events = self._call.__aiter__()
        try:
            first = await events.__anext__()
        except StopAsyncIteration:
            return
        except grpc.aio.AioRpcError as exc:
            if self._cancelled or not not_held(role_error(exc)):
                raise
            owner = self._owner
            owner._resends.count(owner._service)
            self._call = owner._stub.Generate(resent_whole(self._request, owner._job), metadata=self._metadata)
            events = self._call.__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
        yield first
        async for event in events:
            yield event
