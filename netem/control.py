"""The control API of one link (aiohttp): read and change everything while bytes flow.

    GET  /health                 liveness and addresses
    GET  /config                 {"up": {...}, "down": {...}} in seconds, bit/s, bytes
    PATCH /config                {"up"|"down"|"both": {field: value}}  -> 400 on a bad field
    GET  /stats                  per-direction counters
    GET  /metrics                Prometheus text (the link's own registry)
    POST /schedule               schedule YAML/JSON text, or {"name": "<shipped schedule>"}
    GET  /schedule, DELETE /schedule
    POST /partition              {"mode": "blackhole"|"reject", "direction": ..., "duration": "5s"}
    DELETE /partition            heal (?direction=up|down|both)
    POST /reset                  reset every open connection

Bound to loopback it may run without a token; anywhere else it refuses to
start without one. With a token every call but GET /health (liveness, which a
keeper probes without credentials; it changes nothing) needs
`Authorization: Bearer <token>`.
Every answer, errors included (unknown route, oversized body, a defect), is JSON;
the API never reads a file named by a caller.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from typing import Any, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from pydantic import ValidationError

from netem.config import ConfigError
from netem.http_limits import REFUSED_MESSAGE, HttpLimits, start_http
from netem.link import UserspaceLink
from netem.metrics import link_registry, render
from netem.schedule import PartitionStep, parse_posted

log = logging.getLogger(__name__)
LIMITS = HttpLimits(keepalive_s=15.0, max_connections=32)  # an operator's calls, and a chaos run's
MAX_BODY_BYTES = 1 << 20  # a schedule of thousands of steps; aiohttp refuses more with 413 before reading it

LINK = web.AppKey("link", UserspaceLink)
METRICS = web.AppKey("metrics", CollectorRegistry)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name could resolve anywhere


def _error(status: type[web.HTTPException], message: str, **headers: str) -> web.HTTPException:
    return status(text=json.dumps({"error": message}), content_type="application/json", headers=headers or None)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own errors (404, 405, 413) and any defect answer JSON like the API's own 400s."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.content_type == "application/json" or exc.status < 400:
            raise
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return web.json_response({"error": exc.text or exc.reason}, status=exc.status, headers=allow)
    except Exception:
        log.exception("control API defect on %s %s", request.method, request.path)
        return web.json_response({"error": "internal error in the link's control API"}, status=500)


def _auth_middleware(token: str) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == "/health":
            return await handler(request)
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise _error(web.HTTPUnauthorized, "missing or wrong bearer token", **{"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return check


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _error(web.HTTPBadRequest, "the body is not valid JSON") from None
    except RecursionError:
        raise _error(web.HTTPBadRequest, "the body's JSON is nested too deeply") from None


def _address(addr: tuple[str, int] | None) -> str | None:
    return None if addr is None else f"{addr[0]}:{addr[1]}"


async def health(request: web.Request) -> web.Response:
    link = request.app[LINK]
    return web.json_response({"status": "ok", "listen": _address(link.listen_address), "upstream": _address(link.upstream)})


async def get_config(request: web.Request) -> web.Response:
    return web.json_response(request.app[LINK].config.model_dump(by_alias=True))


async def patch_config(request: web.Request) -> web.Response:
    body = await _json_body(request)
    try:
        config = request.app[LINK].reconfigure(body)
    except ConfigError as err:
        raise _error(web.HTTPBadRequest, str(err)) from None
    return web.json_response(config.model_dump(by_alias=True))


async def get_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[LINK].stats())


async def metrics(request: web.Request) -> web.Response:
    body = render(request.app[METRICS])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def post_schedule(request: web.Request) -> web.Response:
    try:
        schedule = parse_posted(await request.text())
    except (ConfigError, UnicodeDecodeError) as err:
        raise _error(web.HTTPBadRequest, str(err)) from None
    runner = await request.app[LINK].run_schedule(schedule)
    return web.json_response(runner.status())


async def get_schedule(request: web.Request) -> web.Response:
    runner = request.app[LINK].schedule
    return web.json_response(runner.status() if runner else {"running": False})


async def delete_schedule(request: web.Request) -> web.Response:
    return web.json_response({"stopped": await request.app[LINK].stop_schedule()})


async def post_partition(request: web.Request) -> web.Response:
    body = await _json_body(request)
    try:
        step = PartitionStep.model_validate(body)
        request.app[LINK].partition(step.mode, step.direction, step.duration)
    except (ValidationError, ConfigError) as err:
        raise _error(web.HTTPBadRequest, str(err)) from None
    return web.json_response(request.app[LINK].stats())


async def delete_partition(request: web.Request) -> web.Response:
    try:
        request.app[LINK].heal(request.query.get("direction", "both"))  # type: ignore[arg-type]
    except ConfigError as err:
        raise _error(web.HTTPBadRequest, str(err)) from None
    return web.json_response(request.app[LINK].stats())


async def post_reset(request: web.Request) -> web.Response:
    return web.json_response({"reset": request.app[LINK].reset_connections()})


def build_app(link: UserspaceLink, token: str | None = None, name: str = "link") -> web.Application:
    app = web.Application(middlewares=[_json_errors, *([_auth_middleware(token)] if token else [])],
                          client_max_size=MAX_BODY_BYTES)
    app[LINK] = link
    app[METRICS] = link_registry(link, name)
    app.router.add_get("/health", health)
    app.router.add_get("/config", get_config)
    app.router.add_patch("/config", patch_config)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/schedule", post_schedule)
    app.router.add_get("/schedule", get_schedule)
    app.router.add_delete("/schedule", delete_schedule)
    app.router.add_post("/partition", post_partition)
    app.router.add_delete("/partition", delete_partition)
    app.router.add_post("/reset", post_reset)
    return app


class ControlServer:
    """Serve build_app(link) on host:port; port 0 picks a free one (see .address)."""

    def __init__(self, link: UserspaceLink, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 name: str = "link") -> None:
        """`name` labels the link's metrics (`link="wan"`), so two links' series stay apart."""
        if not token and not is_loopback(host):
            raise ConfigError(f"the control API on {host} (not loopback) needs a bearer token (--control-token)")
        self._app = build_app(link, token, name)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.address: tuple[str, int] | None = None

    async def start(self) -> tuple[str, int]:
        # Idle and header-less connections are closed after the keep-alive; a 33rd gets a 503.
        self._runner, _ = await start_http(self._app, self._host, self._port, LIMITS,
                                           refusal={"error": REFUSED_MESSAGE}, access_log=None)
        bound = self._runner.addresses[0]
        self.address = (bound[0], bound[1])
        return self.address

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
