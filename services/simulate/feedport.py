"""A decode service's token feed handed to the router in process, as the mesh's feed port hands it over.

In the mesh the router reads each decode service's feed on the service's feed port
(services/main_decode/feed_server.py): the service's `Feed` gives each step's batch to a
callback that writes it as one msgpack frame, and the router's `FeedReader` parses it in
the callback that reads it, so no task wakes for a message at either end. A simulation has
no port. It read the feed as the `Tokens` stream of an in-process call instead, which cost
every step a protobuf message, a wake-up of the stream's task and one of the reader's.

Here the `Feed`'s callback hands the batch on itself: at once within a datacenter, or across
the datacenters' control link at its msgpack frame's size, after the batches before it, as
the feed port's TCP stream carries it (docs/simulate.md, "Speed"). The
router's `TokenFeed.deliver` takes it on arrival. The subscriber's hello crosses the link
before the feed opens, and the feed's first message is the empty step that says it is open.

The feed ends, and `wait()` returns why, as a feed port's connection ends for the router:
- the control link's connection is reset (a kill's reset, a fault): "connection reset";
- the service's process is killed (services/simulate/outage.py cancels the feed's own task,
  which runs on the service's behalf): "the server's connection was reset". Batches still
  crossing then are dropped, as a killed process's unsent data is;
- the router hangs up (`wait()` cancelled): the feed is closed at the service.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from netem.virtual import VirtualConnection
from services.main_decode.feed import Batch, FeedTable
from services.rpc import feed_wire

Deliver = Callable[[list, list, list], None]  # TokenFeed.deliver: request ids, positions, tokens


class PushedFeed:
    """One subscriber's feed from one decode service; built on the service's behalf, awaited by the router."""

    def __init__(self, feeds: FeedTable, subscriber: str, deliver: Deliver,
                 wire: VirtualConnection | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._feeds, self._deliver, self._wire = feeds, deliver, wire
        self._feed = None
        self._last: asyncio.Future[None] | None = None  # the latest batch still crossing the wire
        self._ended: asyncio.Future[str] = loop.create_future()
        self._hung_up: asyncio.Future[None] = loop.create_future()
        # The service's side of the connection: created here, so a kill of the service cancels it.
        self._serving = loop.create_task(self._serve(subscriber))

    async def wait(self) -> str:
        """Why the feed ended; cancelled, the router hangs up and the feed closes at the service."""
        try:
            return await asyncio.shield(self._ended)
        finally:
            self._end("the subscriber hung up")
            if not self._hung_up.done():
                self._hung_up.set_result(None)

    async def _serve(self, subscriber: str) -> None:
        try:
            if self._wire is not None:
                await self._wire.send("up", len(feed_wire.hello(subscriber)))
                if self._ended.done():
                    return  # the router hung up while its hello crossed: nothing to open
            self._feed = self._feeds.open(subscriber, self._send)
            self._send(([], [], []))
            await self._hung_up
        except ConnectionResetError as exc:
            self._end(f"connection reset on the control link: {exc}")
        except asyncio.CancelledError:
            self._end("the server's connection was reset")  # the service's process was killed
            raise

    def _send(self, batch: Batch) -> None:
        if self._ended.done():
            return
        if self._wire is None:
            self._deliver(*batch)
            return
        self._last = asyncio.ensure_future(self._cross(batch, self._last))

    async def _cross(self, batch: Batch, before: asyncio.Future[None] | None) -> None:
        try:
            await self._wire.send("down", len(feed_wire.step(*batch)))  # type: ignore[union-attr]
        except ConnectionResetError as exc:
            self._end(f"connection reset on the control link: {exc}")
            return
        if before is not None:
            await before
        if not self._ended.done():
            self._deliver(*batch)

    def _end(self, reason: str) -> None:
        """The first end wins; a batch still crossing is then dropped on arrival (`_cross`)."""
        if not self._ended.done():
            self._ended.set_result(reason)
        if self._feed is not None:
            self._feeds.close(self._feed)
