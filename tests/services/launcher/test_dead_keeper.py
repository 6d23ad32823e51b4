"""A service whose keeper died: `pdd-emu status` says "unsupervised", `pdd-emu down` stops it; a
stopped (SIGSTOP) service is stopped by `down` too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from services.launcher.keeper import STOP_GRACE_S
from services.launcher.processes import (
    STATE_FILE, Started, _alive, _spawn, kept, keeper_status, stop_processes, unsupervised,
)
from tests.services.launcher.test_liveness import free_port, server_script, wait_for
from tests.tolerance import assert_at_most


def start_kept(run_dir: Path, name: str = "svc") -> Started:
    port = free_port()
    health = f"http://127.0.0.1:{port}/health"
    cmd = kept(name, [sys.executable, "-c", server_script(port)], run_dir, health)
    started = Started(name, _spawn(name, cmd, run_dir), health, tuple(cmd))
    (run_dir / STATE_FILE).write_text(json.dumps({
        "scenario": "test", "router": health, "started_at": time.time(),
        "processes": [{"name": name, "pid": started.pid, "health": health, "cmd": list(cmd)}]}))
    wait_for(lambda: (keeper_status(run_dir, name) or {}).get("child_pid"), "the keeper's child")
    return started


def pdd_emu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], capture_output=True, text=True, timeout=60)


def test_a_service_whose_keeper_died_is_unsupervised_in_status_and_stopped_by_down(tmp_path):
    started = start_kept(tmp_path)
    child = keeper_status(tmp_path, "svc")["child_pid"]
    try:
        assert unsupervised(tmp_path, started) is None  # its keeper runs
        os.kill(started.pid, signal.SIGKILL)
        wait_for(lambda: not _alive(started.pid), "the keeper's death")
        assert unsupervised(tmp_path, started) == child and _alive(child)
        shown = pdd_emu("status", "--run-dir", str(tmp_path))
        assert shown.returncode == 1 and "unsupervised" in shown.stdout and "exited" not in shown.stdout
        down = pdd_emu("down", "--run-dir", str(tmp_path))
        assert down.returncode == 0, down.stdout + down.stderr
        wait_for(lambda: not Path(f"/proc/{child}").exists(), "the unsupervised service's exit")
    finally:
        if Path(f"/proc/{child}").exists():
            os.kill(child, signal.SIGKILL)


def test_a_dead_keepers_service_that_exited_too_shows_as_exited(tmp_path):
    started = start_kept(tmp_path)
    child = keeper_status(tmp_path, "svc")["child_pid"]
    os.kill(started.pid, signal.SIGKILL)
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: not _alive(started.pid) and not Path(f"/proc/{child}").exists(), "both deaths")
    assert unsupervised(tmp_path, started) is None
    shown = pdd_emu("status", "--run-dir", str(tmp_path))
    assert "exited" in shown.stdout and "unsupervised" not in shown.stdout


def test_down_stops_a_stopped_service_without_waiting_out_its_grace(tmp_path):
    started = start_kept(tmp_path)
    child = keeper_status(tmp_path, "svc")["child_pid"]
    os.kill(child, signal.SIGSTOP)
    began = time.monotonic()
    stop_processes([started], grace_s=30.0, run_dir=tmp_path)
    # SIGTERM alone would wait in the stopped process until the keeper's SIGKILL after its grace (10 s).
    assert_at_most(time.monotonic() - began, STOP_GRACE_S / 2, what="seconds to stop a stopped service")
    assert not _alive(started.pid) and not Path(f"/proc/{child}").exists()
    assert keeper_status(tmp_path, "svc")["state"] == "stopped"


def test_status_says_no_answer_for_a_kept_service_that_runs_but_does_not_answer(tmp_path):
    started = start_kept(tmp_path)
    os.killpg(started.pid, signal.SIGSTOP)  # the keeper too, so that its liveness check does not end the hang first
    try:
        shown = pdd_emu("status", "--run-dir", str(tmp_path))
        line = next(line for line in shown.stdout.splitlines() if line.strip().startswith("svc"))
        assert shown.returncode == 1 and line.split()[2] == "no-answer", shown.stdout
    finally:
        stop_processes([started], run_dir=tmp_path)
