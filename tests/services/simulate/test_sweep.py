"""Sweeps on a local Ray: one simulation per task, written as the mesh sweep writes them, the same records as in-process."""

from __future__ import annotations

import json

from loadgen.bench.records import read_records
from loadgen.report import build_report
from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation
from services.simulate.sweep import SimulatedSweep, run_on_ray

WORKLOAD = "agentic:context=4K,output=16..64,think=200ms,turns=3"


def test_a_population_sweep_on_a_local_ray_writes_bench_outputs_and_the_sweep(tmp_path):
    scenario = load_scenario("pdd-mini")
    sweep = SimulatedSweep(scenario, WORKLOAD, duration_s=3.0, seed=5, concurrencies=(4, 2))
    result = run_on_ray(sweep, tmp_path, num_cpus=2)
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert [p["concurrency"] for p in saved["concurrencies"]] == [2, 4]
    assert saved["max_goodput_concurrency"] == result.max_goodput_rate
    # Each task ran exactly the simulation this process would: the same records, to the last digit.
    alone = run_simulation(scenario, WORKLOAD, concurrency=4, duration_s=3.0, seed=5)
    assert read_records(tmp_path / "concurrency-4" / "requests.jsonl") == [
        json.loads(r.to_json_line()) for r in alone.records]
    summary = json.loads((tmp_path / "concurrency-4" / "summary.json").read_text())
    assert summary["completed"] == alone.summary["completed"] > 0 and summary["emulated_s"] > 0
    report = build_report([tmp_path / "concurrency-2", tmp_path / "concurrency-4"], tmp_path / "again")
    assert report.index.is_file()  # `pdd-emu report` reads the points unchanged
