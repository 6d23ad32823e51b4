"""Two stacks on one engine, told apart by COMPOSE_PROJECT_NAME and PDD_EMU_PORT alone; `make down` in seconds.

The session's stack (conftest) is the first; the second is brought up from the
same compose file with no `-p` and no edited file, only the environment. Then
`make down` takes the second away: it must return within seconds (it stops the
containers and leaves their removal to the background, docs/compose.md), its
router must stop answering while the first one still answers, and once the
background removal ends no container of the second project is left.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from tests.compose.local_plan import distinct_free_ports
from tests.compose.stack import COMPOSE_FILE, REPO, UP_TIMEOUT_S, stream_completion
from tests.tolerance import assert_at_most
from tests.waiting import until

pytestmark = pytest.mark.compose

PROMPT = [(i * 7919) % 50000 for i in range(200)]
DOWN_BOUND_S = 40.0  # stopping takes 2-4 s per container level; a removal on vfs alone took 45 s a container


def _answers(port: int) -> bool:
    outcome = stream_completion(port, PROMPT, 4)
    return outcome.status == 200 and bool(outcome.texts) and outcome.broken is None


def _projects_on(client, project: str) -> list:
    return client.containers.list(all=True, filters={"label": [f"com.docker.compose.project={project}"]})


def test_a_second_stack_runs_beside_the_first_and_make_down_returns_in_seconds(stack):
    stack.up("pdd-mini")
    port = next(p for p in distinct_free_ports(2) if p != stack.port)
    project = f"{stack.project}-b"
    env = {**os.environ, "COMPOSE_PROJECT_NAME": project, "PDD_EMU_PORT": str(port),
           "PDD_EMU_SCENARIO": "pdd-mini", "PDD_EMU_SET": ""}  # no token: the stack makes its own
    try:
        up = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "up", "-d", "--wait", "--wait-timeout",
                             str(UP_TIMEOUT_S)], env=env, capture_output=True, text=True, timeout=UP_TIMEOUT_S + 60)
        assert up.returncode == 0, up.stderr[-3000:]
        second = _projects_on(stack.client, project)
        assert {c.name.split("-")[-2] for c in second} >= {"router", "prefill"}  # e.g. <project>-router-1
        assert all(c.name.startswith(f"{project}-") for c in second)
        for each in (stack.port, port):  # a stack just up may answer 503 until every peer has served once
            asyncio.run(until(lambda: _answers(each), f"router on {each} answers", timeout_s=180, poll_s=2))

        started = time.monotonic()
        down = subprocess.run(["make", "down"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        took = time.monotonic() - started
        assert down.returncode == 0, down.stderr[-3000:]
        assert_at_most(took, DOWN_BOUND_S, what="seconds make down took")
        assert stream_completion(port, PROMPT, 4, deadline_s=10).status != 200  # the second is down
        assert _answers(stack.port)  # the first still serves

        pid = (REPO / "compose" / f".removing-{project}.pid").read_text().strip()
        subprocess.run(["tail", f"--pid={pid}", "-f", "/dev/null"], timeout=600, check=True)
        assert _projects_on(stack.client, project) == []
    finally:
        subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "-p", project, "--profile", "load", "--profile",
                        "chaos", "--profile", "netem", "down", "-v", "--remove-orphans"], env=env,
                       capture_output=True, timeout=900)
        for leftover in ("pid", "log"):
            (REPO / "compose" / f".removing-{project}.{leftover}").unlink(missing_ok=True)
