"""The report's figures as a reader sees them: no text over text, legends that match what is drawn.

The report is built from three deployments' records (tests/loadgen/comparison.py);
every figure its code saves is checked on its drawn artists (tests/figure_checks.py),
then the page is opened in headless Chromium and every figure is looked for with its caption.
"""

from __future__ import annotations

import json

import pytest
from matplotlib.lines import Line2D

from loadgen.report import build_report
from loadgen.report.captions import CAPTIONS
from loadgen.report.plots import nice_bin
from loadgen.report.timeline import LANES
from services.experiments.plots import plot_sweep
from tests.figure_checks import drawn_figures, overlapping_texts, undrawn_legend_entries
from tests.loadgen.browser import chromium, inspect_page
from tests.loadgen.comparison import comparison_runs


@pytest.fixture
def report(tmp_path):
    runs = comparison_runs()
    for run in runs:  # build_report reads folders: write the records back as a bench would
        folder = tmp_path / run.path
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(run.summary.model_dump_json())
        (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.records))
    with drawn_figures() as figures:
        built = build_report([tmp_path / run.path for run in runs], tmp_path / "report", wan_rate_bps=10e9,
                             notes={"ttft_cdf": "a sentence on scale"})
    return built, figures


def test_no_text_overlaps_another_in_any_figure(report):
    built, figures = report
    assert len(figures) == len(built.images) == 4
    for figure, path in zip(figures, built.images.values()):
        assert overlapping_texts(figure) == [], path.name


def test_every_legend_entry_points_at_something_drawn(report):
    _, figures = report
    for figure in figures:
        assert undrawn_legend_entries(figure) == []


def test_a_legend_entry_for_a_line_off_the_axis_is_caught():
    """The check itself: a line moved out of view leaves its legend entry undrawn."""
    from loadgen.report.plots import new_figure

    figure = new_figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], label="data")
    axes.axvline(50, label="SLA 50 s")
    axes.set_xlim(0, 1.1)
    axes.legend()
    assert undrawn_legend_entries(figure) == ["SLA 50 s"]
    axes.text(0.5, 0.5, "one")
    axes.text(0.5, 0.5, "two")
    assert ("one", "two") in overlapping_texts(figure)


def test_the_ttft_axis_is_logarithmic_when_the_data_span_decades(report):
    _, figures = report
    cdf = figures[0].axes[0]
    assert cdf.get_xscale() == "log" and "log scale" in cdf.get_xlabel()
    sla = [line for line in cdf.lines if line.get_label().startswith("SLA")]
    assert len(sla) == 1 and cdf.get_xlim()[0] < sla[0].get_xdata()[0] < cdf.get_xlim()[1]


def test_the_wan_plot_states_one_bin_width_and_keeps_its_legend_off_the_data(report):
    _, figures = report
    axes = figures[2].axes[0]
    widths = {round(line.get_xdata()[1] - line.get_xdata()[0], 9) for line in axes.lines if len(line.get_xdata()) > 2}
    assert len(widths) == 1 and f"{widths.pop():g} s bins" in axes.get_xlabel()
    figures[2].canvas.draw()
    legend = axes.get_legend().get_window_extent()
    assert legend.x0 >= axes.get_window_extent().x1  # outside the plotting area, right of it
    assert [nice_bin(x) for x in (0.013, 0.2, 0.21, 1.0, 3.1)] == [0.02, 0.2, 0.5, 1.0, 5.0]


def test_the_timeline_has_one_lane_per_stage_and_a_visible_handoff(report):
    _, figures = report
    axes = figures[3].axes[0]
    lanes = [label.get_text() for label in axes.get_yticklabels()]
    assert lanes[0] == "tokens at client" and {"relay decode (RLD)", "handoff", "KV to decode"} <= set(lanes)
    assert set(lanes[1:]) <= {lane for lane, *_ in LANES}
    figures[3].canvas.draw()
    row = axes.get_yticks()[lanes.index("handoff")]
    handoff = [p for p in axes.patches if abs(p.get_y() + p.get_height() / 2 - row) < 1e-9]
    assert len(handoff) == 1 and handoff[0].get_window_extent().width >= 4  # pixels: a reader sees it


def test_overlapping_sweep_lines_stay_distinguishable(tmp_path):
    """Three deployments with the same attainment: each line has its own dash and marker, and the knee is named."""
    steps = {label: [{"users": 4, "attainment": 1.0, "goodput_rps": g}, {"users": 12, "attainment": 1.0,
                                                                           "goodput_rps": 3 * g}]
             for label, g in (("pd-intra", 1.0), ("pd-cross", 1.2), ("pdd", 1.21))}
    with drawn_figures() as figures:
        plot_sweep(steps, tmp_path / "sweep.png", {label: (12, 3 * p[0]["goodput_rps"]) for label, p in steps.items()})
    left, right = figures[0].axes
    styles = {(line.get_linestyle(), line.get_marker()) for line in left.lines if line.get_label() in steps}
    assert len(styles) == 3
    labels = right.get_legend_handles_labels()[1]
    assert "max goodput (the knee)" in labels and "the knee's load" in labels
    assert undrawn_legend_entries(figures[0]) == [] and overlapping_texts(figures[0]) == []


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
async def test_the_page_shows_every_figure_with_its_caption_and_the_verdict(report, tmp_path):
    built, _ = report
    images = await inspect_page(built.index, tmp_path / "page.png")
    assert {src for src, *_ in images} == {path.name for path in built.images.values()}
    for src, complete, width, caption in images:
        assert complete and width > 0, src
        assert CAPTIONS[src.removesuffix(".png")] in caption
    assert "a sentence on scale" in dict((src, caption) for src, *_, caption in images)["ttft_cdf.png"]
    page = built.index.read_text()
    assert "Winner: pd-intra" in page and "BCR" in page and "benefit-cost ratio" in page


def test_legend_proxies_need_a_drawn_twin():
    from loadgen.report.plots import new_figure

    figure = new_figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], marker="o")
    axes.plot([], [], marker="*", linestyle="none", label="a star nobody drew")
    axes.legend()
    assert undrawn_legend_entries(figure) == ["a star nobody drew"]
    assert isinstance(axes.get_legend_handles_labels()[0][0], Line2D)
