"""Start and stop a real mesh (separate processes) for integration tests."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

UP_TIMEOUT_S = 120


@contextmanager
def running_mesh(scenario: str, run_dir: Path, *overrides: str) -> Iterator[str]:
    """`pdd-emu up --detach`, yield the router URL, `pdd-emu down` whatever happens."""
    with mesh_up(scenario, run_dir, *overrides) as printed:
        yield printed["router"]


@contextmanager
def mesh_up(scenario: str, run_dir: Path, *overrides: str) -> Iterator[dict[str, str]]:
    """`pdd-emu up --detach`, yield what it printed ("router: URL" as {"router": "URL"}), `pdd-emu down` after."""
    cmd = [sys.executable, "-m", "services.cli", "up", "--scenario", scenario, "--detach", "--run-dir", str(run_dir)]
    for override in overrides:
        cmd += ["--set", override]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=UP_TIMEOUT_S)
        if proc.returncode != 0:
            logs = "".join(f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in (run_dir / "logs").glob("*.log"))
            raise RuntimeError(f"pdd-emu up failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}{logs}")
        printed = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
        assert "router" in printed, proc.stdout
        yield printed
    finally:
        subprocess.run([sys.executable, "-m", "services.cli", "down", "--run-dir", str(run_dir)],
                       capture_output=True, timeout=60)


def plan_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "plan.json").read_text())


def get_json(url: str, headers: dict[str, str] | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as reply:
        return json.loads(reply.read())


def link_control(run_dir: Path, kind: str) -> tuple[str, dict[str, str]]:
    """The control API of the first link of `kind` ('wan' or 'rdma'): its URL and the bearer header
    `pdd-emu up` made its token for (RUN_DIR/link-token)."""
    link = next(l for l in plan_of(run_dir)["links"] if l["kind"] == kind)
    token = (run_dir / "link-token").read_text()
    return f"http://{link['host']}:{link['control_port']}", {"Authorization": f"Bearer {token}"}


def link_stats(run_dir: Path, kind: str) -> dict:
    """The control-API counters of the first link of `kind` ('wan' or 'rdma')."""
    url, auth = link_control(run_dir, kind)
    return get_json(f"{url}/stats", auth)
