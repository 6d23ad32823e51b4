"""The economics question on the planner's screen, at the report's regime (docs/plan.md, "Economics").

    python -m benchmarks.plan_economics [--spec services/plan/specs/report.yaml] [--out DIR]

1. Optimum against optimum at the spec's budget (the intra-DC baseline's 88 GPU-A): each architecture's
   best deployment, its goodput, cost, BCR and binding stage.
2. The least cost at which each architecture reaches the intra-DC PD optimum's own goodput.
3. The same two at the assumed 8:1-compressed KV (pdd-paper, 4.4 KB a token): the sensitivity case.
4. The map: PDD's BCR gain over the best other architecture across KV bytes per token x line rate x
   the B/A price ratio (economics.py), as a table and a heatmap.
Writes economics.json, economics.md and gain_map.png to DIR; prints economics.md. Screen only: the
simulated confirmation is `pdd-emu plan --spec FILE` (docs/plan.md, "Speed").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from loadgen.report.plots import new_figure, save
from services.plan.economics import KV_MODELS, LINE_GBPS, PRICE_RATIOS, Cell, gain_map, least_cost, optima, pdd_gain
from services.plan.screen import Screened
from services.plan.spec import load_spec


def _row(arch: str, s: Screened | None) -> str:
    if s is None:
        return f"| {arch} | - | - | - | - | nothing within the objective |"
    return (f"| {arch} | {s.cost_per_hour:.2f} | {s.goodput_rps:.2f} | {s.bcr:.4f} | {s.binding_stage} | "
            f"{s.candidate.label()} |")


def _table(found: dict[str, Screened | None]) -> list[str]:
    gain, other = pdd_gain(found)
    return ["| architecture | $/h | goodput (req/s) | BCR | binding | deployment |", "| --- | ---: | ---: | ---: | --- | --- |",
            *(_row(arch, s) for arch, s in found.items()), "",
            f"PDD's BCR gain over the best other ({other}): " + ("-" if gain is None else f"{gain:+.1%}"), ""]


def _case(spec) -> tuple[dict, list[str]]:
    found = optima(spec)
    baseline = found.get("pd-intra")
    target = baseline.goodput_rps if baseline else None
    cheapest = least_cost(spec, target) if target else {}
    lines = [f"Optimum against optimum at ${spec.budget_per_hour:.2f}/h:", "", *_table(found)]
    if target:
        lines += [f"Least cost to reach the intra-DC PD optimum's {target:.2f} req/s:", "", *_table(cheapest)]
    record = {"optima": {a: _record(s) for a, s in found.items()},
              "least_cost": {a: _record(s) for a, s in cheapest.items()}, "target_rps": target}
    return record, lines


def _record(s: Screened | None) -> dict | None:
    return None if s is None else {"cost_per_hour": s.cost_per_hour, "goodput_rps": s.goodput_rps, "bcr": s.bcr,
                                   "binding_stage": s.binding_stage, "utilisation": s.utilisation,
                                   "deployment": s.candidate.label()}


def _map_lines(cells: list[Cell]) -> list[str]:
    lines = ["| KV bytes/token | B/A price | " + " | ".join(f"{g} Gbit/s" for g in LINE_GBPS) + " |",
             "| ---: | ---: |" + " ---: |" * len(LINE_GBPS)]
    for kv in KV_MODELS:
        for ratio in PRICE_RATIOS:
            row = [c for c in cells if c.kv_bytes == kv and c.price_ratio == ratio]
            values = [("-" if c.gain is None else f"{c.gain:+.0%}") + (f" ({c.pdd_binding})" if c.pdd_binding else "")
                      for c in sorted(row, key=lambda c: c.line_gbps)]
            lines.append(f"| {kv / 1000:.1f} KB | {ratio:g} | " + " | ".join(values) + " |")
    return lines


def _heatmap(cells: list[Cell], path: Path) -> Path:
    figure = new_figure(12.0, 3.8)
    for i, ratio in enumerate(PRICE_RATIOS):
        axes = figure.add_subplot(1, len(PRICE_RATIOS), i + 1)
        grid = [[next((c.gain for c in cells if c.kv_bytes == kv and c.line_gbps == g and c.price_ratio == ratio),
                      None) for g in LINE_GBPS] for kv in KV_MODELS]
        values = [[float("nan") if v is None else 100 * v for v in row] for row in grid]
        image = axes.imshow(values, cmap="RdYlGn", vmin=-60, vmax=60, origin="lower")
        for y, row in enumerate(values):
            for x, v in enumerate(row):
                axes.text(x, y, "-" if v != v else f"{v:+.0f}%", ha="center", va="center", fontsize=8)
        axes.set_xticks(range(len(LINE_GBPS)), [f"{g}G" for g in LINE_GBPS])
        axes.set_yticks(range(len(KV_MODELS)), [f"{kv / 1000:.1f} KB" for kv in KV_MODELS])
        axes.set_title(f"B/A price {ratio:g}")
        axes.set_xlabel("line rate")
    figure.colorbar(image, ax=figure.axes, label="PDD's BCR gain over the best other (%)")
    figure.suptitle("where PDD pays (screen, each architecture at its optimum within the budget)")
    figure.savefig(path, format="png")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="services/plan/specs/report.yaml")
    parser.add_argument("--out", type=Path, default=Path("out/plan-economics"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(args.spec)
    started = time.process_time()
    base, lines = _case(spec)
    small, small_lines = _case(spec.model_copy(update={"model": "pdd-paper"}))
    cells = gain_map(spec)
    seconds = time.process_time() - started
    text = [f"# Economics on the planner's screen ({spec.model}, {spec.workload})", "", *lines,
            "## Sensitivity: 4.4 KB of KV per token (pdd-paper)", "", *small_lines,
            "## Where PDD pays: BCR gain over the best other architecture (PDD's binding stage)", "",
            *_map_lines(cells), "", f"CPU time: {seconds:.0f} s."]
    _heatmap(cells, args.out / "gain_map.png")
    (args.out / "economics.json").write_text(json.dumps(
        {"base": base, "kv_4k4": small, "map": [vars(c) for c in cells], "cpu_s": seconds}, indent=2) + "\n")
    (args.out / "economics.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
