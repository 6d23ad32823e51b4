"""The comparison in plain words: which deployment won, why, and where the report is.

The winner is the run with the most SLA goodput; where every run's count of
requests within the SLA is within TIE_SHARE (or one request) of the best's, the
lowest TTFT P99 decides, the figure the PDD report leads with. "Why" is the binding stage: the
server phase (timeline.phase_after) where the slowest tenth of a run's requests
spent most of their wait for the first token. The lines are plain text for a
terminal; `summary_lines` takes the runs and any further lines (a planner's
answer, say) so one function speaks for the whole comparison.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadgen.report.runs import RunData, distinct_labels
from loadgen.report.timeline import phase_after

SLOWEST_SHARE = 0.1  # the tail whose wait names the binding stage
TIE_SHARE = 0.01  # runs whose requests within SLA differ by at most this share of those sent (or one) tie


@dataclass(frozen=True)
class Binding:
    phase: str  # a timeline phase, e.g. "KV transfer"
    share: float  # of the slowest requests' summed TTFT


def ttft_phases(record: dict) -> dict[str, float]:
    """Seconds of each server phase between the request's arrival and its first token."""
    pdd = record.get("pdd") or {}
    stamps = sorted((t, name) for name, t in (pdd.get("timeline") or {}).items())
    first = (pdd.get("timeline") or {}).get("first_token")
    if not stamps or first is None:
        return {}
    pipeline, handed_off, spent = str(pdd.get("pipeline") or ""), False, defaultdict(float)
    for (start, name), (end, _) in zip(stamps, stamps[1:]):
        phase = phase_after(name, pipeline, handed_off)
        handed_off = handed_off or phase == "handoff"
        if start < first:
            spent[phase] += min(end, first) - start
    return dict(spent)


def binding_stage(run: RunData) -> Binding | None:
    """The phase that holds the slowest tenth of requests longest before their first token."""
    timed = sorted((r for r in run.ok_records() if r["ttft_s"] is not None), key=lambda r: r["ttft_s"])
    tail = timed[int(len(timed) * (1 - SLOWEST_SHARE)):]
    totals: dict[str, float] = defaultdict(float)
    for record in tail:
        for phase, seconds in ttft_phases(record).items():
            totals[phase] += seconds
    waited = sum(totals.values())
    if waited <= 0:
        return None
    phase = max(totals, key=totals.get)
    return Binding(phase, totals[phase] / waited)


def winner(runs: Sequence[RunData]) -> tuple[int, str]:
    """Index of the winning run and the criterion that picked it."""
    best = max(range(len(runs)), key=lambda i: runs[i].summary.goodput_rps)
    # Counts, not rates: a run's window ends with its last answer, so equal counts can differ in rate.
    margin = max(1, round(TIE_SHARE * max(run.summary.sent for run in runs)))
    if all(runs[best].summary.within_sla - run.summary.within_sla <= margin for run in runs):

        def p99(i: int) -> float:
            value = runs[i].summary.ttft_s.p99
            return float("inf") if value is None else value
        return min(range(len(runs)), key=p99), "TTFT P99"
    return best, "SLA goodput"


def _ttft_p99(run: RunData) -> str:
    value = run.summary.ttft_s.p99
    return "-" if value is None else f"{value:.2f} s"


def _relay_lines(runs: Sequence[RunData], labels: list[str], bindings: dict[str, Binding | None]) -> list[str]:
    """The mechanism: a WAN-bound cross-DC run beside a PDD run that the WAN does not bind."""
    modes = {run.summary.mode: (label, run) for label, run in zip(labels, runs)}
    if "pd-cross" not in modes or "pdd" not in modes:
        return []
    (cross, _), (pdd, pdd_run) = modes["pd-cross"], modes["pdd"]

    def phase(label: str) -> str | None:
        return bindings[label].phase if bindings[label] is not None else None

    if phase(cross) != "KV transfer" or phase(pdd) == "KV transfer":
        return []
    share = pdd_run.summary.rld_token_share or 0.0
    return [f"{pdd} takes the WAN out of the wait that binds {cross}: its relay decode (RLD) streams the first "
            f"tokens while the KV cache still crosses the line (RLD produced {share:.0%} of its output tokens)."]


def summary_lines(runs: Sequence[RunData], report: Path, extra: Sequence[str] = ()) -> list[str]:
    """The comparison's last words on a terminal: the verdict, any further lines, the report's path."""
    return [*verdict_lines(runs), *extra, f"Report: {report}"]


def verdict_lines(runs: Sequence[RunData]) -> list[str]:
    """Winner, the criterion that picked it, each run's binding stage, and the relay's mechanism."""
    if not runs:
        return ["No run completed."]
    labels = distinct_labels(list(runs))
    index, criterion = winner(runs)
    top = runs[index].summary
    if criterion == "SLA goodput":
        others = ", ".join(f"{label} {run.summary.goodput_rps:.2f}" for label, run in zip(labels, runs)
                           if run is not runs[index])
        lines = [f"Winner: {labels[index]}, with the most requests per second within the SLA "
                 f"({top.goodput_rps:.2f} req/s; {others})."]
    else:
        others = ", ".join(f"{label} {_ttft_p99(run)}" for label, run in zip(labels, runs) if run is not runs[index])
        counts = ", ".join(f"{label} {run.summary.within_sla} of {run.summary.sent}"
                           for label, run in zip(labels, runs))
        lines = [f"Winner: {labels[index]}, with the shortest wait for the first token in the slowest 1% of "
                 f"requests (TTFT P99 {_ttft_p99(runs[index])}; {others}).",
                 f"SLA goodput does not separate them: requests within the SLA were {counts}."]
    bindings = {label: binding_stage(run) for label, run in zip(labels, runs)}
    named = [f"{label} {b.phase} ({b.share:.0%})" for label, b in bindings.items() if b is not None]
    if named:
        lines.append("Why: the binding stage, where the slowest tenth of requests spent most of their wait for "
                     "the first token, is " + "; ".join(named) + ".")
    lines.extend(_relay_lines(runs, labels, bindings))
    return lines
