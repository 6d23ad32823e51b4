"""The mesh under test: its processes, their /stats, the WAN links' control API, kill -9 and SIGSTOP.

Everything here speaks to the mesh from the outside, as an operator would:
HTTP to each service's ops port and to each link's control port, signals to
the processes the launcher started, and /proc for their memory and sockets.
Every service runs under its keeper (services/launcher/keeper.py): a killed one
is restarted by it, as `pdd-emu up` does, never by the harness.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp

from netem.client import ControlClient
from services.credentials import link_token
from services.launcher.plan import build_plan
from services.scenario.plan import LinkPlan, MeshPlan, ServicePlan
from services.launcher.processes import Started, _alive, _healthy, keeper_status, start_mesh, stop_processes
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
        self.link_token: str | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        self.processes = {p.name: p for p in start_mesh(self.plan, self.run_dir)}
        self.link_token = link_token(run_dir=self.run_dir)  # RUN_DIR/link-token, unless the user set their own

    def stop(self) -> None:
        stop_processes(list(self.processes.values()), run_dir=self.run_dir)

    @property
    def router_url(self) -> str:
        return f"http://{self.plan.router.host}:{self.plan.router.http_port}"

    def services(self, *roles: Role) -> list[ServicePlan]:
        return self.plan.with_role(*roles) if roles else list(self.plan.services)

    def wan_links(self) -> list[LinkPlan]:
        # The KV links: the faults' documented results (docs/reliability.md) were measured with gRPC
        # outside the shaped WAN, so its control routes are left alone.
        return [link for link in self.plan.links if link.kind == "wan" and link.purpose == "kv"]

    # -- reading ---------------------------------------------------------
    async def stats(self, http: aiohttp.ClientSession, name: str) -> dict:
        service = self.plan.service(name)
        return await _get_json(http, f"http://{service.host}:{service.http_port}/stats")

    def link(self, http: aiohttp.ClientSession, link: LinkPlan) -> ControlClient:
        """The control API of one planned link (netem/client.py); its calls raise ControlError."""
        return ControlClient(http, f"http://{link.host}:{link.control_port}", self.link_token, STATS_TIMEOUT_S)

    def service_pid(self, name: str) -> int | None:
        """The pid of the service itself (the keeper's child), which changes when it is restarted."""
        status = keeper_status(self.run_dir, name)
        return status["child_pid"] if status else None

    def rss_kib(self, name: str) -> int | None:
        """VmRSS of a service from /proc/PID/status, in KiB; None once it has gone."""
        try:
            for line in Path(f"/proc/{self.service_pid(name)}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def open_fds(self, name: str) -> int | None:
        try:
            return len(os.listdir(f"/proc/{self.service_pid(name)}/fd"))
        except OSError:
            return None

    def restarts(self, name: str) -> int:
        status = keeper_status(self.run_dir, name)
        return status["restarts"] if status else 0

    def hung_kills(self, name: str) -> int:
        """How often the keeper of `name` killed it for not answering (its liveness check)."""
        status = keeper_status(self.run_dir, name)
        return status.get("hung_kills", 0) if status else 0

    # -- faults ----------------------------------------------------------
    def _child(self, name: str) -> int:
        """The pid of `name`'s service (or link), checked to be the keeper's child running its command."""
        status = keeper_status(self.run_dir, name)
        keeper = self.processes[name]
        if status is None or status["keeper_pid"] != keeper.pid or not _alive(keeper.pid):
            raise MeshError(f"{name} is not running under the keeper the mesh started")
        pid = status["child_pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        if cmdline != [part.encode() for part in status["cmd"]]:
            raise MeshError(f"{name} (pid {pid}) is not the process its keeper started")
        return pid

    async def kill(self, name: str) -> int:
        """SIGKILL one service (the keeper's child, checked to be running its command); wait for its exit."""
        pid = self._child(name)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + EXIT_WAIT_S
        while Path(f"/proc/{pid}").exists() and keeper_status(self.run_dir, name)["child_pid"] == pid:
            if time.monotonic() > deadline:
                raise MeshError(f"{name} (pid {pid}) outlived SIGKILL by {EXIT_WAIT_S:g} s")
            await asyncio.sleep(0.05)
        return pid

    def hang(self, name: str) -> int:
        """SIGSTOP one service or link (the keeper's child, checked): it keeps its sockets and answers nothing."""
        pid = self._child(name)
        os.kill(pid, signal.SIGSTOP)
        return pid

    def resume(self, pid: int) -> None:
        """SIGCONT a process `hang` stopped, if it is still there."""
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    async def restarted(self, name: str, old_pid: int) -> float:
        """Wait until the keeper has started `name` again and it answers /health; the time that took."""
        health = self.processes[name].health_url
        started = time.monotonic()
        deadline = started + RESTART_WAIT_S
        while True:
            status = keeper_status(self.run_dir, name)
            if status and status["child_pid"] != old_pid and status["state"] == "running" \
                    and await asyncio.to_thread(_healthy, health):
                return time.monotonic() - started
            if time.monotonic() > deadline or (status and status["state"] == "gave-up"):
                raise MeshError(f"{name} was not restarted and healthy within {RESTART_WAIT_S:g} s: {status}")
            await asyncio.sleep(0.05)


async def _get_json(http: aiohttp.ClientSession, url: str) -> dict:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=STATS_TIMEOUT_S)) as reply:
        reply.raise_for_status()
        return await reply.json(content_type=None)
