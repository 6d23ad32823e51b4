"""simulate_run: the bench's records from the in-process mesh, deterministic, on every mode family."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import services.scenario

from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation
from services.simulate.wiring import simulated_plan

WORKLOAD = "poisson:input=3000,output=48"
PRESETS = Path(services.scenario.__file__).parent / "presets"


def _records(preset: str, seed: int = 3) -> list[dict]:
    run = run_simulation(load_scenario(preset), WORKLOAD, rate=3.0, duration_s=4.0, seed=seed)
    return [dataclasses.asdict(r) for r in run.records]


def test_same_inputs_give_identical_records():
    first, second = _records("pdd-mini"), _records("pdd-mini")
    assert len(first) > 5
    assert first == second  # timings, tokens, pipelines and the pdd timeline, to the last digit


def test_a_run_keeps_its_prompts_only_when_asked_and_its_records_either_way():
    kept = run_simulation(load_scenario("pdd-mini"), WORKLOAD, rate=3.0, duration_s=4.0, seed=3, keep_plans=True)
    plain = run_simulation(load_scenario("pdd-mini"), WORKLOAD, rate=3.0, duration_s=4.0, seed=3)
    assert plain.plans == {} and set(kept.plans) == {r.id for r in kept.records}
    assert all(len(plan.prompt) == 3000 for plan in kept.plans.values())
    assert [dataclasses.asdict(r) for r in plain.records] == [dataclasses.asdict(r) for r in kept.records]


def test_another_seed_gives_other_arrivals():
    assert [r["send_s"] for r in _records("pdd-mini", seed=4)] != [r["send_s"] for r in _records("pdd-mini")]


@pytest.mark.parametrize("preset", ["colocated-mini", "pd-intra-mini", "pd-cross-mini", "pdd-kvship-mini"])
def test_every_mode_family_completes_its_requests(preset):
    records = _records(preset)
    assert records and all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    assert all(r["output_tokens"] == 48 and r["pdd"]["mode"] for r in records)


@pytest.mark.parametrize("preset", sorted(p.stem for p in PRESETS.glob("*.yaml")))
def test_every_preset_simulates(preset):
    run = run_simulation(load_scenario(preset), "poisson:input=2000,output=16", rate=2.0, duration_s=2.0, seed=1)
    assert run.records and all(r.status == "ok" and r.output_tokens == 16 for r in run.records), \
        [r.error for r in run.records]


def test_snapshots_hold_each_service_stats():
    run = run_simulation(load_scenario("pdd-mini"), WORKLOAD, rate=3.0, duration_s=3.0, seed=1, stats_every_s=1.0)
    times = [t for t, _ in run.snapshots]
    assert times[:3] == [1.0, 2.0, 3.0] and times == sorted(times)
    last = run.snapshots[-1][1]
    assert last["router"]["completed"] == len(run.records)
    plan = simulated_plan(load_scenario("pdd-mini"))
    assert {s.name for s in plan.services} | {link.name for link in plan.links} == set(last)
    roles = {last[s.name]["role"] for s in plan.services if s.name != "router"}
    assert roles == {"prefill", "relay-decode", "main-decode"}
    assert sum(stats["transfers_completed"] for name, stats in last.items() if "transfers_completed" in stats) > 0
    assert run.summary["speedup"] > 0 and run.summary["wall_s"] > 0
    # The pace of the run: the CPU time spent by each snapshot, for the speed of a window
    assert [t for t, _ in run.pace] == times[: len(run.pace)] and len(run.pace) >= len(times) - 1
    cpu = [c for _, c in run.pace]
    assert cpu == sorted(cpu) and cpu[-1] > cpu[0]


def test_a_record_row_is_its_fields():
    record = run_simulation(load_scenario("pd-intra-mini"), WORKLOAD, rate=3.0, duration_s=1.0, seed=1).records[0]
    assert record.row() == dataclasses.asdict(record)  # what summaries read, without asdict's deep copy


def test_cli_writes_bench_outputs_and_refuses_bad_input(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "services.cli", "simulate", "--scenario", "pd-intra-mini",
                           "--workload", WORKLOAD, "--rate", "2", "--duration", "3s", "--out", str(out),
                           "--json", "--no-progress"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["completed"] == len((out / "requests.jsonl").read_text().splitlines()) > 0
    assert json.loads((out / "summary.json").read_text())["speedup"] == summary["speedup"]
    bad = subprocess.run([sys.executable, "-m", "services.cli", "simulate", "--scenario", "no-such-preset",
                          "--workload", WORKLOAD, "--rate", "2", "--duration", "3s", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown scenario" in bad.stderr
    ramp = subprocess.run([sys.executable, "-m", "services.cli", "simulate", "--scenario", "pd-intra-mini",
                           "--workload", WORKLOAD, "--rate", "2", "--ramp", "5s", "--duration", "3s", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert ramp.returncode == 2 and "--ramp" in ramp.stderr and "--concurrency" in ramp.stderr


def test_two_processes_with_other_hash_seeds_write_identical_records(tmp_path):
    """Set and dict orders of strings change with PYTHONHASHSEED; nothing the records hold may follow them."""
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        done = subprocess.run([sys.executable, "-m", "services.cli", "simulate", "--scenario", "pdd-mini",
                               "--workload", "poisson:input=1000..20000,output=40", "--rate", "4", "--duration", "4s",
                               "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONHASHSEED": hash_seed})
        assert done.returncode == 0, done.stderr
        outputs.append((out / "requests.jsonl").read_text())
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 5


REFUSED_USERS = """
import json, sys
from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation
run = run_simulation(load_scenario("pd-intra-mini", ["max_inflight=2"]), "poisson:input=500,output=32",
                     concurrency=6, duration_s=5.0, seed=1)
print(json.dumps([[r.send_s, r.http_status, r.status] for r in run.records]))
"""


def test_users_the_router_refuses_pause_and_the_clock_moves_on():
    # A refusal takes no emulated time: users that resent at once would spin without the clock moving on,
    # so the run is a child process with a deadline.
    done = subprocess.run([sys.executable, "-c", REFUSED_USERS], capture_output=True, text=True, timeout=240,
                          cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads(done.stdout.splitlines()[-1])
    refused = [send_s for send_s, status, _ in records if status == 429]
    assert refused and any(status == "ok" for _, _, status in records)
    # four users beyond the cap of two, each refused at most once per 0.5 s pause over 5 s
    assert len(refused) <= 4 * (5.0 / 0.5 + 1)


def test_a_ramped_population_joins_over_the_ramp():
    # poisson in closed loop: each user sends one request after another, so its first send is when it joined
    at_once = run_simulation(load_scenario("pd-intra-mini"), WORKLOAD, concurrency=8, duration_s=4.0, seed=1)
    ramped = run_simulation(load_scenario("pd-intra-mini"), WORKLOAD, concurrency=8, duration_s=4.0, seed=1,
                            ramp_s=0.08)  # shorter than a request, so the first 8 sends are the joins
    assert sorted(r.send_s for r in at_once.records)[:8] == [0.0] * 8
    joins = sorted(r.send_s for r in ramped.records)[:8]
    assert joins == pytest.approx([i * 0.08 / 8 for i in range(8)], abs=1e-6)


def test_a_run_tunes_the_collector_freezes_what_lived_before_and_restores_both(monkeypatch):
    import gc

    from services.simulate import run as run_module

    seen = []
    real = run_module.simulate_run

    async def spy(*args, **kwargs):
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return await real(*args, **kwargs)

    monkeypatch.setattr(run_module, "simulate_run", spy)
    before = gc.get_threshold()
    run_simulation(load_scenario("colocated-mini"), WORKLOAD, rate=2.0, duration_s=1.0, seed=1)
    assert seen == [(run_module.SIMULATION_GC_THRESHOLDS, True)]  # what lived before the run is frozen
    assert before != run_module.SIMULATION_GC_THRESHOLDS
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_run_leaves_a_freeze_it_did_not_make():
    import gc

    gc.freeze()
    made_after_the_freeze = []
    try:
        frozen = gc.get_freeze_count()
        run_simulation(load_scenario("colocated-mini"), WORKLOAD, rate=2.0, duration_s=1.0, seed=1)
        # Not unfrozen, and nothing frozen anew: the count can only fall, as frozen objects are
        # freed during the run (an evicted cache entry), and a younger object is still collectable.
        assert 0 < gc.get_freeze_count() <= frozen
        assert any(o is made_after_the_freeze for o in gc.get_objects())
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("preset,overrides", [("pdd-mini", ["pdd.transfer_threshold_s=1ms"]), ("colocated-mini", []),
                                              ("pd-intra-mini", ["request_timeout_s=0.3"])])
def test_streams_read_at_their_ends_give_the_records_of_streams_read_token_by_token(monkeypatch, preset, overrides):
    def records(lazy: bool) -> list[dict]:
        monkeypatch.setattr("services.simulate.wiring.LAZY_TOKENS", lazy)
        run = run_simulation(load_scenario(preset, overrides), WORKLOAD, rate=3.0, duration_s=4.0, seed=5)
        return [dataclasses.asdict(r) for r in run.records]

    lazy, eager = records(True), records(False)
    assert lazy == eager and len(lazy) > 5
    if preset == "pdd-mini":  # relayed: finished on the relay, or handed off to main decode at a cut
        assert {r["pdd"]["pipeline"] for r in lazy} >= {"P-RLD", "P-RLD-MD"}
    if overrides == ["request_timeout_s=0.3"]:  # stopped mid-stream: the tokens that had come still count
        assert all("not finished within 0.3 s" in r["error"] and r["output_tokens"] > 1 for r in lazy)
