"""The economics figures (PNG), drawn with loadgen's figure helpers: goodput curves, TTFT CDFs, tornado, BCR bars."""

from __future__ import annotations

from pathlib import Path

from loadgen.report.plots import new_figure, save
from services.experiments.economics.search import Knee
from services.experiments.economics.sensitivity import Bar
from services.experiments.plots import plot_sweep, plot_ttft_cdfs


def plot_goodput_curves(knees: dict[str, Knee], path: Path) -> Path:
    """Attainment and goodput against load per deployment (experiments/plots.py), the knee marked."""
    steps = {label: [{"users": p.load, "attainment": p.attainment, "goodput_rps": p.goodput_rps}
                     for p in sorted(knee.points, key=lambda p: p.load)] for label, knee in knees.items()}
    marks = {label: (knee.best.load, knee.goodput_rps) for label, knee in knees.items() if knee.best.load is not None}
    return plot_sweep(steps, path, marks)


def plot_ttfts(ttfts: dict[str, list[float]], sla_s: float, path: Path) -> Path:
    return plot_ttft_cdfs(ttfts, sla_s, path, "TTFT at the reference load")


def plot_tornado(figure_name: str, base: float, bars: list[Bar], path: Path) -> Path:
    """One row per parameter, widest first: the figure at its low and high case against the base run."""
    figure = new_figure(8.0, 0.5 * len(bars) + 1.5)
    axes = figure.add_subplot()
    rows = list(reversed(bars))  # widest at the top
    for y, bar in enumerate(rows):
        # A parameter's two cases often land on the same side of the base: each gets half the row,
        # so neither bar nor label hides the other.
        cases = [(bar.low, bar.low_label, "tab:blue")]
        if bar.high is not None:
            cases.append((bar.high, bar.high_label, "tab:orange"))
        height, offsets = (0.8, (0.0,)) if len(cases) == 1 else (0.4, (0.2, -0.2))
        for (value, label, color), offset in zip(cases, offsets):
            at = y + offset
            axes.barh(at, value - base, left=base, height=height, color=color, alpha=0.7)
            axes.text(value, at, f" {label} ", va="center", ha="left" if value >= base else "right", fontsize=8)
    axes.axvline(base, color="black", lw=1)
    axes.margins(x=0.2)  # room for the labels at the bars' ends
    axes.set_yticks(range(len(rows)), [bar.parameter for bar in rows])
    axes.set_xlabel(f"{figure_name} (base {base:.3g})")
    axes.grid(alpha=0.3, axis="x")
    return save(figure, path)


def plot_bcr_bars(bcr: dict[str, float | None], path: Path) -> Path:
    """BCR (requests within SLA per second per $/h) of each arm."""
    figure = new_figure(7.5, 4.0)
    axes = figure.add_subplot()
    labels = list(bcr)
    axes.bar(labels, [bcr[k] or 0.0 for k in labels], color="tab:green", alpha=0.8)
    axes.set_ylabel("BCR (goodput per $/h)")
    axes.tick_params(axis="x", labelrotation=15)
    axes.grid(alpha=0.3, axis="y")
    return save(figure, path)
