"""Bounded HTTP serving for the mesh's servers: netem/http_limits.py's, with the 503 past the cap in OpenAI's error shape.

docs/reliability.md, "Bounded connections": every HTTP server of the mesh starts through `start_http`.
"""

from __future__ import annotations

from aiohttp import web

from netem import http_limits as bounded
from netem.http_limits import REFUSED_MESSAGE, BoundedSite, HttpLimits

__all__ = ["OPENAI_REFUSAL", "HttpLimits", "start_http"]

OPENAI_REFUSAL = {"error": {"message": REFUSED_MESSAGE, "type": "server_error", "param": None, "code": None}}


async def start_http(app: web.Application, host: str, port: int, limits: HttpLimits = HttpLimits(),
                     refusal: dict = OPENAI_REFUSAL, **runner_options) -> tuple[web.AppRunner, BoundedSite]:
    """Serve `app` on host:port under `limits`, refusing past the cap with `refusal`; the caller cleans the runner up."""
    return await bounded.start_http(app, host, port, limits, refusal, **runner_options)
