"""Bounded HTTP serving: what one client may hold of any HTTP server of a link or of the mesh.

Every HTTP server starts through `start_http` (docs/reliability.md, "Bounded connections"): an idle
or header-less connection is closed after `keepalive_s` (aiohttp closes a connection still waiting
for a request's headers at its keep-alive timeout, so this is also the header deadline), and past
`max_connections` a new one gets a JSON 503 and is closed at once. Only aiohttp and the standard
library: it lives in netem, the bottom of the stack, and services/http_limits.py serves the mesh
with it in OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class HttpLimits:
    keepalive_s: float = 15.0  # idle keep-alive, and the time a request's headers may take
    max_connections: int = 256


REFUSED_MESSAGE = "too many open connections; retry later"
PLAIN_REFUSAL = {"error": REFUSED_MESSAGE}  # a link's control API; the mesh answers in OpenAI's shape


def _refusal(error: dict) -> bytes:
    body = json.dumps(error).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


class _Refused(asyncio.Protocol):
    """A connection past the cap: one 503, then closed; it costs nothing while it lasts."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.answer)  # type: ignore[attr-defined]
        transport.close()


class BoundedSite(web.TCPSite):
    """A TCPSite that admits at most `max_connections` connections at once."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int,
                 refusal: dict = PLAIN_REFUSAL) -> None:
        super().__init__(runner, host, port)
        self.max_connections = max_connections
        self.answer = _refusal(refusal)
        self.refused = 0

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None

        def admit() -> asyncio.Protocol:
            if len(server.connections) >= self.max_connections:
                self.refused += 1
                return _Refused(self.answer)
            return server()

        self._server = await asyncio.get_running_loop().create_server(
            admit, self._host, self._port, backlog=self._backlog, reuse_address=self._reuse_address)
        self._bound_port = self._server.sockets[0].getsockname()[1]


async def start_http(app: web.Application, host: str, port: int, limits: HttpLimits = HttpLimits(),
                     refusal: dict = PLAIN_REFUSAL, **runner_options) -> tuple[web.AppRunner, BoundedSite]:
    """Serve `app` on host:port under `limits`; `refusal` is the JSON body of the 503 past the cap.
    The caller cleans the runner up."""
    runner = web.AppRunner(app, keepalive_timeout=limits.keepalive_s, **runner_options)
    await runner.setup()
    site = BoundedSite(runner, host, port, limits.max_connections, refusal)
    await site.start()
    return runner, site
