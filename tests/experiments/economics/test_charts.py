"""The economics figures are drawn from the method's data (a PNG each)."""

from __future__ import annotations

import asyncio

from services.experiments.economics import charts
from services.experiments.economics.search import bisect_knee
from services.experiments.economics.sensitivity import tornado
from tests.experiments.economics.synthetic import AnalyticCurve

PNG = b"\x89PNG"


def test_every_chart_writes_a_png(tmp_path):
    knees = {key: asyncio.run(bisect_knee(AnalyticCurve(k, 3.0), 10.0)) for key, k in (("a", 30.0), ("b", 45.0))}
    bars = tornado(0.2, {"line price": (0.18, 0.22), "KV bytes per token": (-0.1, None)})
    paths = [charts.plot_goodput_curves(knees, tmp_path / "g.png"),
             charts.plot_ttfts({"a": [0.5, 1.0, 2.0]}, 5.0, tmp_path / "t.png"),
             charts.plot_tornado("bcr_gain", 0.2, bars, tmp_path / "tornado.png"),
             charts.plot_bcr_bars({"baseline": 0.03, "pdd-b-tp8": None}, tmp_path / "bcr.png")]
    for path in paths:
        assert path.read_bytes()[:4] == PNG
