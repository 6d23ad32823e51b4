"""The live page's figures from the router's own counters: totals, rates over a window, exact percentiles."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from services.launcher.plan import build_plan
from services.router.dashboard.window import Totals, degraded_since, figures, latency, rates, router_totals
from services.router.server import Router
from services.scenario import load_scenario
from services.scenario.model import SlaSpec

SLA = SlaSpec(ttft_s=1.0, tpot_s=0.05)


def _pdd(pipeline: str, rld: int, md: int, degraded: str | None = None) -> dict:
    return {"mode": "pdd", "pipeline": pipeline, "wan_bytes": 0, "kv_transfer_s": 0.0, "rld_tokens": rld,
            "md_tokens": md, "prefill_hit_tokens": 0, "decode_hit_tokens": 0, "degraded": degraded}


def test_totals_read_the_routers_counters_and_metrics_in_memory():
    router = Router(build_plan(load_scenario("pdd-mini")), CollectorRegistry())
    router.completed = 3
    router.metrics.finished(_pdd("P-RLD-MD", 20, 80), 100, 100, ttft_s=0.5, e2e_s=1.5)
    router.metrics.finished(_pdd("P-MD", 0, 50), 100, 50, ttft_s=0.2, e2e_s=0.7)
    router.metrics.finished(_pdd("P-MD", 0, 50, degraded="main-decode-failed"), 100, 50, ttft_s=0.2, e2e_s=0.7)
    for status in ("429", "502", "client_closed"):
        router.metrics.errors.labels(status).inc()
    totals = router_totals(router)
    assert totals == Totals(completed=3, errors=2, rld_tokens=20, md_tokens=180,
                            pipelines={"P-RLD-MD": 1, "P-MD": 2}, degraded={"main-decode-failed": 1})


def test_finished_requests_keep_their_exact_ttft_and_tpot_for_the_page():
    router = Router(build_plan(load_scenario("pdd-mini")), CollectorRegistry())
    router.metrics.finished(_pdd("P-MD", 0, 11), 100, 11, ttft_s=0.25, e2e_s=1.25)
    router.metrics.finished(_pdd("P-MD", 0, 1), 100, 1, ttft_s=0.5, e2e_s=0.5)  # one token: no TPOT
    assert [(ttft, tpot) for _, ttft, tpot in router.metrics.recent] == [(0.25, pytest.approx(0.1)), (0.5, None)]


def test_rates_are_per_second_over_the_window_and_the_relay_share_is_of_the_tokens_made_in_it():
    then = Totals(completed=10, errors=1, rld_tokens=100, md_tokens=900, pipelines={"P-MD": 10})
    now = Totals(completed=30, errors=1, rld_tokens=400, md_tokens=1500, pipelines={"P-MD": 16, "P-RLD-MD": 4})
    figures = rates(now, then, elapsed_s=10.0)
    assert figures == {"rps": 2.0, "errors_ps": 0.0, "rld_share": pytest.approx(300 / 900),
                       "pipelines": {"P-MD": 6, "P-RLD-MD": 4}}
    assert rates(then, then, 10.0)["rld_share"] is None  # no token made: no share, not 0%


def test_percentiles_are_numpys_over_the_requests_of_the_window_only():
    old = [(1.0, 9.0, 0.9)]  # finished before the window: its 9 s TTFT must not count
    ttfts = [0.1, 0.2, 0.4, 0.8, 1.6]
    recent = old + [(10.0 + i, ttft, 0.01 * (i + 1)) for i, ttft in enumerate(ttfts)]
    window = latency(recent, since=5.0, sla=SLA)
    assert window["requests"] == 5
    assert window["ttft"] == pytest.approx(dict(zip(("p50", "p90", "p99"), np.percentile(ttfts, [50, 90, 99]))))
    assert window["tpot"]["p99"] == pytest.approx(np.percentile([0.01, 0.02, 0.03, 0.04, 0.05], 99))
    # 1.6 s misses the TTFT limit; every TPOT (at most 0.05 s) meets its own.
    assert window["sla_met"] == pytest.approx(4 / 5)


def test_goodput_is_the_request_rate_times_the_share_that_met_the_sla():
    recent = [(1.0, 0.1, 0.01), (2.0, 9.0, 0.01)]  # one of two answers meets the SLA
    window = figures(Totals(completed=12), Totals(completed=2), recent, since=0.0, elapsed_s=10.0, sla=SLA)
    assert window["rps"] == 1.0 and window["goodput"] == 0.5
    assert figures(Totals(), Totals(), [], 0.0, 10.0, SLA)["goodput"] == 0.0


def test_a_slow_tpot_misses_the_sla_and_a_one_token_answer_is_judged_on_ttft_alone():
    recent = [(1.0, 0.1, 0.2), (2.0, 0.1, None)]
    assert latency(recent, since=0.0, sla=SLA)["sla_met"] == 0.5


def test_an_empty_window_has_no_percentiles_and_no_share():
    assert latency([], since=0.0, sla=SLA) == {"requests": 0, "ttft": None, "tpot": None, "sla_met": None}


def test_new_degraded_answers_are_one_event_line_by_kind():
    before = Totals(degraded={"main-decode-failed": 1})
    now = Totals(degraded={"main-decode-failed": 3, "prefill-unreachable": 1})
    assert degraded_since(now, before) == "3 answers degraded since the last sample: 2 main-decode-failed, " \
                                          "1 prefill-unreachable"
    assert degraded_since(now, now) is None
