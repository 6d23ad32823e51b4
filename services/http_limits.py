"""Bounded HTTP serving for the mesh's servers: netem/http_limits.py's, every refusal in OpenAI's error shape.

docs/reliability.md, "Bounded connections": every HTTP server of the mesh starts through `start_http`.
Past the connection cap a client gets a JSON 503; a request aiohttp cannot even parse (a malformed
request line or header, a header past its size limit, a broken chunked body) gets a JSON 400 too,
where aiohttp itself would answer a plain-text page before any route or middleware runs.
"""

from __future__ import annotations

import logging

from aiohttp import web

from netem.http_limits import REFUSED_MESSAGE, BoundedSite, HttpLimits

__all__ = ["OPENAI_REFUSAL", "HttpLimits", "openai_error", "start_http"]

log = logging.getLogger(__name__)
OPENAI_REFUSAL = {"error": {"message": REFUSED_MESSAGE, "type": "server_error", "param": None, "code": None}}


def openai_error(status: int, message: str) -> dict:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _JsonErrorHandler(web.RequestHandler):
    """aiohttp's protocol handler, with the errors it answers itself (parse failures, defects) as JSON."""

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500 or request.writer.output_size > 0:  # a defect, or a response already begun:
            return super().handle_error(request, status, exc, message)  # aiohttp logs it and decides
        # The client's malformed request: one line, no traceback (it is not this server's fault).
        log.info("refused a malformed request from %s: %d %s", request.remote, status, exc or message)
        response = web.json_response(openai_error(status, message or "malformed HTTP request"), status=status)
        response.force_close()  # as aiohttp does: the connection's framing may be lost
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> web.RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class _JsonErrorRunner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer  # the app's server as aiohttp builds it; only its handlers differ
        return server


async def start_http(app: web.Application, host: str, port: int, limits: HttpLimits = HttpLimits(),
                     refusal: dict = OPENAI_REFUSAL, **runner_options) -> tuple[web.AppRunner, BoundedSite]:
    """Serve `app` on host:port under `limits`, refusing past the cap with `refusal`; the caller cleans the runner up.

    netem/http_limits.py's `start_http`, with a runner whose parse errors are JSON.
    """
    runner = _JsonErrorRunner(app, keepalive_timeout=limits.keepalive_s, **runner_options)
    await runner.setup()
    site = BoundedSite(runner, host, port, limits.max_connections, refusal)
    await site.start()
    return runner, site
