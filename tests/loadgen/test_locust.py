"""Locust runs for real, headless, as a process against the test double.

Locust monkey-patches the interpreter with gevent when imported, so nothing
here imports it: every check goes through a subprocess.
"""

import asyncio
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCUST = Path(sys.executable).with_name("locust")


@pytest.mark.slow
async def test_headless_run_writes_one_row_event_per_request_and_an_itl_csv(fake_router, tmp_path):
    def fail(served):  # one session stalls past the deadline; every third turn gets HTTP 503
        if served.request_id == "s1-t1":
            return "stall"
        return "http" if served.request_id.endswith("-t2") else None

    fake_router.fail = fail
    env = os.environ | {"PDD_WORKLOAD": "agentic:context=2K,output=8..16,think=0,turns=5", "PDD_SEED": "1",
                        "PDD_TIMEOUT_S": "0.5"}
    env.pop("PDD_LOAD_SHAPE", None)
    process = await asyncio.create_subprocess_exec(
        str(LOCUST), "-f", "loadgen/locustfile.py", "--headless", "-u", "4", "-r", "4", "-t", "3s",
        "--csv", str(tmp_path / "run"), "--host", fake_router.url, "--exit-code-on-error", "0",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=90)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()[-2000:]
    with open(tmp_path / "run_stats.csv", newline="") as stats:
        rows = {(row["Type"], row["Name"]): row for row in csv.DictReader(stats)}
    for kind in ("TTFT", "TPOT", "ITL", "E2E"):
        assert int(rows[(kind, "/v1/completions")]["Request Count"]) > 0, kind
    e2e = rows[("E2E", "/v1/completions")]
    assert int(e2e["Failure Count"]) > 0
    assert int(rows[("POST", "/v1/completions")]["Failure Count"]) == int(e2e["Failure Count"])
    failures_csv = (tmp_path / "run_failures.csv").read_text()
    assert "HTTP 503: no capacity" in failures_csv
    assert "no complete answer within 0.5s" in failures_csv
    ok = int(e2e["Request Count"]) - int(e2e["Failure Count"])
    assert int(rows[("TPOT", "/v1/completions")]["Request Count"]) == ok
    assert int(rows[("ITL", "/v1/completions")]["Request Count"]) == ok  # one event per request, not per gap
    requests = int(rows[("POST", "/v1/completions")]["Request Count"])
    assert all(int(rows[(kind, "/v1/completions")]["Request Count"]) <= requests for kind in ("TTFT", "E2E"))
    with open(tmp_path / "run_itl.csv", newline="") as itl:
        gaps = next(csv.DictReader(itl))
    assert int(gaps["Gap Count"]) >= 7 * ok  # every gap of 8..16 tokens, in the CSV
    assert float(gaps["p50 (ms)"]) <= float(gaps["p99 (ms)"]) <= float(gaps["Max (ms)"])
    assert any(s.request_id.endswith("-t1") for s in fake_router.served)  # sessions continued


SHAPE_PROBE = """
import os, sys
from loadgen.locust_shapes import selected_shape
shape = selected_shape()
if shape is None:
    print("none"); sys.exit()
probe = shape()
for t in (0, 15, 35, 65, 400):
    probe.get_run_time = lambda t=t: t
    print(probe.tick())
"""


def probe_shape(**env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PDD_")} | env
    return subprocess.run([sys.executable, "-c", SHAPE_PROBE], cwd=ROOT, env=environment, capture_output=True,
                          text=True, timeout=60)


def ticks(**env: str) -> list[str]:
    result = probe_shape(**env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_no_shape_unless_asked():
    assert ticks() == ["none"]


def test_step_shape_climbs_to_its_ceiling_then_ends():
    steps = ticks(PDD_LOAD_SHAPE="step", PDD_STEP_USERS="2", PDD_STEP_SECONDS="30", PDD_STEP_MAX="5",
                  PDD_SHAPE_SECONDS="300")
    assert steps == ["(2, 2.0)", "(2, 2.0)", "(4, 2.0)", "(5, 2.0)", "None"]


def test_burst_shape_rises_in_the_last_seconds_of_each_period():
    bursts = ticks(PDD_LOAD_SHAPE="burst", PDD_BURST_BASE="1", PDD_BURST_PEAK="8", PDD_BURST_EVERY="40",
                   PDD_BURST_SECONDS="10")
    assert bursts == ["(1, 8.0)", "(1, 8.0)", "(8, 8.0)", "(1, 8.0)", "None"]


def test_unknown_shape_is_refused():
    result = probe_shape(PDD_LOAD_SHAPE="zigzag")
    assert result.returncode != 0
    assert "PDD_LOAD_SHAPE='zigzag' is not a load shape; use one of step, burst" in result.stderr
