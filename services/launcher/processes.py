"""Run a mesh plan as local processes: links first, then services, router last.

Each process is started in its own session with its output in
RUN_DIR/logs/NAME.log, under a keeper (services/launcher/keeper.py) that
restarts it when it fails; RUN_DIR/status/NAME.json says what runs now.
`state.json` records what was started so `down` stops exactly those processes
(it checks each pid's command line before signalling), a service whose keeper died included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from services.credentials import LINK_TOKEN_FILE, LINK_TOKEN_FILE_ENV, MESH_TOKEN_FILE_ENV, link_token, new_token, write_token
from services.scenario.link_config import real_link_config
from services.scenario.plan import LinkPlan, MeshPlan, ServicePlan
from services.types import Role

STATE_FILE = "state.json"
PLAN_FILE = "plan.json"
STATUS_DIR = "status"
LINK_CONFIG_DIR = "links"
TOKEN_FILE = "mesh-token"
START_ORDER = (Role.DECODE, Role.MAIN_DECODE, Role.RELAY_DECODE, Role.COLOCATED, Role.PREFILL, Role.ROUTER)


class LaunchError(RuntimeError):
    pass


@dataclass
class Started:
    name: str
    pid: int
    health_url: str
    cmd: tuple[str, ...]


def link_command(link: LinkPlan, byte_scale: float, seed: int, run_dir: Path) -> list[str]:
    """`pdd-emu link` for a planned link; its real config (services/scenario/link_config.py) goes as a JSON file.

    The file holds the floats themselves, so the shaped rate is the one the plan implies to the bit.
    """
    config_path = (run_dir / LINK_CONFIG_DIR / f"{link.name}.json").resolve()
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(real_link_config(link, byte_scale).model_dump_json(by_alias=True))
    cmd = [
        sys.executable, "-m", "services.cli", "link",
        "--listen", link.address, "--upstream", link.upstream,
        "--control", f"{link.host}:{link.control_port}", "--seed", str(seed), "--config", str(config_path),
        "--name", link.name,
    ]
    if link.spec.schedule:
        cmd += ["--schedule", link.spec.schedule]
    return cmd


def service_command(plan_path: Path, service: ServicePlan) -> list[str]:
    return [sys.executable, "-m", "services.cli", "serve", "--plan", str(plan_path), "--service", service.name]


def kept(name: str, cmd: list[str], run_dir: Path, health_url: str) -> list[str]:
    """`cmd` under a keeper that restarts it when it fails or stops answering `health_url` (hung), and
    keeps RUN_DIR/status/NAME.json."""
    status = (run_dir / STATUS_DIR / f"{name}.json").resolve()
    return [sys.executable, "-m", "services.launcher.keeper", "--status", str(status), "--health", health_url,
            "--", *cmd]


def make_tokens(run_dir: Path) -> None:
    """RUN_DIR/mesh-token (services/rpc/auth.py) and RUN_DIR/link-token (netem/control.py; the user's own if set),
    owner-only. Processes get paths, never tokens; link-token's only the links and the router (`link_control`)."""
    write_token((run_dir / TOKEN_FILE).resolve(), new_token())
    write_token((run_dir / LINK_TOKEN_FILE).resolve(), link_token() or new_token())


def _spawn(name: str, cmd: list[str], run_dir: Path, link_control: bool = False) -> int:
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (run_dir / STATUS_DIR).mkdir(parents=True, exist_ok=True)
    (run_dir / STATUS_DIR / f"{name}.json").unlink(missing_ok=True)
    with open(logs / f"{name}.log", "ab") as log:
        env = {**os.environ, MESH_TOKEN_FILE_ENV: str((run_dir / TOKEN_FILE).resolve())}
        if link_control:
            env[LINK_TOKEN_FILE_ENV] = str((run_dir / LINK_TOKEN_FILE).resolve())
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=os.getcwd(), env=env)
    return proc.pid


def keeper_status(run_dir: Path, name: str) -> dict | None:
    """What the keeper of `name` last wrote: child_pid, restarts, last_exit_code, state; None before it has."""
    try:
        return json.loads((run_dir / STATUS_DIR / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def _healthy(url: str) -> bool:
    return health_state(url) == "healthy"


def health_state(url: str) -> str | None:
    """"healthy" (200), "draining" (503 with that status: a Drain call refuses its new work), or None."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as reply:
            return "healthy" if reply.status == 200 else None
    except urllib.error.HTTPError as exc:
        try:
            draining = exc.code == 503 and json.loads(exc.read()).get("status") == "draining"
        except (OSError, ValueError, AttributeError):
            draining = False
        return "draining" if draining else None
    except (urllib.error.URLError, OSError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours still answers kill(0); reap it so it reads as dead.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def wait_healthy(started: list[Started], run_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(started)
    while waiting:
        for proc in list(waiting):
            status = keeper_status(run_dir, proc.name) or {}
            if not _alive(proc.pid) or status.get("restarts") or status.get("state") not in (None, "running"):
                tail = (run_dir / "logs" / f"{proc.name}.log").read_text(errors="replace")[-2000:]
                raise LaunchError(f"{proc.name} exited during start-up; its log ends:\n{tail}")
            if _healthy(proc.health_url):
                waiting.remove(proc)
        if waiting and time.monotonic() > deadline:
            raise LaunchError(f"not healthy within {timeout_s:g} s: {', '.join(p.name for p in waiting)}")
        time.sleep(0.05)


def start_mesh(plan: MeshPlan, run_dir: Path, timeout_s: float = 60.0) -> list[Started]:
    run_dir.mkdir(parents=True, exist_ok=True)
    plan_path = (run_dir / PLAN_FILE).resolve()
    plan = plan.model_copy(update={"status_dir": str((run_dir / STATUS_DIR).resolve())})
    plan.save(plan_path)
    make_tokens(run_dir)
    scale, seed = plan.scenario.byte_scale, plan.scenario.seed
    started: list[Started] = []
    try:
        for link in plan.links:
            health = f"http://{link.host}:{link.control_port}/health"
            cmd = kept(link.name, link_command(link, scale, seed, run_dir), run_dir, health)
            started.append(Started(link.name, _spawn(link.name, cmd, run_dir, True), health, tuple(cmd)))
        for role in START_ORDER:
            for service in plan.with_role(role):
                health = f"http://{service.host}:{service.http_port}/health"
                cmd = kept(service.name, service_command(plan_path, service), run_dir, health)
                pid = _spawn(service.name, cmd, run_dir, link_control=role is Role.ROUTER)
                started.append(Started(service.name, pid, health, tuple(cmd)))
        _write_state(run_dir, plan, started)
        wait_healthy(started, run_dir, timeout_s)
    except BaseException:
        stop_processes(started, run_dir=run_dir)
        raise
    return started


def _write_state(run_dir: Path, plan: MeshPlan, started: list[Started]) -> None:
    state = {
        "scenario": plan.scenario.name,
        "router": f"http://{plan.router.host}:{plan.router.http_port}",
        "processes": [{"name": p.name, "pid": p.pid, "health": p.health_url, "cmd": list(p.cmd)} for p in started],
        "started_at": time.time(),
    }
    (run_dir / STATE_FILE).write_text(json.dumps(state, indent=2))


def read_state(run_dir: Path) -> tuple[dict, list[Started]] | None:
    path = run_dir / STATE_FILE
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state, [Started(p["name"], p["pid"], p["health"], tuple(p["cmd"])) for p in state["processes"]]


def _ours(proc: Started) -> bool:
    """True only for the very process we started: a reused pid has another command line."""
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    except OSError:
        return False
    return cmdline.rstrip(b"\0").split(b"\0") == [part.encode() for part in proc.cmd]


def unsupervised(run_dir: Path, proc: Started) -> int | None:
    """The pid of `proc`'s service still running after its keeper died, or None.

    The service is the keeper's child in the keeper's process group (the group outlives the keeper);
    it is ours only if its command line is the one the keeper's status file names.
    """
    if _alive(proc.pid) and _ours(proc):
        return None  # supervised
    status = keeper_status(run_dir, proc.name) or {}
    pid, cmd = status.get("child_pid"), status.get("cmd")
    if not pid or not cmd or status.get("keeper_pid") != proc.pid:
        return None
    try:
        if os.getpgid(pid) != proc.pid:
            return None
    except ProcessLookupError:
        return None
    return pid if _ours(Started(proc.name, pid, proc.health_url, tuple(cmd))) else None


def stop_processes(started: list[Started], grace_s: float = 10.0, run_dir: Path | None = None) -> None:
    """SIGTERM in reverse start order, then SIGKILL whatever outlives the grace period.

    Each keeper's process group is signalled, so a stopped (SIGSTOP) service is continued to see its
    SIGTERM; with `run_dir`, a service whose keeper died (`unsupervised`) is stopped the same way.
    """
    targets = []  # (process group, the pid whose exit ends it)
    for proc in reversed(started):
        if _alive(proc.pid) and _ours(proc):
            targets.append((proc.pid, proc.pid))
        elif run_dir is not None and (orphan := unsupervised(run_dir, proc)) is not None:
            targets.append((proc.pid, orphan))
    for group, _ in targets:
        os.killpg(group, signal.SIGTERM)
        os.killpg(group, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for _, pid in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    for group, pid in targets:
        if _alive(pid):
            os.killpg(group, signal.SIGKILL)
