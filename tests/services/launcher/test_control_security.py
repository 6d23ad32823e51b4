"""Control endpoints from the outside: loopback by default, a bearer token otherwise, and no token no service.

The only control and admin endpoints a mesh serves over HTTP are the links' control APIs (partition,
schedule, reset: what the chaos scenarios drive). These tests run `pdd-emu link` as a real process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from services.launcher.plan import build_plan, free_port
from services.launcher.processes import link_command
from services.scenario import load_scenario

START_S = 30


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PDD_EMU_LINK_TOKEN", "PDD_EMU_LINK_TOKEN_FILE")}


def _call(url: str, method: str = "GET", token: str | None = None, body: bytes | None = None) -> int:
    request = urllib.request.Request(url, method=method, data=body, headers={"Content-Type": "application/json"})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("preset", ["pdd-mini", "pd-cross-mini"])
def test_the_launcher_binds_every_link_control_api_to_loopback(preset, tmp_path):
    plan = build_plan(load_scenario(preset))
    for link in plan.links:
        assert ipaddress.ip_address(link.host).is_loopback
        cmd = link_command(link, plan.scenario.byte_scale, plan.scenario.seed, tmp_path)
        control = cmd[cmd.index("--control") + 1]
        assert ipaddress.ip_address(control.rsplit(":", 1)[0]).is_loopback
        assert "--control-token" not in cmd  # loopback needs none


def test_a_link_refuses_to_serve_control_off_loopback_without_a_token():
    done = subprocess.run([sys.executable, "-m", "services.cli", "link", "--listen", "127.0.0.1:0",
                           "--upstream", "127.0.0.1:9", "--control", "0.0.0.0:0"],
                          capture_output=True, text=True, timeout=START_S, env=_env())
    assert done.returncode == 2
    assert "not loopback: give --control-token" in done.stderr


@pytest.fixture
def guarded_link():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "link", "--listen", "127.0.0.1:0",
                             "--upstream", "127.0.0.1:9", "--control", f"0.0.0.0:{port}",
                             "--control-token", "s3cret-token"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = proc.stdout.readline()  # the one ready line, printed once it accepts connections
        assert "pdd-emu link: ready" in line, proc.stderr.read() if proc.poll() is not None else line
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=START_S)


def test_an_unauthenticated_call_is_refused_and_changes_nothing(guarded_link):
    partition = b'{"mode": "reject", "duration": "60s"}'
    for token in (None, "", "wrong", "s3cret-tokenX", "s3cret-toke"):
        assert _call(f"{guarded_link}/stats", token=token) == 401
        assert _call(f"{guarded_link}/partition", "POST", token, partition) == 401
        assert _call(f"{guarded_link}/reset", "POST", token, b"{}") == 401
    assert _call(f"{guarded_link}/stats", token="s3cret-token") == 200
    with urllib.request.urlopen(urllib.request.Request(
            f"{guarded_link}/stats", headers={"Authorization": "Bearer s3cret-token"}), timeout=10) as reply:
        stats = json.loads(reply.read())
    assert stats["up"]["partition"] is None and stats["down"]["partition"] is None
