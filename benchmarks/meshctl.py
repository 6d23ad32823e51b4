"""Shared by the mesh benchmarks: run a scenario's mesh and read service and link stats.

Requests go through `loadgen.probe.probe_stream`.
"""

from __future__ import annotations

import json
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from services.credentials import link_token
from services.experiments.dilation import dilate_scenario
from services.launcher.plan import build_plan
from services.scenario.plan import MeshPlan
from services.launcher.processes import start_mesh, stop_processes
from services.scenario import load_scenario


@contextmanager
def mesh(scenario: str, run_dir: Path, *overrides: str, dilation: float = 1.0) -> Iterator[tuple[str, MeshPlan]]:
    """`scenario`'s mesh, running `dilation` times slower than real time (services/experiments/dilation.py)."""
    plan = build_plan(dilate_scenario(load_scenario(scenario, overrides), dilation))
    processes = start_mesh(plan, run_dir)
    try:
        yield f"http://{plan.router.host}:{plan.router.http_port}", plan
    finally:
        stop_processes(processes)


def service_stats(plan: MeshPlan, name: str, reset_lag: bool = False) -> dict:
    service = plan.service(name)
    query = "?reset_lag=1" if reset_lag else ""
    with urllib.request.urlopen(f"http://{service.host}:{service.http_port}/stats{query}", timeout=10) as reply:
        return json.loads(reply.read())


def link_stats(plan: MeshPlan, kind: str, run_dir: Path) -> dict:
    """The control-API counters of the first link of `kind`, with the mesh's RUN_DIR/link-token."""
    link = next(l for l in plan.links if l.kind == kind)
    request = urllib.request.Request(f"http://{link.host}:{link.control_port}/stats",
                                     headers={"Authorization": f"Bearer {link_token(run_dir=run_dir)}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())
