"""The experiments' figures (PNG), drawn with loadgen's figure helpers so every plot looks alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.report.plots import line_styles, new_figure, save
from services.experiments.bathtub import BathtubPoint
from services.experiments.goodput import THRESHOLD


def plot_sweep(steps: dict[str, list[dict]], path: Path, knees: dict[str, tuple[float, float]] | None = None) -> Path:
    """Per deployment, against the number of agents: share within SLA (left) and goodput (right).

    Each deployment has its own colour, dash and marker, the markers shrinking from the first to
    the last, so a line drawn over another leaves it visible. `knees` marks a deployment's max
    goodput (load, goodput) with a star and a thin vertical line at its load; the legend names both.
    """
    figure = new_figure(10.0, 4.2)
    left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for i, ((label, points), style) in enumerate(zip(steps.items(), line_styles())):
        style = {**style, "markevery": None, "markersize": 9 - 2 * min(i, 3), "linewidth": 2.2 - 0.4 * min(i, 3)}
        users = [p["users"] for p in points]
        left.plot(users, [p["attainment"] for p in points], label=label, **style)
        right.plot(users, [p["goodput_rps"] for p in points], label=label, **style)
        if knees and label in knees:
            load, goodput = knees[label]
            for axes in (left, right):
                axes.axvline(load, color=style["color"], linestyle=(0, (2, 4)), linewidth=0.8, alpha=0.7)
            right.plot([load], [goodput], marker="*", markersize=14, color=style["color"], linestyle="none",
                       markeredgecolor="black", markeredgewidth=0.5)
    left.axhline(THRESHOLD, color="gray", linestyle=":", label="90% within SLA")
    left.set_ylabel("share of requests within SLA")
    left.set_ylim(0, 1.05)
    right.set_ylabel("goodput (req/s within SLA, emulated)")
    if knees:
        right.plot([], [], marker="*", markersize=10, color="gray", linestyle="none", label="max goodput (the knee)")
        right.plot([], [], color="gray", linestyle=(0, (2, 4)), linewidth=0.8, label="the knee's load")
    for axes in (left, right):
        axes.set_xlabel("agents")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    return save(figure, path)


def plot_ttft_cdfs(ttfts: dict[str, list[float]], sla_s: float, path: Path, title: str) -> Path:
    figure = new_figure(7.5, 4.5)
    axes = figure.add_subplot()
    for label, values in ttfts.items():
        ordered = np.sort(values)
        axes.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post", label=label)
    axes.axvline(sla_s, color="gray", linestyle=":", label=f"SLA {sla_s:g} s")
    axes.set_xscale("log")
    axes.set_xlabel("TTFT (s, emulated)")
    axes.set_ylabel("share of requests")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    return save(figure, path)


def plot_bathtub(curves: dict[str, list[BathtubPoint]], dips: dict[str, list[float]], path: Path) -> Path:
    """Top: uncached tokens per second (the dips); bottom: requests per second and max goodput."""
    figure = new_figure(9.0, 7.5)
    top, bottom = figure.add_subplot(2, 1, 1), figure.add_subplot(2, 1, 2)
    for label, points in curves.items():
        hits = [p.hit_rate * 100 for p in points]
        top.plot(hits, [p.compute_tokens_per_s / 1e3 for p in points], label=label, lw=1.2)
        bottom.plot(hits, [p.throughput_rps for p in points], label=f"{label}: throughput", lw=1.2)
        goodput = [(p.hit_rate * 100, p.goodput_rps) for p in points if p.goodput_rps is not None]
        if goodput:
            bottom.plot(*zip(*goodput), linestyle="--", marker=".", label=f"{label}: max goodput")
    for label, hits in dips.items():
        for hit in hits:
            top.axvline(hit * 100, color="tab:red", alpha=0.15, lw=3)
    top.set_ylabel("uncached tokens/s (thousands)")
    top.set_title("prefill throughput against prefix hit rate (shaded: small tail chunks)")
    bottom.set_yscale("log")
    bottom.set_xlabel("prefix hit rate (%)")
    bottom.set_ylabel("requests/s")
    for axes in (top, bottom):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    return save(figure, path)


def plot_cdfs(samples: dict[str, list[float]], path: Path, xlabel: str, title: str, log_x: bool = True) -> Path:
    figure = new_figure(7.5, 4.5)
    axes = figure.add_subplot()
    for label, values in samples.items():
        ordered = np.sort(values)
        axes.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post", label=label)
    if log_x:
        axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("share")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    return save(figure, path)
