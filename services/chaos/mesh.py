"""The mesh under test: its processes, their /stats, the WAN links' control API, kill -9 and restart.

Everything here speaks to the mesh from the outside, as an operator would:
HTTP to each service's ops port and to each link's control port, signals to
the processes the launcher started, and /proc for their memory and sockets.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp

from services.launcher.plan import LinkPlan, MeshPlan, ServicePlan, build_plan
from services.launcher.processes import Started, _alive, _ours, restart_process, start_mesh, stop_processes
from services.scenario import Scenario, load_scenario
from services.types import Role

EXIT_WAIT_S = 10.0
RESTART_WAIT_S = 60.0
STATS_TIMEOUT_S = 5.0


class MeshError(RuntimeError):
    pass


class ChaosMesh:
    def __init__(self, preset: str, overrides: list[str], run_dir: Path) -> None:
        self.scenario: Scenario = load_scenario(preset, overrides)
        self.plan: MeshPlan = build_plan(self.scenario)
        self.run_dir = run_dir
        self.processes: dict[str, Started] = {}

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        self.processes = {p.name: p for p in start_mesh(self.plan, self.run_dir)}

    def stop(self) -> None:
        stop_processes(list(self.processes.values()))

    @property
    def router_url(self) -> str:
        return f"http://{self.plan.router.host}:{self.plan.router.http_port}"

    def services(self, *roles: Role) -> list[ServicePlan]:
        return self.plan.with_role(*roles) if roles else list(self.plan.services)

    def wan_links(self) -> list[LinkPlan]:
        return [link for link in self.plan.links if link.kind == "wan"]

    # -- reading ---------------------------------------------------------
    async def stats(self, http: aiohttp.ClientSession, name: str) -> dict:
        service = self.plan.service(name)
        return await _get_json(http, f"http://{service.host}:{service.http_port}/stats")

    async def link(self, http: aiohttp.ClientSession, link: LinkPlan, method: str, path: str,
                   body: object | None = None) -> dict:
        url = f"http://{link.host}:{link.control_port}{path}"
        async with http.request(method, url, json=body, timeout=aiohttp.ClientTimeout(total=STATS_TIMEOUT_S)) as reply:
            answer = await reply.json(content_type=None)
            if reply.status != 200:
                raise MeshError(f"{method} {path} on link {link.name}: HTTP {reply.status}: {answer}")
            return answer

    def rss_kib(self, name: str) -> int | None:
        """VmRSS of a process from /proc/PID/status, in KiB; None once it has gone."""
        try:
            for line in Path(f"/proc/{self.processes[name].pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def open_fds(self, name: str) -> int | None:
        try:
            return len(os.listdir(f"/proc/{self.processes[name].pid}/fd"))
        except OSError:
            return None

    # -- faults ----------------------------------------------------------
    async def kill(self, name: str) -> None:
        """SIGKILL one process of the mesh (after checking it is the one we started) and wait for its exit."""
        proc = self.processes[name]
        if not _ours(proc):
            raise MeshError(f"{name} (pid {proc.pid}) is not the process the mesh started")
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + EXIT_WAIT_S
        while _alive(proc.pid):
            if time.monotonic() > deadline:
                raise MeshError(f"{name} (pid {proc.pid}) outlived SIGKILL by {EXIT_WAIT_S:g} s")
            await asyncio.sleep(0.05)

    async def restart(self, name: str) -> None:
        """Start it again with the same command line: same ports, from the plan. Returns once healthy."""
        again = await asyncio.to_thread(restart_process, self.processes[name], self.run_dir, RESTART_WAIT_S)
        self.processes[name] = again


async def _get_json(http: aiohttp.ClientSession, url: str) -> dict:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=STATS_TIMEOUT_S)) as reply:
        reply.raise_for_status()
        return await reply.json(content_type=None)
