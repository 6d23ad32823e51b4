"""One request's path through the stages, from its `pdd.timeline` stamps and the client's token times.

A stamp marks an event; the bar after it, up to the next stamp, is the phase
that event begins (prefill_done starts the KV transfer, first_token starts
decoding). Stage names come from the router, so phases are read from words in
them, and anything unrecognised is drawn grey rather than guessed. Stamp labels
go to the lowest row where they overlap no other label, measured in the drawn
figure, and a phase too short to see gets a sliver so its legend entry points
at something.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.patches import Patch

from loadgen.report.plots import empty_note, new_figure, save
from loadgen.report.runs import RunData

PHASE_COLOURS = {"router intake": "tab:olive", "prefill": "tab:blue", "KV transfer": "tab:orange", "relay decode (RLD)": "tab:green",
                 "handoff": "tab:red", "main decode (MD)": "tab:purple", "other": "tab:gray"}
MIN_VISIBLE = 0.006  # of the time axis: the narrowest bar drawn (about 5 pixels)
LABEL_BASE, LABEL_STEP = 0.61, 0.075  # label rows, in axes fractions above the stage bar
ENDED = ("_end", "_done", "_finish", "_finished", "_arrived", "_complete")


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
    """The most instructive request: relayed with a handoff if any, then the one with most stage stamps."""
    def score(record: dict) -> tuple:
        pdd = record.get("pdd") or {}
        return (pdd.get("pipeline") == "P-RLD-MD", pdd.get("handoff") is not None, len(pdd.get("timeline") or {}),
                record["output_tokens"])
    candidates = [r for run in runs for r in run.ok_records()]
    return max(candidates, key=score) if candidates else None


def _group_stamps(stamps: list[tuple[float, str]]) -> list[tuple[float, list[str]]]:
    """Stamps at the same instant share one label, so names do not print over each other."""
    groups: list[tuple[float, list[str]]] = []
    for at, name in stamps:
        if groups and at - groups[-1][0] < 1e-4:
            groups[-1][1].append(name)
        else:
            groups.append((at, [name]))
    return groups


def plot_request_timeline(runs: list[RunData], path: Path) -> Path:
    figure = new_figure(11.0, 4.0)
    axes = figure.add_subplot()
    record = pick_request(runs)
    if record is None:
        empty_note(axes, "no completed request")
        return save(figure, path)
    pdd = record.get("pdd") or {}
    stamps = sorted(((t - record["send_unix"], name) for name, t in (pdd.get("timeline") or {}).items()))
    groups = _group_stamps(stamps)
    pipeline, handed_off, phases = str(pdd.get("pipeline") or ""), False, set()
    tokens = record["ttft_s"] + np.concatenate([[0.0], np.cumsum(record["itl_s"])])
    span = max(float(tokens[-1]), groups[-1][0] if groups else 0.0) or 1.0
    drawn_to = -np.inf
    for (start, opening), (end, _) in zip(groups, groups[1:]):
        phase = phase_after(opening[-1], pipeline, handed_off)
        handed_off = handed_off or phase == "handoff"
        phases.add(phase)
        if end - start < MIN_VISIBLE * span:  # widened, beside the short one before it, over its long neighbour
            left = max(start, drawn_to)
            axes.barh(1, MIN_VISIBLE * span, left=left, color=PHASE_COLOURS[phase], edgecolor="white",
                      linewidth=0.3, zorder=3)
            drawn_to = left + MIN_VISIBLE * span
        else:
            axes.barh(1, end - start, left=start, color=PHASE_COLOURS[phase], edgecolor="white", linewidth=0.3)
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
    handles, _ = axes.get_legend_handles_labels()
    handles += [Patch(color=colour, label=phase) for phase, colour in PHASE_COLOURS.items() if phase in phases]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes.grid(alpha=0.3, axis="x")
    axes.set_xlim(-0.02 * span, 1.05 * span)
    figure.tight_layout()  # fixes the axes' size, so label widths measured next stay true when saved
    place_labels(figure, axes, groups)
    figure.savefig(path, format="png")
    return path


def place_labels(figure, axes, groups: list[tuple[float, list[str]]]) -> list:
    """One label per stamp group, each on the lowest row where it overlaps no other."""
    renderer = figure.canvas.get_renderer()
    rows: list[list] = []
    texts = []
    for at, names in groups:
        text = axes.text(at, 0.0, " = ".join(names), fontsize=7, va="bottom", transform=axes.get_xaxis_transform())
        row = 0
        while True:
            text.set_y(LABEL_BASE + LABEL_STEP * row)
            box = text.get_window_extent(renderer).expanded(1.02, 1.05)
            if row == len(rows):
                rows.append([])
            if not any(box.overlaps(other) for other in rows[row]):
                rows[row].append(box)
                break
            row += 1
        texts.append(text)
    return texts
