"""A plan's figures (PNG): the cost-goodput frontier per architecture, and each optimum's simulated knee."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loadgen.report.plots import new_figure, save
from services.experiments.economics.charts import plot_goodput_curves

if TYPE_CHECKING:
    from services.plan.planner import Plan


def plot_frontier(plan: Plan, path: Path) -> Path:
    """The screen's cost-goodput Pareto front per architecture, each simulated optimum marked with its interval."""
    from services.plan.planner import frontier

    figure = new_figure(7.0, 4.5)
    axes = figure.add_subplot()
    for arch, rows in plan.screened.items():
        front = frontier(rows)
        line, = axes.step([s.cost_per_hour for s in front], [s.goodput_rps for s in front], where="post",
                          label=f"{arch} (screen)", alpha=0.6)
        simulated = plan.optimum.get(arch)
        if simulated is not None:
            low, high = simulated.interval
            axes.errorbar([simulated.screened.cost_per_hour], [simulated.goodput_rps],
                          yerr=[[simulated.goodput_rps - low], [high - simulated.goodput_rps]], fmt="o",
                          color=line.get_color(), capsize=4)
    if plan.spec.budget_per_hour is not None:
        axes.axvline(plan.spec.budget_per_hour, color="grey", linestyle="--", label="budget")
    if plan.spec.target_rps is not None:
        axes.axhline(plan.spec.target_rps, color="grey", linestyle="--", label="target")
    axes.set_xlabel("cost ($/h)")
    axes.set_ylabel("max SLA goodput (req/s)")
    axes.set_title("cost against goodput: screen fronts, simulated optima (95% CI)")
    axes.legend(fontsize=8)
    return save(figure, path)


def plot_all(plan: Plan, out: Path) -> list[Path]:
    paths = [plot_frontier(plan, out / "frontier.png")]
    knees = {arch: s.knees[0] for arch, s in plan.optimum.items() if s is not None}
    if knees:
        paths.append(plot_goodput_curves(knees, out / "knees.png"))
    return paths
