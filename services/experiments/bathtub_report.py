"""The `bathtub` experiment: curves for two chunk sizes, with and without tail isolation, and their dips."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from services.experiments import reported
from services.experiments.bathtub import PrefillSetup, bathtub, dip_depths, hit_grid, predicted_dips, with_policy
from services.experiments.comparison import Row
from services.experiments.plots import plot_bathtub
from services.experiments.runner import ExperimentResult, Log

MAIN = PrefillSetup()  # 64K context, 8192-token chunks, 16384-token steps, tails isolated
PRESET_CHUNKS = replace(MAIN, chunk_size=2048, max_batched_tokens=8192)  # the scenario presets' engine
DIP_DEPTH = 0.02  # a predicted dip counts when it is a local minimum this much below its neighbour


def bathtub_experiment(quick: bool, out: Path, log: Log) -> ExperimentResult:
    grid = hit_grid(0.01 if quick else 0.005)
    setups = {"chunk 8192, tails isolated": MAIN, "chunk 8192, tails mixed": with_policy(MAIN, False)}
    if not quick:
        setups["chunk 2048, tails isolated"] = PRESET_CHUNKS
        setups["chunk 2048, tails mixed"] = with_policy(PRESET_CHUNKS, False)
    curves, dips, depths = {}, {}, {}
    for label, setup in setups.items():
        log(f"bathtub: {label} ({len(grid)} hit rates)")
        curves[label] = bathtub(setup, grid)
        predicted = predicted_dips(setup, grid)
        depths[label] = dip_depths(curves[label], predicted)
        dips[label] = [h for h, d in depths[label].items() if d >= DIP_DEPTH]
    if not quick:
        log("bathtub: max goodput every 4% (chunk 8192, tails isolated)")
        goodput = {p.hit_rate: p.goodput_rps for p in bathtub(MAIN, hit_grid(0.04), goodput_requests=160)}
        curves["chunk 8192, tails isolated"] = [replace(p, goodput_rps=goodput.get(p.hit_rate))
                                                for p in curves["chunk 8192, tails isolated"]]
    main_label = "chunk 8192, tails isolated"
    headline = {
        "context_tokens": MAIN.context_tokens, "chunk_size": MAIN.chunk_size,
        "dips": dips[main_label], "dip_depths": {f"{h:g}": round(d, 4) for h, d in depths[main_label].items()},
        "dips_without_isolation": dips["chunk 8192, tails mixed"],
        "throughput_rps_at_0": curves[main_label][0].throughput_rps,
        "throughput_rps_at_top": curves[main_label][-1].throughput_rps,
    }
    image = plot_bathtub({k: v for k, v in curves.items()}, {main_label: dips[main_label]}, out / "bathtub.png")
    notes = [f"Dips (local minima of uncached tokens/s at least {DIP_DEPTH:.0%} below a neighbour, where the "
             f"tail chunk is under 10% of a chunk):"]
    notes += [f"- {label}: {', '.join(f'{h:.1%}' for h in found) or 'none'}" for label, found in dips.items()]
    rows = [Row(f"dip near {h:.0%} hit", h, _nearest(dips[main_label], h), "%") for h in reported.BATHTUB_DIPS]
    data = {"curves": {label: [asdict(p) for p in points] for label, points in curves.items()},
            "setups": {label: asdict(setup) for label, setup in setups.items()}}
    return ExperimentResult("bathtub", quick, headline, rows, data, notes=notes, images=[image])


def _nearest(found: list[float], target: float) -> float | None:
    return min(found, key=lambda h: abs(h - target)) if found else None
