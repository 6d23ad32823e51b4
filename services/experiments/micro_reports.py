"""The two microbenchmarks as experiments: `handoff` and `wan`, quick and full."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from services.experiments import reported
from services.experiments.comparison import Row
from services.experiments.handoff import compare as compare_handoffs
from services.experiments.plots import plot_cdfs
from services.experiments.runner import ExperimentResult, Log
from services.experiments.wan import DISTRIBUTIONS, WanSetup, run_transfers
from services.scenario import LinkSpec

# (label, token-id scenario, KV-shipping scenario, requests): pdd-mini as the benchmark always ran it,
# then the report's model on the paper presets (their WAN is the scaled line, see docs/results.md).
HANDOFF_QUICK = (("pdd-mini", "pdd-mini", "pdd-kvship-mini", 6),)
HANDOFF_FULL = (("pdd-mini", "pdd-mini", "pdd-kvship-mini", 30), ("pdd-paper", "paper-pdd", "paper-pdd-kvship", 30))
WAN_DELAY_S, WAN_JITTER_S = 0.010, 0.002  # one-way, an inter-city route; jitter sigma (pareto-normal)
WAN_QUICK = ((0.25, 30.0),)  # (scale, seconds of sending): 20 req/s over 5 Gbit/s
WAN_FULL = ((1.0, 120.0), (1 / 16, 480.0))


async def handoff_experiment(quick: bool, out: Path, log: Log) -> ExperimentResult:
    data, samples, headline = {}, {}, {}
    for label, token_ids, kv_ship, requests in HANDOFF_QUICK if quick else HANDOFF_FULL:
        log(f"handoff: {label}, {requests} requests per path")
        result = await compare_handoffs(token_ids, kv_ship, requests, out_dir=out / label)
        data[label] = result
        for path in ("token_ids", "kv_ship"):
            samples[f"{label} {path}"] = result[path].pop("stalls_s")
        headline = {"deployment": label, "prompt_tokens": result["prompt_tokens"],
                    **{path: {k: result[path][k] for k in ("mean_s", "max_s", "std_s")}
                       for path in ("token_ids", "kv_ship")}}
    rows = []
    for path in ("token_ids", "kv_ship"):
        for stat in ("mean_s", "max_s", "std_s"):
            rows.append(Row(f"{headline['deployment']} {path} {stat[:-2]}", reported.HANDOFF[path][stat],
                            headline[path][stat], "s"))
    notes = ["| deployment | path | requests | mean (ms) | max (ms) | std (ms) | cut (tokens) | prompt |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, result in data.items():
        for path in ("token_ids", "kv_ship"):
            r = result[path]
            notes.append(f"| {label} | {path} | {r['requests']} | {r['mean_s'] * 1e3:.1f} | {r['max_s'] * 1e3:.1f} | "
                         f"{r['std_s'] * 1e3:.1f} | {r['cut_tokens_mean']:.0f} | {result['prompt_tokens']} |")
    image = plot_cdfs(samples, out / "handoff_stall_cdf.png", "handoff stall (s)", "100-token handoff")
    return ExperimentResult("handoff", quick, headline, rows, data, notes=notes, images=[image])


def wan_setup(scale: float, duration_s: float) -> WanSetup:
    line = LinkSpec(rate_bps=reported.SETUP_LINE_BPS * scale, delay_s=WAN_DELAY_S, jitter_s=WAN_JITTER_S,
                    jitter_dist="paretonormal")
    return WanSetup(rate_rps=reported.SETUP_RATE_RPS * scale, line=line, duration_s=duration_s,
                    warmup_s=duration_s / 10)


async def wan_experiment(quick: bool, out: Path, log: Log) -> ExperimentResult:
    data, samples, headline = {}, {}, {}
    for scale, seconds in WAN_QUICK if quick else WAN_FULL:
        setup = wan_setup(scale, seconds)
        label = f"scale {scale:g}"
        log(f"wan: {label}: {setup.rate_rps:g} req/s over {setup.line.rate_bps / 1e9:g} Gbit/s for {seconds:g} s")
        data[label] = {}
        for name, draw in DISTRIBUTIONS.items():
            stats, times = await run_transfers(setup, draw, out / f"{label}-{name}")
            data[label][name] = asdict(stats)
            samples[f"{label} {name}"] = times
        if not headline:  # the first scale listed is the headline: full scale in the full run
            headline = {"scale": scale, **{name: {"p50_s": data[label][name]["p50_s"],
                                                  "p99_s": data[label][name]["p99_s"]} for name in DISTRIBUTIONS}}
    rows = [Row(f"{name} {stat[:-2].upper()} (scale {headline['scale']:g})", reported.WAN[name][stat],
                headline[name][stat], "s") for name in DISTRIBUTIONS for stat in ("p50_s", "p99_s")]
    notes = ["| scale | distribution | transfers | failed | P50 (s) | P90 (s) | P99 (s) | max (s) | missed tokens | "
             "offered utilisation |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, by_name in data.items():
        for name, s in by_name.items():
            notes.append(f"| {label} | {name} | {s['transfers']} | {s['failed']} | {s['p50_s']:.3f} | "
                         f"{s['p90_s']:.3f} | {s['p99_s']:.3f} | {s['max_s']:.3f} | {s['missed_tokens_mean']:.0f} | "
                         f"{s['offered_utilisation']:.2f} |")
    image = plot_cdfs(samples, out / "wan_transfer_cdf.png", "KV transfer time (s)", "KV transfers over one WAN line")
    return ExperimentResult("wan", quick, headline, rows, data, notes=notes, images=[image])
