"""Run every link a plan places on one runner (a container), in one asyncio process.

    pdd-emu serve --plan plan.json --service wan-link

Each link is a netem UserspaceLink listening on its own port with its control API
(netem/control.py) on its own control port, exactly as the plan lists them; one
more port answers GET /health and GET /stats for all of them at once (read-only,
for health checks and tests). A runner the plan leaves empty serves only /health,
so a fixed compose topology can run scenarios that do not use every container.
`kernel_takeover` moves a runner's WAN shaping into kernel qdiscs where the kernel
can (the compose `netem` profile; docs/compose.md, "Kernel netem").
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
from dataclasses import dataclass
from typing import Callable

from aiohttp import web

from netem.client import ControlError, call_once
from netem.control import ControlServer
from netem.link import UserspaceLink
from netem.schedule import load_schedule
from services.credentials import link_token
from services.scenario.link_config import real_link_config
from services.scenario.plan import LinkPlan, MeshPlan
from services.http_limits import HttpLimits, start_http

log = logging.getLogger(__name__)


@dataclass
class RunningLink:
    plan: LinkPlan
    link: UserspaceLink
    control: ControlServer


class LinkHost:
    """The links of one runner: started together, reported together, stopped in reverse."""

    def __init__(self, plan: MeshPlan, runner: str, bind_host: str = "0.0.0.0", token: str | None = None) -> None:
        self.plan, self.runner, self.bind_host, self.token = plan, runner, bind_host, token
        self.links: list[RunningLink] = []

    async def start(self) -> None:
        scenario = self.plan.scenario
        try:
            for planned in (link for link in self.plan.links if link.runner == self.runner):
                await self._start_one(planned, scenario.byte_scale, scenario.seed)
        except BaseException:
            await self.stop()
            raise

    async def _start_one(self, planned: LinkPlan, byte_scale: float, seed: int) -> None:
        config = real_link_config(planned, byte_scale)
        upstream = (planned.upstream_host or planned.host, planned.upstream_port)
        # A seed per link name: the same plan draws the same jitter whatever else the runner hosts.
        link = UserspaceLink((self.bind_host, planned.listen_port), upstream, config,
                             seed=random.Random(f"{seed}/{planned.name}"))
        await link.start()
        control = ControlServer(link, self.bind_host, planned.control_port, token=self.token,
                                name=planned.name)
        try:
            await control.start()
        except BaseException:
            await link.stop()
            raise
        self.links.append(RunningLink(planned, link, control))
        if planned.spec.schedule and planned.purpose == "kv":
            await link.run_schedule(load_schedule(planned.spec.schedule))
        up = config.up
        log.info("%s: link %s (%s, %s) on :%d -> %s, control :%d, %s, delay %.3g ms",
                 self.runner, planned.name, planned.purpose, planned.kind, planned.listen_port, planned.upstream,
                 planned.control_port, f"{up.rate_bps / 1e6:.6g} Mbit/s real" if up.rate_bps else "rate unlimited",
                 up.delay_s * 1e3)

    async def stop(self) -> None:
        while self.links:
            running = self.links.pop()
            await running.control.stop()
            await running.link.stop()

    def health(self) -> dict:
        return {"status": "ok", "runner": self.runner, "scenario": self.plan.scenario.name,
                "links": {r.plan.name: {"purpose": r.plan.purpose, "kind": r.plan.kind, "listen": r.plan.listen_port,
                                        "control": r.plan.control_port, "upstream": r.plan.upstream}
                          for r in self.links}}

    def stats(self) -> dict:
        return {r.plan.name: {"purpose": r.plan.purpose, "kind": r.plan.kind, "src": r.plan.src, "dst": r.plan.dst,
                              **r.link.stats()} for r in self.links}


def status_app(host: LinkHost) -> web.Application:
    app = web.Application()

    async def health(_: web.Request) -> web.Response:
        return web.json_response(host.health())

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(host.stats())

    app.router.add_get("/health", health)
    app.router.add_get("/stats", stats)
    return app


async def serve_links(plan: MeshPlan, runner: str, health_port: int, bind_host: str = "0.0.0.0",
                      token: str | None = None) -> None:
    """Run the runner's links and the status port until SIGTERM or SIGINT."""
    host = LinkHost(plan, runner, bind_host, token if token is not None else link_token())
    await host.start()
    web_runner = None
    try:
        web_runner, _ = await start_http(status_app(host), bind_host, health_port, HttpLimits(max_connections=64),
                                         access_log=None)
        if host.links:
            log.info("%s: %d link(s) of %s up; /health and /stats on :%d", runner, len(host.links),
                     plan.scenario.name, health_port)
        else:
            log.info("%s: plan %s (%s) runs nothing here; serving /health only on :%d", runner,
                     plan.scenario.name, plan.scenario.mode.value, health_port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        if web_runner is not None:
            await web_runner.cleanup()
        await host.stop()


UNSHAPED = {"both": {"delay": 0, "jitter": 0, "loss": 0, "rate": None}}


def kernel_takeover(plan: MeshPlan, runner: str, report: Callable[[str], None]) -> int:
    """Shape the runner's WAN with kernel qdiscs and switch its links' userspace shaping off, until SIGTERM.

    Runs in the runner's network namespace (compose: `network_mode: service:wan-link`,
    NET_ADMIN). Every byte crossing the runner leaves through one of its interfaces,
    so the WAN's delay, jitter, loss and (byte-scaled) rate go on each interface's
    egress; control traffic shares that rate. Where the kernel cannot (no sch_netem,
    a jitter distribution netem cannot load), one line says why and the links keep
    shaping in userspace. On SIGTERM the links get their settings back.
    """
    from netem.kernel import Interface, KernelLink, KernelUnsupported
    from netem.kernel.backend import check_available

    # Caught from here, before any line is reported: a stop sent as soon as a line appears is then
    # taken by _wait_for_stop (and the links get their settings back), never fatal halfway.
    stop = _catch_stop()
    wan = [link for link in plan.links if link.runner == runner and link.kind == "wan"]
    if not wan:
        report(f"pdd-emu compose netem: {runner} runs no WAN link in this plan; nothing to shape")
        return _wait_for_stop(stop)
    kv = next((link for link in wan if link.purpose == "kv"), wan[0])
    config = real_link_config(kv, plan.scenario.byte_scale)
    shapers: list[KernelLink] = []
    try:
        check_available(config)
        for ifname in _interfaces():
            shapers.append(KernelLink(Interface(ifname), None, config))
            shapers[-1].apply()
    except KernelUnsupported as err:
        for shaper in shapers:
            shaper.clear()
        report(f"pdd-emu compose netem: kernel netem unavailable: {err.reason}; {runner} keeps shaping its "
               f"{len(wan)} WAN link(s) in userspace")
        return _wait_for_stop(stop)
    bases = [f"http://127.0.0.1:{link.control_port}" for link in wan]
    token = link_token()
    saved = [_call_or_none(base, "GET", None, token) for base in bases]
    for base in bases:
        _call_or_none(base, "PATCH", UNSHAPED, token)
    names = ", ".join(shaper.interfaces["up"].ifname for shaper in shapers)  # type: ignore[union-attr]
    report(f"pdd-emu compose netem: kernel netem shapes {runner}'s WAN on {names} (delay {config.up.delay_s * 1e3:g} "
           f"ms, {(config.up.rate_bps or 0) / 1e6:g} Mbit/s real); userspace shaping of {len(wan)} link(s) off")
    try:
        return _wait_for_stop(stop)
    finally:
        for base, config_before in zip(bases, saved):
            if config_before is not None:
                _call_or_none(base, "PATCH", config_before, token)
        for shaper in shapers:
            shaper.clear()


def _call_or_none(base: str, method: str, body: dict | None, token: str | None) -> dict | None:
    """GET or PATCH one link's /config; a link that refuses is reported and left as it is."""
    try:
        return call_once(base, method, "/config", body, token=token)
    except ControlError as err:
        log.warning("kernel netem: %s", err)
        return None


def _interfaces() -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return sorted(name for link in ipr.get_links() if (name := link.get_attr("IFLA_IFNAME")) != "lo")


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _catch_stop() -> int:
    """A pipe that SIGTERM or SIGINT writes to, from whichever thread the kernel hands the signal.

    Blocking the signals instead (and sigwait) holds only in the threads that block them: a thread
    an import started earlier would take a stop sent in the moment before the wait, and die of it.
    """
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)  # the wake-up byte is what ends the wait
    return read_end


def _wait_for_stop(stop: int) -> int:
    """Until SIGTERM or SIGINT (caught since _catch_stop, so none is lost before this wait)."""
    os.read(stop, 1)
    return 0
