"""A one-node Ray cluster for the tests that join one by address (`--ray-address`).

The cluster is `ray start --head --block` in a process group of its own, with a temp dir of its own,
and is stopped by killing that group: `ray stop` would kill every Ray on the machine, a local Ray
that a sweep or an experiment runs beside the tests included.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

RAY_DEADLINE_S = 240  # Ray's start-up takes seconds to tens of seconds on the loaded 2-core machine
READY = "Ray runtime started"  # what `ray start` prints once the head answers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(stream) -> queue.Queue[str | None]:
    """The head's output line by line, read by a thread, so that waiting for a line has a deadline
    and the pipe never fills while the cluster runs; None once it closes."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name="ray-head-output").start()
    return lines


def _wait_ready(lines: queue.Queue[str | None], deadline: float) -> None:
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            raise AssertionError("`ray start --head` exited before the head was up:\n" + "".join(seen[-40:]))
        seen.append(line)
        if READY in line:
            return
    raise AssertionError(f"the Ray head was not up within {RAY_DEADLINE_S} s:\n" + "".join(seen[-40:]))


@pytest.fixture
def ray_cluster():
    """A one-node Ray cluster as `ray start --head` starts one, stopped afterwards: (address, env, ray).

    Token authentication is off for it (RAY_AUTH_MODE=disabled on both sides): what is under test
    is joining a cluster by address, not Ray's tokens.
    """
    ray = str(Path(sys.executable).with_name("ray"))
    env = os.environ | {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths live under it
    head = subprocess.Popen([ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own group: the head and every process it starts
    try:
        _wait_ready(_lines(head.stdout), time.monotonic() + RAY_DEADLINE_S)
        yield f"127.0.0.1:{port}", env, ray
    finally:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=RAY_DEADLINE_S)
        shutil.rmtree(temp_dir, ignore_errors=True)
