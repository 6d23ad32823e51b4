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


DECADES_FOR_LOG = 1.5  # a CDF whose data span more than this many decades gets a log time axis


def draw_ttft_cdf(axes, runs: list[RunData]) -> None:
    """Each run's TTFT CDF and the SLA limit, always inside the axis: every legend entry is drawn."""
    shortest, longest = np.inf, 0.0
    for run, label, style in zip(runs, distinct_labels(runs), line_styles()):
        ttfts = np.sort([r["ttft_s"] for r in run.ok_records() if r["ttft_s"] is not None])
        if ttfts.size:
            axes.step(ttfts, np.arange(1, ttfts.size + 1) / ttfts.size, where="post", label=label, **style)
            shortest, longest = min(shortest, float(ttfts[0])), max(longest, float(ttfts[-1]))
    if longest > 0:
        sla = runs[0].summary.sla.ttft_s
        axes.axvline(sla, color="gray", linestyle=":", label=f"SLA: TTFT {sla:g} s")
        right = max(longest, sla) * 1.3
        if np.log10(right / max(shortest, 1e-6)) > DECADES_FOR_LOG:
            axes.set_xscale("log")
            axes.set_xlim(max(shortest, 1e-6) / 1.3, right)
        else:
            axes.set_xlim(0, right)
        axes.legend(loc="lower right")
    else:
        empty_note(axes, "no completed requests")
    log = axes.get_xscale() == "log"
    axes.set(xlabel="TTFT (s" + (", log scale)" if log else ")"), ylabel="share of requests", title="TTFT CDF",
             ylim=(0, 1.02))
    axes.grid(alpha=0.3, which="both" if log else "major")


def line_styles():
    """Colour, marker and dash per series, so lines that coincide stay told apart (colour alone hides them).

    The nth run has the same colour in every figure of a report, bars included (matplotlib's Cn).
    """
    markers, dashes = ("o", "s", "^", "D", "v", "P"), ("-", "--", "-.", ":")
    i = 0
    while True:
        yield {"color": f"C{i % 10}", "linestyle": dashes[i % len(dashes)], "marker": markers[i % len(markers)],
               "markevery": 0.1, "markersize": 4}
        i += 1


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
        axes.bar(positions + (i - (len(runs) - 1) / 2) * width, shares, width, color=f"C{i % 10}",
                 label=f"{label} (mean {run.summary.hit_rate_mean:.1%})")
    axes.set_xticks(positions, [f"{b}%" for b in HIT_BIN_LABELS], fontsize=8)
    axes.set(xlabel="prefix hit rate: seven bins of unequal width, finer near 100%",
             ylabel="share of requests (%)", title="Requests by prefix-hit rate")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
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


def nice_bin(seconds: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten at or above `seconds`: a bin width a reader can use."""
    power = 10 ** np.floor(np.log10(max(seconds, 1e-3)))
    return float(next(step * power for step in (1, 2, 5, 10) if step * power >= seconds - 1e-12))


def plot_wan_throughput(runs: list[RunData], path: Path, line_rate_bps: float | None = None) -> Path:
    """Every run's KV over the WAN in one bin width (about 40 bins over the longest run), stated on the axis."""
    figure = new_figure()
    axes = figure.add_subplot()
    spans = {label: transfer_intervals(run) for run, label in zip(runs, distinct_labels(runs))}
    ends = [end for run_spans in spans.values() for _, end, _ in run_spans]
    bucket = nice_bin(max(ends) / 40) if ends else 1.0
    for (label, run_spans), style in zip(spans.items(), line_styles()):  # a run without WAN keeps its colour
        if not run_spans:
            continue
        buckets = int(max(e for _, e, _ in run_spans) // bucket) + 2
        volume = throughput_buckets(run_spans, bucket, buckets, line_rate_bps)
        style = {**style, "markevery": max(1, buckets // 10)}
        axes.step(np.arange(buckets) * bucket, volume * 8 / bucket / 1e9, where="post", label=label, **style)
    if ends:
        if line_rate_bps:
            axes.axhline(line_rate_bps / 1e9, color="gray", linestyle=":", label=f"line {line_rate_bps / 1e9:g} Gbit/s")
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    else:
        empty_note(axes, "no request reported WAN bytes")
    axes.set(xlabel=f"time since start (s), {bucket:g} s bins",
             ylabel="WAN throughput (Gbit/s, emulated)", title="KV over the WAN")
    axes.grid(alpha=0.3)
    return save(figure, path)
