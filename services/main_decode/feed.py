"""The decode side of the token feed: each engine step's tokens leave in one message.

A stream message costs tens of microseconds at each end, far more than the rest
of a token's way through the mesh. So a subscriber (the router) opens one feed
per decode service, and every Generate call that names the feed puts its tokens
here instead of sending them as its own events. The tokens of one engine step are
put in one pass of the event loop, before the feed's writer runs again, so they
leave together, at the end of the step that produced them (docs/mesh.md §Token
feed). The feed leaves on a TCP stream of its own (services/main_decode/
feed_server.py) or, where there is no such port (a simulation), as the `Tokens`
gRPC stream (`messages`).
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Callable

from services.engine.sequence import TokenEvent
from services.rpc import pb
from services.types import ErrorKind, RoleError


class FeedClosed(RuntimeError):
    """The subscriber's feed ended (it hung up or opened a new one): its tokens have nowhere to go."""


Batch = tuple[list[str], list[int], list[int]]  # request ids, positions, tokens: one step's


class Feed:
    __slots__ = ("subscriber", "closed", "_ids", "_positions", "_tokens", "_waiter", "_send", "_loop")

    def __init__(self, subscriber: str, send: Callable[[Batch], None] | None = None) -> None:
        """`send`: called with each batch once the loop pass that put it ends; None: read `messages()`."""
        self.subscriber = subscriber
        self.closed = False
        self._ids: list[str] = []
        self._positions: list[int] = []
        self._tokens: list[int] = []
        self._waiter: asyncio.Future[None] | None = None
        self._send = send
        self._loop: asyncio.AbstractEventLoop | None = None

    def put(self, request_id: str, position: int, token: int) -> None:
        if self.closed:
            raise FeedClosed(f"the token feed of {self.subscriber} is closed")
        if not self._ids and self._send is not None:  # the batch's first token: send it after this pass
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush)
        self._ids.append(request_id)
        self._positions.append(position)
        self._tokens.append(token)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> Batch:
        batch = self._ids, self._positions, self._tokens
        self._ids, self._positions, self._tokens = [], [], []
        return batch

    def _flush(self) -> None:
        if self._ids and not self.closed:
            self._send(self.take())

    async def messages(self) -> AsyncIterator[pb.StepTokens]:
        """An empty message (the feed is open), then one message per batch of tokens put."""
        yield pb.StepTokens(t_unix=time.time())
        while not self.closed:
            if not self._ids:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
                continue
            ids, positions, tokens = self.take()
            yield pb.StepTokens(request_id=ids, position=positions, token=tokens, t_unix=time.time())

    def close(self) -> None:
        self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class FeedTable:
    """The open feed of each subscriber; a subscriber that opens a second one closes its first."""

    def __init__(self) -> None:
        self._feeds: dict[str, Feed] = {}

    def open(self, subscriber: str, send: Callable[[Batch], None] | None = None) -> Feed:
        previous = self._feeds.get(subscriber)
        if previous is not None:
            previous.close()
        feed = self._feeds[subscriber] = Feed(subscriber, send)
        return feed

    def close(self, feed: Feed) -> None:
        feed.close()
        if self._feeds.get(feed.subscriber) is feed:
            del self._feeds[feed.subscriber]

    def get(self, subscriber: str) -> Feed | None:
        return self._feeds.get(subscriber) if subscriber else None

    def __len__(self) -> int:
        return len(self._feeds)


class Route:
    """One Generate call's way out: its tokens into the feed (when there is one), its stats as events."""

    __slots__ = ("feed", "request_id", "end")

    def __init__(self, feed: Feed | None, request_id: str) -> None:
        self.feed, self.request_id = feed, request_id
        self.end = 0  # one past the last position sent, by either way

    @property
    def sink(self) -> Callable[[object], bool] | None:
        """What the engine offers each event as the step ends (SequenceHandle.forward); None without a feed."""
        return self._take if self.feed is not None else None

    def _take(self, event: object) -> bool:
        if type(event) is not TokenEvent or self.feed.closed:
            return False  # events() takes it (and fails the call if the feed has closed)
        self.end = event.position + 1
        self.feed.put(self.request_id, event.position, event.token_id)
        return True

    async def events(self, source: AsyncIterator) -> AsyncIterator[pb.GenerateEvent]:
        """The call's stream: engine TokenEvents from `source` sent on (or as events), stats with the end.

        A RoleError (unavailable) when the feed closes under the call.
        """
        async for event in source:
            if type(event) is not TokenEvent:
                event.stats.end_position = self.end
                yield event
                continue
            self.end = event.position + 1
            if self.feed is None:
                yield pb.GenerateEvent(token=pb.TokenEvent(position=event.position, token=event.token_id,
                                                           t_unix=time.time()))
                continue
            try:
                self.feed.put(self.request_id, event.position, event.token_id)
            except FeedClosed as exc:
                raise RoleError(ErrorKind.UNAVAILABLE, str(exc)) from None
