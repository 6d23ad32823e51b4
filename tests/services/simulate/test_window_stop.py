"""A run stops sending at its window's budget, or once its window's SLA verdict cannot change."""

from __future__ import annotations

import dataclasses

import pytest

from loadgen.summary import SlaConfig, meets_sla
from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation
from services.simulate.window_stop import WindowStop, decisive_misses

WORKLOAD = "poisson:input=3000,output=48"
START_S = 2.0


def _run(stop: WindowStop | None, users: int = 4):
    return run_simulation(load_scenario("pd-intra-mini"), WORKLOAD, concurrency=users, duration_s=20.0, seed=1,
                          stop=stop)


def _ended_before(run, t: float) -> list[dict]:
    """The records of requests that ended before `t`: up to a stop, a stopped run is the whole run."""
    return [dataclasses.asdict(r) for r in run.records if r.send_s + r.elapsed_s < t]


def _in_window(run, start: float, end: float) -> list[dict]:
    return [r.row() for r in run.records if start <= r.send_s < end]


@pytest.mark.parametrize("requests, threshold", [(3000, 0.9), (40, 0.9), (7, 0.5), (1, 0.9)])
def test_the_decisive_misses_are_the_fewest_that_fail_the_window(requests, threshold):
    m = decisive_misses(requests, threshold)
    assert (requests - m) / requests < threshold <= (requests - m + 1) / requests


def test_decisive_misses_for_the_economics_window():
    assert decisive_misses(3000, 0.9) == 301  # 2700 of 3000 within the SLA is 90%: it passes


def test_a_run_stops_sending_once_its_window_holds_its_requests():
    whole = _run(None)
    stop = WindowStop(START_S, 10)
    stopped = _run(stop)
    sends = sorted(r.send_s for r in stopped.records if r.send_s >= START_S)
    assert len(sends) > 10 and all(s == sends[10] for s in sends[10:])  # the window [2 s, sends[10]) holds 10
    assert len(stopped.records) < len(whole.records) and stopped.summary["emulated_s"] < 20.0
    assert stop.stopped_s is None and stop.window_end(sends[10]) == sends[10]
    # Up to the stop the run is the whole run's: a request that ended before it is the same request
    # (one still running then finishes under the lighter load of a run that sends nothing more).
    assert len(_ended_before(whole, sends[10])) > 10
    assert _ended_before(stopped, sends[10]) == _ended_before(whole, sends[10])


def _median_ttft(run) -> float:
    ttfts = sorted(r.ttft_s for r in run.records if r.send_s >= START_S and r.ttft_s is not None)
    return ttfts[len(ttfts) // 2]


def test_a_window_that_must_fail_stops_at_its_decisive_miss_with_the_whole_windows_verdict():
    budget = 60
    whole = _run(WindowStop(START_S, budget), users=8)
    sla = SlaConfig(ttft_s=_median_ttft(whole), tpot_s=10.0)  # about half the requests miss it
    sends = sorted(r.send_s for r in whole.records if r.send_s >= START_S)
    full = _in_window(whole, START_S, sends[budget])
    assert sum(meets_sla(r, sla) for r in full) / len(full) < 0.9  # the whole window fails

    stop = WindowStop(START_S, budget, sla, 0.9)
    stopped = _run(stop, users=8)
    assert stop.stopped_s is not None and stop.missed == decisive_misses(budget, 0.9) == 7
    end = stop.window_end(sends[budget])
    window = _in_window(stopped, START_S, end)
    assert len(window) < budget and max(r.send_s for r in stopped.records) <= stop.stopped_s
    assert sum(not meets_sla(r, sla) for r in window) >= 7
    assert sum(meets_sla(r, sla) for r in window) / len(window) < 0.9  # the same verdict, in fewer requests
    assert _ended_before(stopped, stop.stopped_s) == _ended_before(whole, stop.stopped_s)


def test_a_window_within_its_sla_runs_its_whole_budget():
    budget = 60
    sla = SlaConfig(ttft_s=60.0, tpot_s=10.0)
    plain, judged = WindowStop(START_S, budget), WindowStop(START_S, budget, sla, 0.9)
    assert [dataclasses.asdict(r) for r in _run(plain).records] == [dataclasses.asdict(r) for r in _run(judged).records]
    assert judged.missed == 0 and judged.stopped_s is None and judged.sent == plain.sent == budget + 1


def test_a_window_needs_a_request():
    with pytest.raises(ValueError, match="at least one request"):
        WindowStop(START_S, 0)
