"""Plots across runs: TTFT CDF, goodput against offered rate, hit-rate histogram, WAN throughput.

Figures draw on the Agg canvas directly, so no global matplotlib backend is switched.
WAN bytes are summed in 40 buckets over the run, each request's bytes placed
at its first token (send + TTFT): the KV leaves prefill then, and a report has
no finer clock for it (docs/loadgen.md).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from loadgen.hitbins import HIT_BIN_LABELS
from loadgen.report.runs import RunData, distinct_labels


def new_figure(width: float = 8.0, height: float = 5.0) -> Figure:
    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def empty_note(axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, color="dimgray")


def plot_ttft_cdf(runs: list[RunData], path: Path) -> Path:
    figure = new_figure()
    axes = figure.add_subplot()
    plotted = False
    for run, label in zip(runs, distinct_labels(runs)):
        ttfts = np.sort([r["ttft_s"] for r in run.ok_records() if r["ttft_s"] is not None])
        if ttfts.size:
            axes.step(ttfts, np.arange(1, ttfts.size + 1) / ttfts.size, where="post", label=label)
            plotted = True
    if plotted:
        sla = runs[0].summary.sla.ttft_s
        axes.axvline(sla, color="gray", linestyle=":", label=f"SLA {sla:g} s")
        axes.legend()
    else:
        empty_note(axes, "no completed requests")
    axes.set(xlabel="TTFT (s)", ylabel="share of requests", title="TTFT CDF", ylim=(0, 1.02))
    axes.grid(alpha=0.3)
    return save(figure, path)


def plot_goodput_vs_rate(runs: list[RunData], path: Path) -> Path | None:
    """Goodput against offered rate per run label; None unless at least two rates were run."""
    rates = {run.summary.offered_rate for run in runs if run.summary.offered_rate is not None}
    if len(rates) < 2:
        return None
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for run in runs:
        s = run.summary
        if s.offered_rate is not None:
            series[run.label].append((s.offered_rate, s.goodput_rps, s.sla_attainment))
    figure = new_figure()
    axes = figure.add_subplot()
    for label, points in series.items():
        points.sort()
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{label} goodput")
    top = max(rates)
    axes.plot([0, top], [0, top], color="gray", linestyle=":", label="offered")
    axes.set(xlabel="offered rate (req/s)", ylabel="SLA goodput (req/s)", title="SLA goodput against offered rate")
    axes.grid(alpha=0.3)
    axes.legend()
    return save(figure, path)


def plot_hit_histogram(runs: list[RunData], path: Path) -> Path:
    figure = new_figure()
    axes = figure.add_subplot()
    positions = np.arange(len(HIT_BIN_LABELS))
    width = 0.8 / max(1, len(runs))
    for i, (run, label) in enumerate(zip(runs, distinct_labels(runs))):
        shares = [100 * run.summary.hit_rate_bins.get(b, 0.0) for b in HIT_BIN_LABELS]
        axes.bar(positions + (i - (len(runs) - 1) / 2) * width, shares, width,
                 label=f"{label} (mean {run.summary.hit_rate_mean:.1%})")
    axes.set_xticks(positions, [f"{b}%" for b in HIT_BIN_LABELS])
    axes.set(xlabel="prefix hit rate", ylabel="share of requests (%)", title="Requests by prefix-hit rate")
    axes.grid(alpha=0.3, axis="y")
    axes.legend()
    return save(figure, path)


def plot_wan_throughput(runs: list[RunData], path: Path) -> Path:
    figure = new_figure()
    axes = figure.add_subplot()
    plotted = False
    for run, label in zip(runs, distinct_labels(runs)):
        points = [(r["send_s"] + (r["ttft_s"] or 0.0), (r.get("pdd") or {}).get("wan_bytes") or 0)
                  for r in run.ok_records()]
        if not any(b for _, b in points):
            continue
        times = np.array([t for t, _ in points])
        bucket = max(0.01, float(times.max()) / 40)
        edges = np.arange(0.0, times.max() + 2 * bucket, bucket)
        volume, _ = np.histogram(times, bins=edges, weights=[b for _, b in points])
        axes.step(edges[:-1], volume * 8 / bucket / 1e9, where="post", label=label)
        plotted = True
    if plotted:
        axes.legend()
    else:
        empty_note(axes, "no request reported WAN bytes")
    axes.set(xlabel="time since start (s)", ylabel="WAN throughput (Gbit/s, emulated)", title="KV over the WAN")
    axes.grid(alpha=0.3)
    return save(figure, path)
