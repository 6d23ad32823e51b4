"""A one-node Ray cluster for the tests that join one by address (`--ray-address`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

RAY_DEADLINE_S = 240  # Ray's start-up takes seconds to tens of seconds on the loaded 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_cluster():
    """A one-node Ray cluster started as `ray start --head` starts one, stopped afterwards: (address, env, ray).

    Token authentication is off for it (RAY_AUTH_MODE=disabled on both sides): what is under test
    is joining a cluster by address, not Ray's tokens.
    """
    ray = str(Path(sys.executable).with_name("ray"))
    env = os.environ | {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    started = subprocess.run([ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                              "--disable-usage-stats"], capture_output=True, text=True, env=env,
                             timeout=RAY_DEADLINE_S)
    assert started.returncode == 0, started.stderr
    try:
        yield f"127.0.0.1:{port}", env, ray
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env, timeout=RAY_DEADLINE_S)
