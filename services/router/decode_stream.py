"""One Generate call as the router reads it: its tokens, from the feed or the call, then its stats.

`DecodeStream` is one Generate call seen as a single ordered series of `Token`s
and then its `GenerateStats`, whichever way its tokens travelled (services/router/
feed.py). A stats message names the stream's end position, and the tokens of the
feed may arrive after it, so it is held back until every position below that has
come. A failed call reaches the reader as its RoleError (services/rpc/errors.py).
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

import grpc

from services.roles import Token, TokenRun
from services.router.feed import SUBSCRIBER, LazyInbox, TokenFeed
from services.rpc import metadata, pb, pb_grpc
from services.rpc.errors import role_error

_CALL_DONE = object()


class DecodeStream:
    """One Generate call: `cancel()` it, iterate it for `Token`s and then one `GenerateStats`."""

    def __init__(self, stub: pb_grpc.DecodeStub, request: pb.GenerateRequest, feed: TokenFeed | None,
                 lazy: bool = False, fed_unary: bool = False) -> None:
        """`fed_unary`: a call whose tokens go through the feed is GenerateFed, whose one reply is the stats
        (a mesh's, where a unary call costs both ends less than a one-message stream); else the Generate stream."""
        self._rid = request.request_id
        self._feed = feed
        self._inbox = feed.subscribe(self._rid, lazy) if feed is not None else None
        self._lazy = isinstance(self._inbox, LazyInbox)
        self._unary = fed_unary and self._inbox is not None
        method = stub.GenerateFed if self._unary else stub.Generate
        self.call = method(request, metadata=metadata(self._rid, SUBSCRIBER if self._inbox else ""))

    def cancel(self) -> bool:
        return self.call.cancel()

    def __aiter__(self) -> AsyncIterator[Token | pb.GenerateStats]:
        return self._events() if self._inbox is not None else self._call_events()

    async def _call_events(self) -> AsyncIterator[Token | pb.GenerateStats]:
        clock = asyncio.get_running_loop().time
        try:
            if self._unary:
                yield (await self.call).stats
                return
            async for event in self.call:
                if event.HasField("token"):
                    yield Token(event.token.position, event.token.token, clock())
                else:
                    yield event.stats
        except grpc.aio.AioRpcError as exc:
            raise role_error(exc) from exc

    async def _read_call(self) -> None:
        inbox = self._inbox
        try:
            async for event in self._call_events():
                inbox.put(event)
            inbox.put(_CALL_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, in order, and raised there
            if isinstance(exc, asyncio.CancelledError) and asyncio.current_task().cancelling():
                raise  # the reader cancelled this task as it left (`_events`): nobody reads the inbox
            inbox.put(exc)

    async def _events(self) -> AsyncIterator[Token | pb.GenerateStats]:
        inbox, reached, held, call_done = self._inbox, 0, None, False
        reader = asyncio.ensure_future(self._read_call())
        try:
            while not call_done or held is not None:
                try:
                    item = await inbox.get()
                except asyncio.CancelledError:
                    arrived = inbox.arrived_tokens() if self._lazy else None
                    if arrived:  # read token by token, the ones that had arrived were the reader's already
                        yield TokenRun(arrived)
                    raise
                if type(item) is Token:
                    queued = inbox.arrived_tokens() if self._lazy else None
                    if queued:  # what queued behind it goes on with it, as one run
                        item = TokenRun((item, *queued))
                        reached = queued[-1].position + 1
                    else:
                        reached = item.position + 1
                    yield item
                elif item is _CALL_DONE:
                    call_done = True
                    continue
                elif isinstance(item, BaseException):
                    raise item
                else:
                    held = item
                    if self._lazy:  # the stats overtook tokens of the feed: each one wakes the reader now
                        inbox.wake_for_each_token()
                if held is not None and reached >= held.end_position:
                    stats, held = held, None
                    yield stats
        finally:
            reader.cancel()
            inbox.clear()  # what nobody will read: an error there holds, by its traceback, the inbox itself
            self._feed.unsubscribe(self._rid)
