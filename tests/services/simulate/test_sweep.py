"""`pdd-emu sweep --simulate` on a local Ray: one simulation per task, written as the mesh sweep writes them.

The sweep runs in a child process, as a person runs it: Ray's driver threads then live and die with it,
never beside the simulations of this test process, whose clocks are swapped (`process_clocks`).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadgen.bench.records import read_records
from loadgen.report import build_report
from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation
from tests.raycluster import RAY_DEADLINE_S, ray_cluster  # noqa: F401 (a fixture)

WORKLOAD = "agentic:context=4K,output=16..64,think=200ms,turns=3"


@pytest.mark.slow
def test_a_population_sweep_on_a_local_ray_writes_bench_outputs_and_the_sweep(tmp_path):
    done = subprocess.run([sys.executable, "-m", "services.cli", "sweep", "--simulate", "--scenario", "pdd-mini",
                           "--workload", WORKLOAD, "--concurrencies", "4,2", "--duration", "3s", "--seed", "5",
                           "--num-cpus", "2", "--out", str(tmp_path), "--no-progress"],
                          capture_output=True, text=True, timeout=RAY_DEADLINE_S)
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert [p["concurrency"] for p in saved["concurrencies"]] == [2, 4]
    assert saved["max_goodput_concurrency"] in (2, 4, None)
    assert "max goodput concurrency" in done.stdout or "no concurrency kept" in done.stdout
    # Each task ran exactly the simulation this process runs: the same records, to the last digit.
    alone = run_simulation(load_scenario("pdd-mini"), WORKLOAD, concurrency=4, duration_s=3.0, seed=5)
    assert read_records(tmp_path / "concurrency-4" / "requests.jsonl") == [
        json.loads(r.to_json_line()) for r in alone.records]
    summary = json.loads((tmp_path / "concurrency-4" / "summary.json").read_text())
    assert summary["completed"] == alone.summary["completed"] > 0 and summary["emulated_s"] > 0
    report = build_report([tmp_path / "concurrency-2", tmp_path / "concurrency-4"], tmp_path / "again")
    assert report.index.is_file()  # `pdd-emu report` reads the points unchanged


def _sweep_at_two(out, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pdd-emu sweep --simulate` of pdd-mini at concurrency 2, as a person runs it."""
    return subprocess.run([sys.executable, "-m", "services.cli", "sweep", "--simulate", "--scenario", "pdd-mini",
                           "--workload", WORKLOAD, "--concurrencies", "2", "--duration", "3s", "--seed", "5",
                           *options, "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=RAY_DEADLINE_S)


def _assert_still_up(ray: str, address: str, env: dict) -> None:
    status = subprocess.run([ray, "status", "--address", address], capture_output=True, text=True, env=env,
                            timeout=RAY_DEADLINE_S)
    assert status.returncode == 0, status.stderr


@pytest.mark.slow
def test_a_sweep_joins_a_cluster_only_by_address_and_leaves_it_running(tmp_path, ray_cluster):
    address, env, ray = ray_cluster
    done = _sweep_at_two(tmp_path / "out", "--ray-address", address, env=env)
    assert done.returncode == 0, done.stderr
    alone = run_simulation(load_scenario("pdd-mini"), WORKLOAD, concurrency=2, duration_s=3.0, seed=5)
    assert read_records(tmp_path / "out" / "concurrency-2" / "requests.jsonl") == [
        json.loads(r.to_json_line()) for r in alone.records]
    _assert_still_up(ray, address, env)  # joined, not started: the cluster outlives the sweep
    # Without --ray-address a sweep starts a Ray of its own, even with the cluster's address in
    # RAY_ADDRESS (or in the address file `ray start` leaves): Ray would otherwise join the cluster,
    # and refuse --num-cpus there. Stopping its own Ray leaves the cluster up.
    local = _sweep_at_two(tmp_path / "local", "--num-cpus", "1", env=env | {"RAY_ADDRESS": address})
    assert local.returncode == 0, local.stderr
    assert read_records(tmp_path / "local" / "concurrency-2" / "requests.jsonl") == read_records(
        tmp_path / "out" / "concurrency-2" / "requests.jsonl")
    _assert_still_up(ray, address, env)


def test_a_sweep_without_ray_installed_says_which_extra_to_install(monkeypatch):
    from services.simulate.sweep import RayMissing, import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    with pytest.raises(RayMissing, match=r"pdd-emu\[sweep\]"):
        import_ray()
