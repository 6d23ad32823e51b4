"""`pdd-emu up` keeps its processes running: a killed main decode comes back, and so do its channels."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from services.chaos.outcomes import FaultFreeText
from services.launcher.processes import _healthy, keeper_status
from services.profiles import load_model
from tests.integration.mesh import plan_of, running_mesh
from tests.integration.test_mesh_modes import _stream

pytestmark = pytest.mark.integration

TEXT = FaultFreeText(7, load_model("llama3-8b").vocab_size)  # pdd-mini's seed


def _prompt(salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(300)]


def test_a_killed_service_is_restarted_and_requests_after_its_health_succeed(tmp_path):
    with running_mesh("pdd-mini", tmp_path) as url:
        assert _stream(url, _prompt(1), 8)[1]["pipeline"] == "P-MD"
        md = next(s for s in plan_of(tmp_path)["services"] if s["name"] == "main-decode")
        health = f"http://{md['host']}:{md['http_port']}/health"
        old = keeper_status(tmp_path, "main-decode")["child_pid"]
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        while not (_healthy(health) and keeper_status(tmp_path, "main-decode")["child_pid"] != old):
            assert time.monotonic() < killed + 30, "main decode was not restarted within 30 s"
            time.sleep(0.02)
        back = time.monotonic() - killed
        # At once, as a client that polls /health would: no request may fail on a channel still backing off.
        for salt in range(2, 7):
            text, pdd = _stream(url, _prompt(salt), 8)
            assert pdd["pipeline"] == "P-MD" and text == TEXT.text(TEXT.ids(_prompt(salt), 8))
        status = subprocess.run([sys.executable, "-m", "services.cli", "status", "--run-dir", str(tmp_path)],
                                capture_output=True, text=True, timeout=30).stdout
        log = (tmp_path / "logs" / "main-decode.log").read_text()
    print(f"main decode healthy again {back:.2f} s after kill -9\n{status}")
    line = next(l for l in status.splitlines() if l.strip().startswith("main-decode"))
    assert line.split()[2:] == ["healthy", "1", "-9"], line  # state, restarts, last exit code (signal 9)
    assert "keeper: exited with signal SIGKILL" in log and "restart 1 in" in log
