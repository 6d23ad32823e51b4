"""Plots across runs: TTFT CDF, goodput against offered rate, hit-rate histogram, WAN throughput.

Figures draw on the Agg canvas directly, so no global matplotlib backend is switched.
WAN throughput spreads each transfer's bytes evenly over its own interval
(kv_arrived - kv_transfer_s to kv_arrived); given the line rate, a bucket holds
at most what the line carries and the rest moves on to the next bucket, as the
link would queue it (docs/loadgen.md, "Reports").
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
    draw_ttft_cdf(figure.add_subplot(), runs)
    return save(figure, path)


def draw_ttft_cdf(axes, runs: list[RunData]) -> None:
    longest = 0.0
    for run, label in zip(runs, distinct_labels(runs)):
        ttfts = np.sort([r["ttft_s"] for r in run.ok_records() if r["ttft_s"] is not None])
        if ttfts.size:
            axes.step(ttfts, np.arange(1, ttfts.size + 1) / ttfts.size, where="post", label=label)
            longest = max(longest, float(ttfts[-1]))
    if longest > 0:
        sla = runs[0].summary.sla.ttft_s
        beyond = sla > longest * 1.05
        axes.axvline(sla, color="gray", linestyle=":", label=f"SLA {sla:g} s" + (" (right of the data)" if beyond else ""))
        axes.set_xlim(0, longest * 1.05 if beyond else max(longest, sla) * 1.05)  # the data fill the plot
        axes.legend(loc="lower right")
    else:
        empty_note(axes, "no completed requests")
    axes.set(xlabel="TTFT (s)", ylabel="share of requests", title="TTFT CDF", ylim=(0, 1.02))
    axes.grid(alpha=0.3)


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


def transfer_intervals(run: RunData) -> list[tuple[float, float, float]]:
    """(start s, end s, emulated bytes) of each request's WAN transfer, in seconds since the run began."""
    spans = []
    for r in run.ok_records():
        pdd = r.get("pdd") or {}
        size = pdd.get("wan_bytes") or 0
        if not size:
            continue
        timeline, offset = pdd.get("timeline") or {}, r["send_s"] - r["send_unix"]
        took = float(pdd.get("kv_transfer_s") or 0.0)
        if timeline.get("kv_arrived"):
            end = timeline["kv_arrived"] + offset
        elif timeline.get("prefill_done"):
            end = timeline["prefill_done"] + offset + took
        else:
            end = r["send_s"] + (r["ttft_s"] or 0.0)
        spans.append((end - took, end, float(size)))
    return spans


def throughput_buckets(spans: list[tuple[float, float, float]], bucket_s: float, buckets: int,
                       line_rate_bps: float | None = None) -> np.ndarray:
    """Bytes per bucket: each span's bytes spread over its interval, then capped at the line rate."""
    volume = np.zeros(buckets)
    edges = np.arange(buckets + 1) * bucket_s
    for start, end, size in spans:
        if end - start <= 0:
            volume[min(buckets - 1, max(0, int(end // bucket_s)))] += size
            continue
        overlap = np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0.0, None)
        volume += size * overlap / (end - start)
    if line_rate_bps:
        capacity, carried = line_rate_bps / 8 * bucket_s, 0.0
        for i in range(buckets):
            carried += volume[i]
            volume[i] = min(carried, capacity)
            carried -= volume[i]
    return volume


def plot_wan_throughput(runs: list[RunData], path: Path, line_rate_bps: float | None = None) -> Path:
    figure = new_figure()
    axes = figure.add_subplot()
    plotted = False
    for run, label in zip(runs, distinct_labels(runs)):
        spans = transfer_intervals(run)
        if not spans:
            continue
        end = max(e for _, e, _ in spans)
        bucket = max(0.01, end / 40)
        buckets = int(end // bucket) + 2
        volume = throughput_buckets(spans, bucket, buckets, line_rate_bps)
        axes.step(np.arange(buckets) * bucket, volume * 8 / bucket / 1e9, where="post", label=label)
        plotted = True
    if plotted:
        if line_rate_bps:
            axes.axhline(line_rate_bps / 1e9, color="gray", linestyle=":", label=f"line {line_rate_bps / 1e9:g} Gbit/s")
        axes.legend()
    else:
        empty_note(axes, "no request reported WAN bytes")
    axes.set(xlabel="time since start (s)", ylabel="WAN throughput (Gbit/s, emulated)", title="KV over the WAN")
    axes.grid(alpha=0.3)
    return save(figure, path)
