"""The router's side of the token feed: one Tokens stream per decode service, and the streams that read it.

Each decode service sends one message per engine step carrying the tokens of
every request of this router that the step advanced (services/main_decode/
feed.py, docs/mesh.md §Token feed). `TokenFeed` hands them to the waiting
requests; `DecodeStream` is one Generate call seen as a single ordered series
of `Token`s and then its `GenerateStats`, whichever way its tokens travelled.
A stats message names the stream's end position, and the tokens of the feed may
arrive after it, so it is held back until every position below that has come.
A failed call reaches the reader as its RoleError (services/rpc/errors.py); a broken
feed as a RoleError of its own, with no status (services/router/failures.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

import grpc

from services.engine.sequence import EventChannel
from services.roles import Token
from services.rpc import metadata, pb, pb_grpc
from services.rpc.errors import role_error
from services.types import ErrorKind, RoleError

log = logging.getLogger(__name__)
SUBSCRIBER = "router"
REOPEN_S = 0.5  # a feed that broke (its service restarting) is tried again this often
_CALL_DONE = object()
_new_tuple = tuple.__new__  # Token(position, token_id) runs NamedTuple's Python __new__; this builds it in C


class TokenFeed:
    """The long-lived Tokens stream of one decode service, reopened whenever it breaks."""

    def __init__(self, stub: pb_grpc.DecodeStub, service: str) -> None:
        self.stub, self.service = stub, service
        self.open = False  # requests use the feed only once the service has said it is open
        self.routes: dict[str, EventChannel] = {}
        self.messages = self.tokens = 0  # how well steps batch: tokens / messages
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Open the feed; called with the first request to the service, once its channel has connected.

        Opening it at the router's start would race the service's own start-up, and a refused
        connection puts the whole channel into reconnect backoff, failing the first requests.
        """
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"token-feed-{self.service}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def subscribe(self, request_id: str) -> EventChannel | None:
        if not self.open:
            return None
        inbox = self.routes[request_id] = EventChannel()
        return inbox

    def unsubscribe(self, request_id: str) -> None:
        self.routes.pop(request_id, None)

    async def _run(self) -> None:
        while True:
            call = self.stub.Tokens(pb.TokensRequest(subscriber=SUBSCRIBER), wait_for_ready=True)
            try:
                async for message in call:
                    self.open = True
                    self.messages += 1
                    self.tokens += len(message.position)
                    routes = self.routes
                    for rid, pair in zip(message.request_id, zip(message.position, message.token)):
                        inbox = routes.get(rid)
                        if inbox is not None:  # absent: the request already ended here
                            inbox.put(_new_tuple(Token, pair))
                reason = "ended"
            except grpc.aio.AioRpcError as exc:
                reason = exc.details() or exc.code().name
            finally:
                self.open = False
            self._fail_all(reason)
            await asyncio.sleep(REOPEN_S)

    def _fail_all(self, reason: str) -> None:
        routes, self.routes = self.routes, {}
        for inbox in routes.values():
            inbox.put(RoleError(ErrorKind.FAILED, f"token feed from {self.service} broke ({reason})"))


class DecodeStream:
    """One Generate call: `cancel()` it, iterate it for `Token`s and then one `GenerateStats`."""

    def __init__(self, stub: pb_grpc.DecodeStub, request: pb.GenerateRequest, feed: TokenFeed | None) -> None:
        self._rid = request.request_id
        self._feed = feed
        self._inbox = feed.subscribe(self._rid) if feed is not None else None
        self.call = stub.Generate(request, metadata=metadata(self._rid, SUBSCRIBER if self._inbox else ""))

    def cancel(self) -> bool:
        return self.call.cancel()

    def __aiter__(self) -> AsyncIterator[Token | pb.GenerateStats]:
        return self._events() if self._inbox is not None else self._call_events()

    async def _call_events(self) -> AsyncIterator[Token | pb.GenerateStats]:
        try:
            async for event in self.call:
                if event.HasField("token"):
                    yield Token(event.token.position, event.token.token)
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
            inbox.put(exc)

    async def _events(self) -> AsyncIterator[Token | pb.GenerateStats]:
        inbox, reached, held, call_done = self._inbox, 0, None, False
        reader = asyncio.ensure_future(self._read_call())
        try:
            while not call_done or held is not None:
                item = await inbox.get()
                if type(item) is Token:
                    reached = item.position + 1
                    yield item
                elif item is _CALL_DONE:
                    call_done = True
                    continue
                elif isinstance(item, BaseException):
                    raise item
                else:
                    held = item
                if held is not None and reached >= held.end_position:
                    stats, held = held, None
                    yield stats
        finally:
            reader.cancel()
            self._feed.unsubscribe(self._rid)
