"""Docker tests run only when asked for (`-m compose`, as `make test-compose` does) and an engine answers."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.compose.local_plan import distinct_free_ports
from tests.compose.stack import Stack


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make test` stays engine-free: compose tests need a marker expression that names them.
    if "compose" in (config.getoption("markexpr") or ""):
        return
    skipped = [item for item in items if item.get_closest_marker("compose")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if not item.get_closest_marker("compose")]


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker binary on PATH"
    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=60)
    if info.returncode != 0:
        return f"no Docker engine answers (start one, e.g. bash ../shared/ci/docker-engine.sh): {info.stderr.strip()}"
    version = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        return "the Docker Compose v2 plugin is missing (`docker compose version` fails)"
    return None


@pytest.fixture(scope="session")
def stack():
    problem = _engine_problem()
    if problem:
        pytest.skip(problem)
    (port,) = distinct_free_ports(1)
    deployment = Stack(f"pddemu-test-{uuid.uuid4().hex[:8]}", port)
    try:
        deployment.compose("build", timeout=1200)
        yield deployment
    finally:
        deployment.down()
