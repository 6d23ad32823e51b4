"""Report plots that can mislead: WAN throughput past the line rate, crowded labels, a squeezed CDF, labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.report.page import write_index
from loadgen.report.plots import draw_ttft_cdf, new_figure, throughput_buckets, transfer_intervals
from loadgen.report.runs import RunData
from loadgen.report.table import table_rows
from loadgen.summary import SlaConfig, summarize


def _record(i: int, ttft: float, pdd: dict | None = None) -> dict:
    return {"id": f"q{i}", "session": None, "turn": 0, "send_s": float(i), "send_unix": 1000.0 + i,
            "prompt_tokens": 10, "max_tokens": 3, "hit_rate": 0.0, "target_hit_rate": None, "status": "ok",
            "error": None, "http_status": 200, "output_tokens": 3, "ttft_s": ttft, "tpot_s": 0.01,
            "e2e_s": ttft + 0.02, "itl_s": [0.01, 0.01], "finish_reason": "length", "usage": None, "pdd": pdd}


def _run(records: list[dict], label: str = "pdd", rate: float | None = 2.0, concurrency: int | None = None,
         path: str = "run") -> RunData:
    summary = summarize(records, sla=SlaConfig(), workload="poisson", offered_rate=rate, concurrency=concurrency,
                        label=label)
    return RunData(Path(path), summary, records)


def test_each_transfer_is_spread_over_its_own_interval():
    pdd = {"wan_bytes": 1000, "kv_transfer_s": 0.5, "timeline": {"kv_arrived": 1002.0}}
    assert transfer_intervals(_run([_record(0, 2.1, pdd)])) == [(1.5, 2.0, 1000.0)]
    volume = throughput_buckets([(1.5, 2.0, 1000.0)], 0.25, 10)
    assert np.allclose(volume, [0, 0, 0, 0, 0, 0, 500, 500, 0, 0])


def test_throughput_never_exceeds_the_line_and_keeps_every_byte():
    rate_bps = 8e3  # 1000 bytes/s
    rng = np.random.default_rng(3)
    spans = []
    for _ in range(40):  # overlapping transfers, each at most line rate on its own
        start = float(rng.uniform(0, 10))
        size = float(rng.uniform(100, 2000))
        spans.append((start, start + size / 1000 * rng.uniform(1, 3), size))
    uncapped = throughput_buckets(spans, 0.25, 200)
    assert uncapped.max() > 250  # the overlaps alone would draw peaks above the line
    capped = throughput_buckets(spans, 0.25, 200, rate_bps)
    assert capped.max() <= 250 + 1e-9 and np.isclose(capped.sum(), sum(s for *_, s in spans))


def test_timeline_labels_never_overlap_when_stamps_crowd(tmp_path):
    """Stamps a millisecond apart: the lanes name the stages on the y axis, so no text prints over another."""
    from loadgen.report.timeline import plot_request_timeline
    from tests.figure_checks import drawn_figures, overlapping_texts

    base = 1000.0
    stamps = {"received": 0.0, "prefill_sent": 0.001, "prefill_done": 0.002, "relay_kv_arrived": 0.003,
              "first_token": 0.004, "kv_arrived": 5.0, "handoff_started": 5.001, "handoff_done": 5.002, "finished": 9.9}
    pdd = {"pipeline": "P-RLD-MD", "rld_tokens": 3, "handoff": {"mode": "one-shot", "stall_s": 0.001},
           "timeline": {name: base + t for name, t in stamps.items()}}
    record = {**_record(0, 0.004, pdd), "itl_s": [0.5] * 19, "output_tokens": 20}
    with drawn_figures() as figures:
        plot_request_timeline([_run([record])], tmp_path / "timeline.png")
    assert overlapping_texts(figures[0]) == []
    lanes = [label.get_text() for label in figures[0].axes[0].get_yticklabels()]
    assert len(lanes) == 8  # seven stages and the client's tokens


def test_the_cdf_shows_the_sla_it_names_and_logs_an_axis_that_would_squeeze_the_data():
    axes = new_figure().add_subplot()
    draw_ttft_cdf(axes, [_run([_record(i, 0.2 + 0.01 * i) for i in range(20)])])
    sla = next(line for line in axes.lines if "SLA" in line.get_label())
    low, high = axes.get_xlim()
    assert low < sla.get_xdata()[0] < high  # the legend's SLA entry is drawn, not off the right edge
    assert axes.get_xscale() == "log"  # linear, 0.2-0.39 s would fill 6% of an axis reaching 5 s
    assert any("SLA: TTFT 5 s" in t.get_text() for t in axes.get_legend().get_texts())
    narrow = new_figure().add_subplot()
    draw_ttft_cdf(narrow, [_run([_record(i, 1.0 + 0.2 * i) for i in range(20)])])
    assert narrow.get_xscale() == "linear"  # 1-4.8 s beside a 5 s limit: one decade, no log needed


def test_closed_loop_rows_and_repeated_labels():
    closed = _run([_record(0, 0.1)], rate=None, concurrency=4, path="c4")
    header, rows = table_rows([closed])
    assert rows[0][header.index("offered req/s")] == "-" and rows[0][header.index("concurrency")] == "4"


def test_the_runs_list_tells_repeated_modes_apart(tmp_path):
    runs = [_run([_record(0, 0.1)], path=str(tmp_path / "a")), _run([_record(0, 0.1)], rate=5.0,
                                                                     path=str(tmp_path / "b"))]
    page = write_index(tmp_path, runs, {}).read_text()
    assert "<li>pdd @ 2 req/s:" in page and "<li>pdd @ 5 req/s:" in page


def test_a_short_kv_transfer_still_shows_in_the_timeline(tmp_path):
    from matplotlib import image

    from loadgen.report.timeline import plot_request_timeline

    base = 1000.0
    pdd = {"pipeline": "P-MD", "rld_tokens": 0, "handoff": None,
           "timeline": {"prefill_sent": base + 0.01, "prefill_done": base + 0.2, "kv_arrived": base + 0.2005,
                        "first_token": base + 0.201, "finished": base + 3.0}}
    record = {**_record(0, 0.21, pdd), "itl_s": [0.01] * 270, "output_tokens": 271}
    path = plot_request_timeline([_run([record])], tmp_path / "timeline.png")
    pixels = image.imread(path)[..., :3]
    plot_area = pixels[:, : int(0.8 * pixels.shape[1])]  # left of the legend, whose swatch is orange too
    orange = np.all(np.abs(plot_area - np.array([1.0, 0.498, 0.055])) < 0.03, axis=-1)  # tab:orange: KV transfer
    assert orange.sum() > 50
