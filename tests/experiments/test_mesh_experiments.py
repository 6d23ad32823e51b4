"""The quick variants that start meshes: each effect must point the way the PDD report found it."""

from __future__ import annotations

import pytest

from tests.experiments.cli import quick_headline

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_quick_paper_pdd_beats_cross_dc_tail_and_baseline_bcr(tmp_path):
    headline = quick_headline("paper", tmp_path)
    assert headline["ttft_p99_reduction"] > 0  # PDD's P99 TTFT below cross-DC PD's
    assert headline["bcr_gain"] > 0  # PDD's BCR above the homogeneous baseline's
    assert 0 < headline["rld_token_share"] < 0.5  # the relay stays a minority


def test_quick_handoff_token_ids_are_steadier_than_kv_shipping(tmp_path):
    headline = quick_headline("handoff", tmp_path)
    assert headline["token_ids"]["std_s"] < headline["kv_ship"]["std_s"]


def test_quick_wan_measures_both_distributions(tmp_path):
    headline = quick_headline("wan", tmp_path)
    for name in ("skewed", "narrow"):
        assert 0 < headline[name]["p50_s"] <= headline[name]["p99_s"]
