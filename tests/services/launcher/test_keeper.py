"""The keeper: restart on failure with back-off and a limit, leave clean exits alone, stop on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.tolerance import assert_at_least

WAIT_S = 30.0


def _keep(tmp_path: Path, script: str, *options: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "services.launcher.keeper", "--status", str(tmp_path / "status.json"),
           "--backoff", "0.05", "--max-backoff", "0.2", *options, "--", sys.executable, "-c", script]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _status(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "status.json").read_text())


def test_a_failing_command_is_restarted_until_the_limit_then_the_keeper_gives_up(tmp_path):
    runs = tmp_path / "runs"
    keeper = _keep(tmp_path, f"import sys; open({str(runs)!r}, 'a').write('x'); sys.exit(3)", "--max-restarts", "2")
    out, _ = keeper.communicate(timeout=WAIT_S)
    assert keeper.returncode == 3
    assert runs.read_text() == "xxx"  # the first run and two restarts
    status = _status(tmp_path)
    assert (status["restarts"], status["last_exit_code"], status["state"]) == (2, 3, "gave-up")
    assert out.count("keeper: exited with status 3") == 3 and "restart 1 in 0.05 s" in out and "giving up" in out


def test_a_killed_child_is_restarted_with_the_same_command_and_a_clean_exit_is_not(tmp_path):
    flag = tmp_path / "second-run"
    # The first run waits to be killed; the second sees the flag and exits cleanly.
    script = (f"import os, sys, time\nif os.path.exists({str(flag)!r}): sys.exit(0)\n"
              f"open({str(flag)!r}, 'w').close()\ntime.sleep(60)")
    keeper = _keep(tmp_path, script)
    deadline = time.monotonic() + WAIT_S
    while not flag.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    first = _status(tmp_path)["child_pid"]
    subprocess.run(["kill", "-9", str(first)], check=True)
    out, _ = keeper.communicate(timeout=WAIT_S)
    status = _status(tmp_path)
    assert keeper.returncode == 0 and status["state"] == "exited"
    assert status["restarts"] == 1 and status["last_exit_code"] == 0 and status["child_pid"] != first
    assert "exited with signal SIGKILL" in out


def test_sigterm_stops_the_child_and_the_keeper_without_a_restart(tmp_path):
    keeper = _keep(tmp_path, "import time; time.sleep(60)")
    deadline = time.monotonic() + WAIT_S
    while not (tmp_path / "status.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    keeper.send_signal(signal.SIGTERM)
    keeper.communicate(timeout=WAIT_S)
    status = _status(tmp_path)
    assert status["state"] == "stopped" and status["restarts"] == 0 and status["last_exit_code"] == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    keeper = _keep(tmp_path, script, "--stop-grace", "0.3")
    assert keeper.stdout.readline().strip() == "ready"  # the child ignores SIGTERM from here on
    sent = time.monotonic()
    keeper.send_signal(signal.SIGTERM)
    keeper.communicate(timeout=WAIT_S)
    status = _status(tmp_path)
    assert status["state"] == "stopped" and status["last_exit_code"] == -signal.SIGKILL
    assert_at_least(time.monotonic() - sent, 0.3, what="time from SIGTERM to SIGKILL")  # not before the grace
