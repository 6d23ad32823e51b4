"""The simulator as a load-point backend: a window's point from the simulated run's own records and counters."""

from __future__ import annotations

import json

from services.experiments.economics.loadpoint import PointResult
from services.experiments.economics.simpoint import SimulatedPoints, run_folder
from services.scenario import load_scenario

WORKLOAD = "agentic:context=8K,output=64..128,turns=4"


async def test_a_point_summarises_the_requests_sent_in_its_window(tmp_path):
    scenario = load_scenario("pdd-mini")
    point = await SimulatedPoints(tmp_path, warmup_s=10.0, measure_s=20.0).run_point(scenario, WORKLOAD, 4, seed=3)
    window_dir = tmp_path / run_folder(scenario, WORKLOAD, 3) / "users-4"
    records = [json.loads(line) for line in (window_dir / "requests.jsonl").read_text().splitlines()]
    assert point.load == 4 and point.seed == 3 and point.sent == len(records) > 0
    assert all(0 <= r["send_s"] < 20.0 for r in records)  # re-based to the window's start
    assert sum(point.stats.pipelines.values()) == point.sent
    assert point.request_rate_rps == point.sent / 20.0
    assert 0 < point.stats.prefill_busy < 1 and point.stats.md_batch_mean > 0
    assert point.stats.wan_utilisation is not None  # pdd-mini's main decode is across the WAN
    assert len(point.ttfts_s) == sum(r["ttft_s"] is not None for r in records)
    assert point.ttft_s.p50 <= point.ttft_s.p99


async def test_an_open_loop_point_offers_its_load_as_a_request_rate(tmp_path):
    scenario = load_scenario("pd-intra-mini")
    points = SimulatedPoints(tmp_path, warmup_s=5.0, measure_s=20.0, open_loop=True)
    point = await points.run_point(scenario, WORKLOAD, 3.0, seed=0)
    assert (tmp_path / run_folder(scenario, WORKLOAD, 0) / "rate-3").is_dir()
    assert point.load == 3.0 and 40 <= point.sent <= 80  # 60 expected, Poisson arrivals
    assert points.settings()["open_loop"] is True and "open_loop" not in SimulatedPoints(tmp_path).settings()


async def test_the_same_point_twice_is_the_same_point(tmp_path):
    scenario = load_scenario("pd-intra-mini")
    runs = [await SimulatedPoints(tmp_path / str(i), warmup_s=5.0, measure_s=10.0).run_point(scenario, WORKLOAD, 3, 0)
            for i in range(2)]
    assert runs[0] == runs[1]


async def test_a_point_run_by_a_worker_process_is_the_point_run_here(tmp_path):
    scenario = load_scenario("pd-intra-mini")
    here = await SimulatedPoints(tmp_path / "here", warmup_s=5.0, measure_s=10.0).run_point(scenario, WORKLOAD, 3, 0)
    workers = SimulatedPoints(tmp_path / "ray", warmup_s=5.0, measure_s=10.0, workers=2)
    try:
        assert workers.parallel
        assert await workers.run_point(scenario, WORKLOAD, 3, 0) == here
    finally:
        workers.close()
    assert (tmp_path / "ray" / run_folder(scenario, WORKLOAD, 0) / "users-3" / "summary.json").is_file()


async def test_a_window_ends_with_its_last_request_when_that_comes_first(tmp_path):
    scenario = load_scenario("pd-intra-mini")
    points = SimulatedPoints(tmp_path, warmup_s=5.0, measure_s=60.0, window_requests=12)
    point = await points.run_point(scenario, WORKLOAD, 4, seed=0)
    records = [json.loads(line) for line in
               (tmp_path / run_folder(scenario, WORKLOAD, 0) / "users-4" / "requests.jsonl").read_text().splitlines()]
    assert point.sent == len(records) == 12
    window_s = point.sent / point.request_rate_rps
    assert max(r["send_s"] for r in records) < window_s < 60.0  # re-based send times, inside the short window


async def test_a_point_is_the_same_point_after_a_round_trip_through_json(tmp_path):
    point = await SimulatedPoints(tmp_path, warmup_s=5.0, measure_s=10.0).run_point(
        load_scenario("pdd-mini"), WORKLOAD, 3, 0)
    assert PointResult.from_dict(json.loads(json.dumps(point.as_dict()))) == point


async def test_a_window_that_must_fail_ends_at_its_verdict_unless_asked_whole(tmp_path):
    # a TTFT limit no request meets: the 12-request window fails at its second miss (11 of 12 pass 90%)
    scenario = load_scenario("pd-intra-mini", ("sla.ttft_s=0.001",))
    points = SimulatedPoints(tmp_path, warmup_s=5.0, measure_s=60.0, window_requests=12)
    stopped = await points.run_point(scenario, WORKLOAD, 4, seed=0)
    whole = await points.run_point(scenario, WORKLOAD, 4, seed=0, whole=True)
    assert stopped.stopped_at_verdict and not whole.stopped_at_verdict
    assert stopped.attainment == whole.attainment == 0.0  # the same verdict
    assert 2 <= stopped.sent < whole.sent == 12
    folder = tmp_path / run_folder(scenario, WORKLOAD, 0)
    assert (folder / "users-4" / "summary.json").is_file() and (folder / "users-4-whole" / "summary.json").is_file()


def test_a_sensitivity_case_writes_its_points_apart_from_the_base(tmp_path):
    base = load_scenario("pdd-mini")
    case = load_scenario("pdd-mini", ("pdd.transfer_threshold_s=0.25",))
    folders = {run_folder(base, WORKLOAD, 0), run_folder(case, WORKLOAD, 0), run_folder(base, WORKLOAD + ",turns=3", 0),
               run_folder(base, WORKLOAD, 1)}
    assert len(folders) == 4 and all(f.startswith("pdd-mini-") for f in folders)
    assert run_folder(load_scenario("pdd-mini", ("wan_price_per_hour=9",)), WORKLOAD, 0) == run_folder(base, WORKLOAD, 0)
