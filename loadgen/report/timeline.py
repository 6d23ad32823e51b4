"""Plots over time: WAN throughput per run, and one request's path through the stages.

WAN bytes are summed in 40 buckets over the run, each request's bytes placed
at its first token (send + TTFT): the KV leaves prefill then, and a report has
no finer clock for it (docs/loadgen.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.report.plots import empty_note, new_figure, save
from loadgen.report.runs import RunData, distinct_labels

STAGE_COLOURS = (("prefill", "tab:blue"), ("transfer", "tab:orange"), ("kv", "tab:orange"), ("handoff", "tab:red"),
                 ("extend", "tab:red"), ("rld", "tab:green"), ("relay", "tab:green"), ("md", "tab:purple"),
                 ("main", "tab:purple"), ("decode", "tab:purple"))


def plot_wan_throughput(runs: list[RunData], path: Path) -> Path:
    figure = new_figure()
    axes = figure.add_subplot()
    plotted = False
    for run, label in zip(runs, distinct_labels(runs)):
        points = [(r["send_s"] + (r["ttft_s"] or 0.0), (r.get("pdd") or {}).get("wan_bytes") or 0) for r in run.ok_records()]
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


def _group_stamps(stamps: list[tuple[float, str]]) -> list[tuple[float, list[str]]]:
    """Stamps at the same instant share one label, so names do not print over each other."""
    groups: list[tuple[float, list[str]]] = []
    for at, name in stamps:
        if groups and at - groups[-1][0] < 1e-4:
            groups[-1][1].append(name)
        else:
            groups.append((at, [name]))
    return groups


def pick_request(runs: list[RunData]) -> dict | None:
    """The most instructive request: relayed with a handoff if any, then the one with most stage stamps."""
    def score(record: dict) -> tuple:
        pdd = record.get("pdd") or {}
        return (pdd.get("pipeline") == "P-RLD-MD", pdd.get("handoff") is not None, len(pdd.get("timeline") or {}),
                record["output_tokens"])
    candidates = [r for run in runs for r in run.ok_records()]
    return max(candidates, key=score) if candidates else None


def _interval_colour(opening: list[str], closing: list[str]) -> str:
    """Colour of the stage running between two instants: one that starts at the first, else one that ends at the second."""
    starts = [n for n in opening if n.lower().endswith(("_start", "_begin"))]
    ends = [n for n in closing if n.lower().endswith(("_end", "_done", "_finish"))]
    name = (starts or ends or opening)[-1].lower()
    return next((colour for key, colour in STAGE_COLOURS if key in name), "tab:gray")


def plot_request_timeline(runs: list[RunData], path: Path) -> Path:
    figure = new_figure(9.0, 4.0)
    axes = figure.add_subplot()
    record = pick_request(runs)
    if record is None:
        empty_note(axes, "no completed request")
        return save(figure, path)
    pdd = record.get("pdd") or {}
    stamps = sorted(((t - record["send_unix"], name) for name, t in (pdd.get("timeline") or {}).items()))
    groups = _group_stamps(stamps)
    for (start, opening), (end, closing) in zip(groups, groups[1:]):
        axes.barh(1, end - start, left=start, color=_interval_colour(opening, closing), edgecolor="white")
    for row, (at, names) in enumerate(groups):
        axes.text(at, 1.45 + 0.3 * (row % 3), " = ".join(names), fontsize=7, va="bottom")
    tokens = record["ttft_s"] + np.concatenate([[0.0], np.cumsum(record["itl_s"])])
    relayed = int(pdd.get("rld_tokens") or 0)
    axes.vlines(tokens[:relayed], -0.35, 0.35, color="tab:green", label=f"RLD tokens ({relayed})")
    axes.vlines(tokens[relayed:], -0.35, 0.35, color="tab:purple", label=f"MD tokens ({len(tokens) - relayed})")
    handoff = pdd.get("handoff") or {}
    if handoff and relayed < len(tokens):
        axes.axvline(tokens[relayed], color="tab:red", linestyle="--",
                     label=f"handoff {handoff.get('mode', '')}, stall {handoff.get('stall_s') or 0:.3f} s")
    axes.set_yticks([0, 1], ["tokens at client", "server stages"])
    axes.set_ylim(-0.8, 2.9)
    axes.set(xlabel="seconds since the request was sent",
             title=f"request {record['id']}: {pdd.get('pipeline', 'pipeline unknown')}")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(alpha=0.3, axis="x")
    return save(figure, path)
