"""Small upstream servers for link tests: a recorder and an echo, both with bounded waits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

WAIT_S = 10.0  # no test waits longer than this for anything


@dataclass
class Received:
    data: bytearray = field(default_factory=bytearray)
    eof: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.StreamWriter | None = None

    async def wait_for_bytes(self, n: int, timeout: float = WAIT_S) -> bytes:
        async def until() -> None:
            while len(self.data) < n:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), timeout)
        return bytes(self.data)


class Recorder:
    """Upstream that keeps what each connection sent; replies only when told."""

    def __init__(self) -> None:
        self.connections: list[Received] = []
        self._handlers: list[asyncio.Task[None]] = []
        self.new_connection = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] = ("127.0.0.1", 0)

    async def __aenter__(self) -> Recorder:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.address = self._server.sockets[0].getsockname()[:2]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for conn in self.connections:
            if conn.writer is not None:
                conn.writer.close()  # the handler reads EOF and returns
        if self._handlers:
            await asyncio.wait_for(asyncio.gather(*self._handlers, return_exceptions=True), WAIT_S)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        conn = Received(writer=writer)
        self.connections.append(conn)
        self.new_connection.set()
        try:
            while data := await reader.read(1 << 20):
                conn.data.extend(data)
                conn.changed.set()
        except ConnectionError:
            pass
        conn.eof.set()
        conn.changed.set()

    async def connection(self, index: int = 0, timeout: float = WAIT_S) -> Received:
        async def until() -> None:
            while len(self.connections) <= index:
                self.new_connection.clear()
                await self.new_connection.wait()

        await asyncio.wait_for(until(), timeout)
        return self.connections[index]


class Echo:
    """Upstream that sends back every byte it reads and closes after the client's EOF."""

    def __init__(self) -> None:
        self._server: asyncio.base_events.Server | None = None
        self._handlers: list[asyncio.Task[None]] = []
        self._writers: list[asyncio.StreamWriter] = []
        self.address: tuple[str, int] = ("127.0.0.1", 0)

    async def __aenter__(self) -> Echo:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.address = self._server.sockets[0].getsockname()[:2]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        if self._handlers:
            await asyncio.wait_for(asyncio.gather(*self._handlers, return_exceptions=True), WAIT_S)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        self._writers.append(writer)
        try:
            while data := await reader.read(1 << 20):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


async def read_all(reader: asyncio.StreamReader, timeout: float = WAIT_S) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout)
