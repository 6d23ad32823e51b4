"""The knee's validity checks on synthetic stats: each bar flips its own verdict and no other."""

from __future__ import annotations

import dataclasses

import pytest

from services.experiments.economics.loadpoint import PointStats
from services.experiments.economics.validity import failed, verdicts

HEALTHY = PointStats(prefill_busy=0.5, prefill_hit=0.88, planned_hit=0.9, md_batch_mean=40.0, md_kv_usage=0.6,
                     wan_utilisation=0.7, rld_queue_max=2, rld_token_share=0.06,
                     pipelines={"P-MD": 80, "P-RLD-MD": 17, "P-RLD": 3})


def test_a_healthy_knee_passes_every_check():
    assert all(v.ok for v in verdicts(HEALTHY)) and failed(HEALTHY) == []
    assert HEALTHY.singular_share == pytest.approx(0.03)


@pytest.mark.parametrize("change,says", [
    ({"prefill_busy": 0.75}, "prefill bound"),
    ({"prefill_hit": 0.80}, "cache off the workload's plan"),
    ({"md_kv_usage": 0.97}, "decode KV bound"),
    ({"wan_utilisation": 1.02}, "line bound"),
    ({"rld_queue_max": 30}, "relay overloaded"),
    ({"rld_token_share": 0.6}, "relay overloaded"),
    ({"pipelines": {"P-MD": 80, "P-RLD": 20}}, "singular traffic is not rare"),
])
def test_each_bar_names_what_bound_the_point(change, says):
    assert failed(dataclasses.replace(HEALTHY, **change)) == [says]


def test_a_deployment_without_relay_or_line_reports_not_applicable():
    intra = PointStats(prefill_busy=0.4, prefill_hit=0.9, planned_hit=0.9, md_batch_mean=20.0, md_kv_usage=0.3,
                       pipelines={"P-D": 100})
    by_name = {v.name: v for v in verdicts(intra)}
    assert by_name["WAN utilisation"].ok is None and by_name["RLD queue and share"].ok is None
    assert by_name["singular share"].ok is True  # no request ended on a relay
    assert "n/a" in by_name["WAN utilisation"].line() and failed(intra) == []
