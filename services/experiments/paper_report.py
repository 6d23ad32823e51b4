"""The `paper` experiment's report: the deployment table, the comparison rows, the figures."""

from __future__ import annotations

from pathlib import Path

from services.experiments.meshrun import records_of
from services.experiments.paper import FULL, QUICK, comparison_rows, run_paper
from services.experiments.plots import plot_sweep, plot_ttft_cdfs
from services.experiments.runner import ExperimentResult, Log


def _fmt(value, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def deployment_table(result: dict) -> str:
    setup = result["setup"]
    lines = [
        f"Reference: {setup['reference_users']} agents, {setup['reference_rate_rps']:.2f} req/s on the intra-DC "
        f"baseline (emulated); WAN "
        f"{setup['wan_line_bps'] / 1e9:.3f} Gbit/s ({setup['line_scale']:.4f} of 20 Gbit/s), sized for "
        f"{setup['wan_utilisation_target']:.2f} utilisation at {setup['missed_tokens_mean']:.0f} missed tokens "
        f"per request. Workload `{setup['workload']}`.",
        "",
        "| deployment | GPUs A+B | $/h | req/s | TTFT P50 / P90 / P99 (s) | TPOT P50 (ms) | max goodput (req/s) | "
        "BCR (req/s per $/h) | RLD share | WAN util. | dilation | loop lag p99 (ms, emulated) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, d in result["deployments"].items():
        ttft = d["ttft_s"] or {}
        goodput = _fmt(d["max_goodput_rps"]) + ("" if d["max_goodput_bounded"] else " (at least)")
        lines.append(
            f"| {key} | {d['gpus_a']}+{d['gpus_b']} | {d['cost_per_hour']:.2f} | {_fmt(d['request_rate_rps'])} | "
            f"{_fmt(ttft.get('p50'))} / {_fmt(ttft.get('p90'))} / {_fmt(ttft.get('p99'))} | "
            f"{_fmt(d['tpot_p50_s'] and d['tpot_p50_s'] * 1e3, '{:.1f}')} | {goodput} | "
            f"{_fmt(d['bcr'], '{:.4f}')} | {_fmt(d['rld_token_share'], '{:.1%}')} | "
            f"{_fmt(d['wan_utilisation'], '{:.2f}')} | {d['time_dilation']:.2f} | "
            f"{d['loop_lag_p99_emulated_s'] * 1e3:.1f} |")
    return "\n".join(lines)


async def paper_experiment(quick: bool, out: Path, log: Log) -> ExperimentResult:
    config = QUICK if quick else FULL
    result, runs = await run_paper(config, out, log)
    reference = result["setup"]["reference_users"]
    images = [plot_sweep({k: d["steps"] for k, d in result["deployments"].items()}, out / "paper_sweep.png")]
    ttfts = {}
    for key, run in runs.items():
        step = run.step_at(reference)
        if step is not None:
            ttfts[key] = [r["ttft_s"] for r in records_of(step) if r["ttft_s"] is not None]
    sla = runs["pd-intra"].scenario.sla.ttft_s
    images.append(plot_ttft_cdfs(ttfts, sla, out / "paper_ttft_cdf.png", f"TTFT with {reference} agents"))
    return ExperimentResult("paper", quick, result["headline"], comparison_rows(result), result,
                            notes=[deployment_table(result)], images=images)
