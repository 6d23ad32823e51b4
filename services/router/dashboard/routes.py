"""The page's routes on the router: GET /dashboard, its assets, and GET /dashboard/data?since=SEQ.

The page and its assets are package files (static/), read once and served from memory, so the page
works with no network beyond the router itself. uPlot (MIT, static/uPlot.LICENSE) draws the charts.
The data answer is the sampler's bounded history (sampler.py); the links' control token
(services/credentials.py `link_token`: `pdd-emu up` names its file in the router's environment)
stays in the router and never reaches the browser.
"""

from __future__ import annotations

import time
from importlib.resources import files

import aiohttp
import msgspec
from aiohttp import web

from services.credentials import link_token
from services.router.dashboard.sampler import EVENTS, HISTORY, WINDOW_S, Sampler
from services.router.failures import ApiError

ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css", "uPlot.iife.min.js": "text/javascript",
          "uPlot.min.css": "text/css"}
SAMPLER = web.AppKey("dashboard_sampler", Sampler)
META = web.AppKey("dashboard_meta", bytes)
_static = files("services.router.dashboard") / "static"
_bodies = {name: (_static / name).read_bytes() for name in (*ASSETS, "index.html")}


def meta(router, sampler: Sampler) -> bytes:
    """What the page needs to know once: the scenario, its SLA, the links it will plot, when the router began."""
    scenario = router.scenario
    links = [{"name": link.name, "kind": link.kind, "src": link.src, "dst": link.dst}
             for link in router.plan.links if link.purpose == "kv"]
    return msgspec.json.encode({
        "scenario": scenario.name, "mode": scenario.mode.value, "model": scenario.model,
        "sla": {"ttft_s": scenario.sla.ttft_s, "tpot_s": scenario.sla.tpot_s}, "links": links,
        "keepers": router.plan.status_dir is not None, "tick_s": sampler.tick_s, "window_s": WINDOW_S,
        "history": HISTORY, "events": EVENTS, "booted": time.time()})


async def page(request: web.Request) -> web.Response:
    return web.Response(body=_bodies["index.html"], content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-cache"})


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise ApiError(404, f"no dashboard asset {name!r}", code="not_found")
    return web.Response(body=_bodies[name], content_type=ASSETS[name], charset="utf-8",
                        headers={"Cache-Control": "max-age=3600"})


async def data(request: web.Request) -> web.Response:
    text = request.query.get("since", "0")
    if not (text.isascii() and text.isdigit()) or len(text) > 12:  # str.isdigit alone takes "²"
        raise ApiError(400, f"since={text!r}: give the last sample number seen (0 or more)", param="since")
    sampler = request.app[SAMPLER]
    sampler.watched()
    return web.Response(body=sampler.data(int(text), request.app[META]), content_type="application/json",
                        headers={"Cache-Control": "no-store"})


def add_dashboard(app: web.Application, router) -> None:
    """Serve the live page of `router` (a services.router.server.Router) on `app`."""
    sampler = app[SAMPLER] = Sampler(router, link_token())
    app[META] = meta(router, sampler)
    app.router.add_get("/dashboard", page)
    app.router.add_get("/dashboard/data", data)
    app.router.add_get("/dashboard/static/{name}", asset)

    async def links_session(_app: web.Application):
        # One session for every link read, made when the router starts and closed after the sampler stops.
        async with aiohttp.ClientSession() as http:
            sampler.open(http)
            yield
            await sampler.close()

    app.cleanup_ctx.append(links_session)
