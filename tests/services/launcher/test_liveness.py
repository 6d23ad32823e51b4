"""The keeper's liveness check: a child that stops answering (SIGSTOP) is killed and restarted; any
HTTP answer, a 503 included, is alive; a child still starting is left alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from services.launcher.keeper import Liveness

WAIT_S = 30.0
# Checks every 0.1 s, 0.3 s each, two misses: a hang is killed within 2 x (0.1 + 0.3) = 0.8 s.
FAST = ("--health-interval", "0.1", "--health-timeout", "0.3", "--health-retries", "2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_script(port: int, status: int = 200, hits: Path | None = None) -> str:
    """A child serving GET with `status` on `port`, appending a byte to `hits` per request."""
    count = "" if hits is None else f"open({str(hits)!r}, 'a').write('x'); "
    return ("import http.server\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            f"    def do_GET(self):\n        {count}self.send_response({status}); self.end_headers()\n"
            "    def log_message(self, *a): pass\n"
            f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n")


def keep(tmp_path: Path, script: str, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "services.launcher.keeper", "--status", str(tmp_path / "status.json"),
           "--backoff", "0.05", "--health", f"http://127.0.0.1:{port}/health", *FAST, "--",
           sys.executable, "-c", script]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def status(tmp_path: Path) -> dict:
    try:
        return json.loads((tmp_path / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:g} s"
        time.sleep(0.02)


def answered(port: int) -> bool:
    return Liveness(f"http://127.0.0.1:{port}/health", timeout_s=1.0).answers()


def stop(keeper: subprocess.Popen) -> str:
    keeper.send_signal(signal.SIGTERM)
    out, _ = keeper.communicate(timeout=WAIT_S)
    return out


def test_a_stopped_child_is_killed_as_hung_and_restarted(tmp_path):
    port, hits = free_port(), tmp_path / "hits"
    keeper = keep(tmp_path, server_script(port, hits=hits), port)
    try:
        # A second check has begun only after the first was answered: the keeper has seen the child alive.
        wait_for(lambda: hits.exists() and len(hits.read_text()) >= 2, "the keeper's first answered check")
        first = status(tmp_path)["child_pid"]
        os.kill(first, signal.SIGSTOP)
        wait_for(lambda: status(tmp_path).get("restarts") == 1 and status(tmp_path)["state"] == "running",
                 "the restart of the hung child")
        after = status(tmp_path)
        assert after["hung_kills"] == 1 and after["last_exit_code"] == -signal.SIGKILL
        assert after["child_pid"] != first and not Path(f"/proc/{first}").exists()
        wait_for(lambda: answered(port), "the restarted child answering")
    finally:
        out = stop(keeper)
    assert "hung; killing it" in out and "exited with signal SIGKILL" in out


def test_any_http_answer_is_alive_so_a_503_is_not_restarted(tmp_path):
    port, hits = free_port(), tmp_path / "hits"
    keeper = keep(tmp_path, server_script(port, status=503, hits=hits), port)
    try:
        wait_for(lambda: hits.exists() and len(hits.read_text()) >= 6, "six liveness checks")
        assert status(tmp_path)["restarts"] == 0 and status(tmp_path)["hung_kills"] == 0
    finally:
        stop(keeper)


def test_a_child_that_has_not_answered_yet_is_starting_not_hung(tmp_path):
    port, ready = free_port(), tmp_path / "ready"
    # The child answers only once the test creates `ready`: until then its misses are its start-up.
    script = (f"import os, time\nwhile not os.path.exists({str(ready)!r}): time.sleep(0.01)\n"
              + server_script(port))
    keeper = keep(tmp_path, script, port)
    try:
        wait_for(lambda: status(tmp_path).get("child_pid"), "the child's start")
        # Longer than the 0.8 s a hang of an answering child lasts before its kill, without an answer.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert status(tmp_path)["restarts"] == 0
            time.sleep(0.05)
        ready.touch()
        wait_for(lambda: answered(port), "the child answering once started")
        assert status(tmp_path)["hung_kills"] == 0
    finally:
        stop(keeper)


def test_the_bound_is_retries_checks_of_an_interval_and_a_timeout():
    assert Liveness("http://x", interval_s=1.0, timeout_s=2.5, retries=2).bound_s == 7.0
    assert Liveness("http://x", interval_s=0.1, timeout_s=0.3, retries=2).bound_s == 0.8
