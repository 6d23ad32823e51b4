"""One request's path through the stages, from its `pdd.timeline` stamps and the client's token times.

Two readings of the stamps. `phase_after` reads them as one sequence: the
phase that runs from a stamp to the next one (the summary's binding stage sums
these up to the first token). The figure draws lanes instead, one per stage,
each from the stamp that opens it to the one that closes it (LANES), so stages
that overlap (the relay decoding while the KV crosses the WAN) show side by
side, every stage is named once on the y axis and no label prints over
another. A stage too short to see gets a sliver of MIN_VISIBLE.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.report.plots import empty_note, new_figure, save
from loadgen.report.runs import RunData

ENDED = ("_end", "_done", "_finish", "_finished", "_arrived", "_complete")
MIN_VISIBLE = 0.006  # of the time axis: the narrowest bar drawn (about 5 pixels)
# (lane, colour, stamps that open it, stamps that close it): the first stamp present of each list.
LANES = (
    ("router intake", "tab:olive", ("received",), ("prefill_sent",)),
    ("prefill (queue + compute)", "tab:blue", ("prefill_sent", "received"), ("prefill_done", "first_token")),
    ("KV to relay (RDMA)", "tab:cyan", ("prefill_done",), ("relay_kv_arrived",)),
    ("KV to decode", "tab:orange", ("prefill_done",), ("kv_arrived",)),
    ("relay decode (RLD)", "tab:green", ("relay_kv_arrived",), ("handoff_started", "finished")),
    ("handoff", "tab:red", ("handoff_started",), ("handoff_done",)),
    ("main decode (MD)", "tab:purple", ("handoff_done", "kv_arrived", "prefill_done"), ("finished",)),
)


def phase_after(stamp: str, pipeline: str, handed_off: bool) -> str:
    """The phase that runs from this stamp to the next one."""
    name = stamp.lower()
    decode = "relay decode (RLD)" if "RLD" in pipeline and not handed_off else "main decode (MD)"
    if name == "received":  # up to prefill_sent; colocated has no such stamp, its next one ends prefill
        return "router intake" if "-" in pipeline else "prefill"
    if "handoff" in name or "extend" in name:
        return "main decode (MD)" if name.endswith(ENDED) else "handoff"
    if "prefill" in name:
        return ("KV transfer" if "-" in pipeline else decode) if name.endswith(ENDED) else "prefill"
    if "kv" in name or "transfer" in name:
        return decode if name.endswith(ENDED) else "KV transfer"
    if "rld" in name or "relay" in name:
        return "relay decode (RLD)"
    if "md" in name or "main" in name or "decode" in name or "first_token" in name:
        return decode
    return "other"


def pick_request(runs: list[RunData]) -> dict | None:
    """The most instructive request: relayed with a handoff if any, the relay's longest, then most stamps."""
    def score(record: dict) -> tuple:
        pdd = record.get("pdd") or {}
        return (pdd.get("pipeline") == "P-RLD-MD", pdd.get("handoff") is not None, pdd.get("rld_tokens") or 0,
                len(pdd.get("timeline") or {}), record["output_tokens"])
    candidates = [r for run in runs for r in run.ok_records()]
    return max(candidates, key=score) if candidates else None


def lane_spans(timeline: dict[str, float], pipeline: str) -> list[tuple[str, str, float, float]]:
    """(lane, colour, start, end) of every stage this request's stamps open and close."""
    spans = []
    relayed = "relay_kv_arrived" in timeline
    for lane, colour, opens, closes in LANES:
        if lane == "main decode (MD)" and relayed and "handoff_done" not in timeline:
            continue  # finished on the relay (P-RLD): main decode never took over
        if lane == "main decode (MD)" and relayed:
            opens = ("handoff_done",)
        start = next((timeline[s] for s in opens if s in timeline), None)
        end = next((timeline[s] for s in closes if s in timeline), None)
        if start is not None and end is not None and end >= start:
            spans.append((lane, colour, start, end))
    return spans


def plot_request_timeline(runs: list[RunData], path: Path) -> Path:
    figure = new_figure(11.0, 4.6)
    axes = figure.add_subplot()
    record = pick_request(runs)
    if record is None:
        empty_note(axes, "no completed request")
        return save(figure, path)
    pdd = record.get("pdd") or {}
    timeline = {name: t - record["send_unix"] for name, t in (pdd.get("timeline") or {}).items()}
    spans = lane_spans(timeline, str(pdd.get("pipeline") or ""))
    tokens = record["ttft_s"] + np.concatenate([[0.0], np.cumsum(record["itl_s"])])
    span = max([float(tokens[-1])] + [end for *_, end in spans]) or 1.0
    lanes = [lane for lane, *_ in LANES if any(lane == s[0] for s in spans)]
    rows = {lane: len(lanes) - i for i, lane in enumerate(lanes)}  # top to bottom in order; tokens on row 0
    handoff = pdd.get("handoff") or {}
    for lane, colour, start, end in spans:
        label = None
        if lane == "handoff" and handoff:
            label = f"handoff: {handoff.get('mode', '?')}, stall {handoff.get('stall_s') or 0:.3f} s"
        axes.barh(rows[lane], max(end - start, MIN_VISIBLE * span), left=start, height=0.6, color=colour,
                  label=label)
    relayed = int(pdd.get("rld_tokens") or 0)
    if relayed:
        axes.vlines(tokens[:relayed], -0.3, 0.3, color="tab:green", label=f"token from RLD ({relayed})")
    if relayed < len(tokens):
        axes.vlines(tokens[relayed:], -0.3, 0.3, color="tab:purple", label=f"token from MD ({len(tokens) - relayed})")
    axes.set_yticks([0, *rows.values()], ["tokens at client", *rows])
    axes.set_ylim(-0.7, len(lanes) + 0.7)
    axes.set(xlabel="seconds since the request was sent",
             title=f"request {record['id']}: pipeline {pdd.get('pipeline', 'unknown')}, "
                   f"{record['output_tokens']} tokens, TTFT {record['ttft_s']:.3f} s")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes.grid(alpha=0.3, axis="x")
    axes.set_xlim(-0.02 * span, 1.03 * span)
    return save(figure, path)
